"""The prefix cache: which beginning it reuses, when it forgets, and that replies stay the same."""

from __future__ import annotations

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from pydantic import BaseModel, Field

from genmem.policies.chat_local import ChatLocal
from genmem.policies.prefix_cache import PrefixCache


class FakeKV:
    """A key/value cache that only knows its length (what PrefixCache reads and cuts)."""

    def __init__(self, n: int) -> None:
        self.n = n

    def get_seq_length(self) -> int:
        return self.n

    def crop(self, m: int) -> None:
        self.n = self.n + m if m < 0 else m


def test_the_longest_shared_beginning_is_reused_from_a_private_copy() -> None:
    cache = PrefixCache(min_tokens=4)
    system, other = list(range(100, 140)), list(range(500, 540))
    cache.put([*system, 1, 2], FakeKV(42 + 7), owner="w")  # prompt + a 7-token reply: cut off
    cache.put(other, FakeKV(40), owner="w")
    got = cache.take([*system, 1, 9, 9], owner="w")
    assert got is not None and got.get_seq_length() == 41  # the system prompt and token 1
    got.crop(-30)  # the caller's copy: the stored cache keeps its length
    assert cache.take([*system, 1, 2, 3], owner="w").get_seq_length() == 42
    assert cache.take([*system, 1, 2], owner="w").get_seq_length() == 41  # one token left to read
    assert cache.take([7, 7, 7, 7, 7], owner="w") is None
    assert cache.reused_tokens == 41 + 42 + 41


def test_short_beginnings_new_weights_and_the_budget() -> None:
    cache = PrefixCache(max_tokens=100, min_tokens=8)
    cache.put(list(range(50)), FakeKV(50), owner="a")
    assert cache.take(list(range(5)) + [99] * 10, owner="a") is None  # 5 < min_tokens
    assert cache.take(list(range(60)), owner="b") is None  # other weights: everything forgotten
    assert len(cache) == 0
    cache.put(list(range(50)), FakeKV(50), owner="b")
    cache.put(list(range(50)) + [7] * 20, FakeKV(70), owner="b")  # extends it: replaces it
    assert len(cache) == 1
    cache.put(list(range(200, 240)), FakeKV(40), owner="b")  # 70 + 40 > 100: the oldest goes
    assert len(cache) == 1 and cache.take(list(range(60)), owner="b") is None
    cache.put(list(range(300, 340)), FakeKV(40), owner="a")  # other weights again: all gone
    assert len(cache) == 1 and cache.take([*list(range(300, 340)), 1], owner="b") is None


class SlidingKV(FakeKV):
    """A cache with a sliding-window layer past its window: it cannot be cut back (Gemma 3)."""

    def crop(self, m: int) -> None:
        raise RuntimeError("`crop` was called, but the sliding window size was already reached")


def test_a_cache_that_cannot_be_cut_back_is_neither_kept_nor_reused() -> None:
    cache = PrefixCache(min_tokens=4)
    prompt = list(range(100, 140))
    cache.put(prompt, SlidingKV(40 + 5), owner="w")  # a reply after the prompt: cannot drop it
    assert len(cache) == 0
    cache.put(prompt, SlidingKV(40), owner="w")  # exactly the prompt: kept as it is
    assert len(cache) == 1
    assert cache.take([*prompt, 1, 2], owner="w").get_seq_length() == 40  # nothing to cut
    assert cache.take([*prompt[:30], 9, 9], owner="w") is None  # would need a cut: a miss


class Step(BaseModel):
    """One step."""

    thought: str = Field(max_length=60)
    answer: int


@pytest.mark.slow
def test_real_model_replies_are_the_same_with_the_prefix_cache(default_policy) -> None:
    """A growing conversation and a schema call: same replies with and without the cache."""
    system = SystemMessage(
        "You are a careful assistant for arithmetic word problems. Read the problem, reason "
        "briefly, and give the final number. Keep every reply short and plain."
    )
    turns = [
        [system, HumanMessage("Tom has 3 apples and buys 4 more. How many now?")],
        [system, HumanMessage("Tom has 3 apples and buys 4 more. How many now?"),
         AIMessage("He has 7 apples."), HumanMessage("And if he eats 2 of them?")],
    ]  # fmt: skip

    def replies() -> list[str]:
        chat = ChatLocal.from_policy(default_policy, max_new_tokens=20)
        texts = [chat.invoke(t).content for t in turns]
        step = chat.with_structured_output(Step).invoke(
            [system, HumanMessage("A pen costs 2 dollars. What do 5 pens cost?")]
        )
        return [*texts, step.model_dump_json()]

    saved = default_policy.replies, default_policy.prefixes
    try:
        default_policy.replies, default_policy.prefixes = None, None
        plain = replies()
        default_policy.prefixes = cache = PrefixCache()
        cached = replies()
    finally:
        default_policy.replies, default_policy.prefixes = saved
    assert cached == plain
    assert cache.reused_tokens > 60  # the system prompt at least twice, the first turn once
