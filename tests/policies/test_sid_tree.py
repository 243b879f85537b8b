"""The tree engine of SID decoding: its parts alone, then against the reference engines.

The reference is ``engine="trie"`` (one cache row per beam), itself checked against
transformers' ``generate`` in ``test_sid_decoding.py``. A tiny random Llama with the default
tokenizer gives sharp, varied distributions (many contexts and widths in seconds); the real
default model is compared in ``test_sid_decoding.py`` and below.
"""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest

from genmem.memory.sid import SIDSpec
from genmem.policies.local import LocalPolicy, load_policy
from genmem.policies.policy_dir import PolicyInfo
from genmem.policies.prefix_cache import PrefixCache
from genmem.policies.sid_decoding import SIDDecodingConfig, TransformersSIDGenerator
from genmem.policies.sid_tree import TrieTables, plan_lookahead, supports_tree
from tests.fakes import gsm8k_texts, tiny_llama

SMALL = SIDSpec((3, 2, 2))
IDS = [[100, 101, 102], [200, 201], [300, 301]]


def test_tables_list_each_nodes_children_in_code_order() -> None:
    leaves = {(2, 1, 0), (0, 1, 1), (0, 0, 1), (0, 1, 0)}
    t = TrieTables.build(SMALL.sizes, IDS, leaves, "cpu")
    # level 0: the root's children are codes 0 and 2
    assert t.codes[0].tolist() == [[0, 2]]
    # level 1 nodes are (0,) and (2,) in that order; (0,) has children 0 and 1, (2,) only 1
    assert t.codes[1].tolist() == [[0, 1], [1, -1]]
    # level 2 nodes: (0,0), (0,1), (2,1)
    assert t.codes[2].tolist() == [[1, -1], [0, 1], [0, -1]]
    assert t.nodes[0].tolist() == [[0, 1]]
    assert t.nodes[1].tolist()[0] == [0, 1]
    assert [x.tolist() for x in t.tokens] == IDS
    every = TrieTables.build(SMALL.sizes, IDS, None, "cpu")
    assert [c.tolist() for c in every.codes] == [[[0, 1, 2]], [[0, 1]], [[0, 1]]]


def test_lookahead_takes_the_narrowest_levels_that_fit_and_never_two_neighbours() -> None:
    widths = [48, 16, 8, 8]
    assert plan_lookahead(widths, 1, 32) == {2}  # 8 children beat 16
    assert plan_lookahead(widths, 4, 32) == {2}
    assert plan_lookahead(widths, 5, 32) == set()  # 40 extra tokens: over the budget
    assert plan_lookahead(widths, 20, 0) == set()
    assert plan_lookahead(widths, 1, 1024) == {2}  # level 1 would overlap level 2
    assert plan_lookahead([8, 8, 8, 8, 8, 8], 1, 100) == {1, 3}
    assert plan_lookahead([48, 16], 1, 100) == set()  # two levels: nothing to skip


def test_only_models_without_sliding_windows_take_the_tree() -> None:
    llama = SimpleNamespace(config=SimpleNamespace(layer_types=None, sliding_window=None))
    gemma = SimpleNamespace(
        config=SimpleNamespace(layer_types=["sliding_attention", "full_attention"])
    )
    qwen = SimpleNamespace(  # a window in the config that no layer uses
        config=SimpleNamespace(sliding_window=4096, use_sliding_window=False)
    )
    mistral = SimpleNamespace(config=SimpleNamespace(sliding_window=4096))
    assert supports_tree(llama) and supports_tree(qwen)
    assert not supports_tree(gemma) and not supports_tree(mistral)
    assert not supports_tree(object())


def test_config_rejects_an_unknown_engine_or_a_negative_lookahead() -> None:
    with pytest.raises(ValueError, match="engine="):
        SIDDecodingConfig(engine="fast")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="lookahead_tokens=-1"):
        SIDDecodingConfig(lookahead_tokens=-1)


@pytest.fixture(scope="module")
def tiny_policy() -> LocalPolicy:
    """A 2-layer random Llama with the default tokenizer, a prefix cache like a shared load."""
    from transformers import AutoTokenizer

    from genmem.policies.embedded import embedded_directory

    tok = AutoTokenizer.from_pretrained(embedded_directory())
    model = tiny_llama(tok, seed=3).eval()
    return LocalPolicy(
        model=model, tokenizer=tok, info=PolicyInfo(base_model="tiny"), prefixes=PrefixCache()
    )


TIE = 1e-4
"""Scores closer than this may come out in either order: float rounding differs between a prompt
read in one pass or two (the random tiny model has SIDs whose scores differ by 2e-6)."""


def _same(tree: list, ref: list) -> None:
    """The same scores, and the same SIDs except where two (near-)tied ones swap places."""
    assert [c.score for c in tree] == pytest.approx([c.score for c in ref], abs=TIE)
    where = {c.sid: c.score for c in ref}
    for i, c in enumerate(tree):
        if c.sid == ref[i].sid:
            continue
        if c.sid in where:  # swapped with a tied neighbour
            assert abs(where[c.sid] - c.score) < TIE, (i, c, ref[i])
        else:  # a tie at the cut: the last places may hold either
            assert abs(c.score - ref[-1].score) < TIE, (i, c, ref[-1])


@pytest.mark.parametrize("allowed", ["all", "occupied", "prefix"])
@pytest.mark.parametrize("lookahead", [None, 0, 4096])
def test_tree_returns_the_reference_sids_and_scores(
    tiny_policy, small_bank, allowed, lookahead
) -> None:
    bank = small_bank if allowed != "all" else None
    # contexts of very different lengths share a batch: the padding sits after the cached head
    contexts = [t[: 40 + 60 * i] for i, t in enumerate(gsm8k_texts(5))] + ["?"]
    make = lambda engine, **kw: TransformersSIDGenerator(  # noqa: E731
        tiny_policy, bank=bank, config=SIDDecodingConfig(allowed=allowed, engine=engine, **kw)
    )
    tree, ref = make("tree", lookahead_tokens=lookahead), make("trie")
    for k in (1, 3, 8, 50):
        for a, b in zip(
            tree.generate_batch(contexts, k), ref.generate_batch(contexts, k), strict=True
        ):
            _same(a, b)
        for context in contexts[:2]:  # one context per call, as an agent asks
            _same(tree.generate(context, k), ref.generate(context, k))
    assert tiny_policy.prefixes is not None and tiny_policy.prefixes.reused_tokens > 0


def test_fewer_sids_than_beams_come_back_alone(tiny_policy, small_bank) -> None:
    bank = small_bank
    gen = TransformersSIDGenerator(
        tiny_policy, bank=bank, config=SIDDecodingConfig(allowed="occupied")
    )
    res = gen.decode(["find the apple"], k=50)[0]
    assert {c.sid for c in res.candidates} == {str(s) for s in bank.occupied()}
    assert res.invalid == 0 and all(math.isfinite(c.score) for c in res.candidates)


def test_the_cached_head_gives_what_a_whole_prompt_gives(tiny_policy) -> None:
    gen = TransformersSIDGenerator(tiny_policy)
    context = gsm8k_texts(1)[0]
    assert tiny_policy.prefixes is not None
    tiny_policy.prefixes.clear()
    cold = gen.generate(context, 5)  # reads the head and keeps it
    warm = gen.generate(context, 5)  # starts from the kept head
    _same(warm, cold)
    plain = TransformersSIDGenerator(  # a policy without a prefix cache reads prompts whole
        LocalPolicy(model=tiny_policy.model, tokenizer=tiny_policy.tokenizer, info=tiny_policy.info)
    )
    _same(plain.generate(context, 5), cold)


@pytest.mark.slow
@pytest.mark.parametrize("allowed", ["all", "prefix"])
def test_tree_matches_the_reference_on_the_default_model(small_bank, allowed) -> None:
    policy = load_policy(dtype="float32")
    bank = small_bank if allowed != "all" else None
    contexts = [t[:200] for t in gsm8k_texts(3)]
    tree = TransformersSIDGenerator(policy, bank=bank, config=SIDDecodingConfig(allowed=allowed))
    ref = TransformersSIDGenerator(
        policy, bank=bank, config=SIDDecodingConfig(allowed=allowed, engine="trie")
    )
    for k in (1, 20):
        for context in contexts:  # the real model has no such ties: exactly the same SIDs
            a, b = tree.generate(context, k), ref.generate(context, k)
            assert [c.sid for c in a] == [c.sid for c in b]
            _same(a, b)
