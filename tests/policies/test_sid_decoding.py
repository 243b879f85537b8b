"""Constrained SID decoding: the trie alone, then the real default model."""

from __future__ import annotations

import random

import pytest

from genmem.memory.sid import DEFAULT_SPEC, SID, SIDSpec
from genmem.policies.local import load_policy
from genmem.policies.sid_decoding import (
    MAX_BEAMS,
    SIDDecodingConfig,
    SIDTrie,
    TransformersSIDGenerator,
)
from tests.fakes import gsm8k_texts

SMALL = SIDSpec((3, 2, 2))
# fake token ids: level 1 -> 100..102, level 2 -> 200..201, level 3 -> 300..301
IDS = [[100 + c for c in range(3)], [200, 201], [300, 301]]


def test_trie_all_is_level_sets() -> None:
    trie = SIDTrie(SMALL, IDS, None)
    assert trie.size == 12
    assert trie.allowed([]) == IDS[0]
    assert trie.allowed([101]) == IDS[1]
    assert trie.allowed([101, 200]) == IDS[2]
    assert trie.contains((2, 1, 1)) and not trie.contains((3, 0, 0)) and not trie.contains((1, 1))


def test_trie_occupied_follows_leaves_only() -> None:
    trie = SIDTrie(SMALL, IDS, [(0, 1, 0), (0, 1, 1), (2, 0, 1)])
    assert trie.size == 3
    assert trie.allowed([]) == [100, 102]
    assert trie.allowed([100]) == [201]
    assert trie.allowed([100, 201]) == [300, 301]
    assert trie.allowed([102, 200]) == [301]
    assert trie.contains((2, 0, 1)) and not trie.contains((2, 0, 0))
    # a dead beam (prefix outside the trie) still gets a non-empty answer
    assert trie.allowed([101])
    assert trie.allowed([999])
    assert trie.codes([100, 201, 300]) == (0, 1, 0)
    assert trie.codes([201]) is None


def test_trie_under_parents_opens_the_last_level() -> None:
    trie = SIDTrie.under_parents(SMALL, IDS, [(1, 0), (1, 0), (2, 1)])
    assert trie.size == 4
    assert trie.allowed([]) == [101, 102]
    assert trie.allowed([101, 200]) == [300, 301]
    assert not trie.contains((0, 0, 0))


def test_config_rejects_bad_combinations() -> None:
    with pytest.raises(ValueError, match="allowed="):
        SIDDecodingConfig(allowed="everything")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="constrained=True"):
        SIDDecodingConfig(allowed="occupied", constrained=False)
    with pytest.raises(ValueError, match="batch_size"):
        SIDDecodingConfig(batch_size=0)


# -- the real embedded model -----------------------------------------------------------------


def _contexts(n: int) -> list[str]:
    """Varied contexts: GSM8K problems, trajectories, one-liners, noise, other languages."""
    rng = random.Random(7)
    maths = gsm8k_texts(n)
    extra = [
        "",
        "?",
        "Book a table for two in Lisbon tomorrow at 8pm.",
        "Trajectory: went to kitchen -> opened fridge -> took apple -> failed to heat it.",
        "Résoudre l'équation 3x + 5 = 20.",
        "<SID_L1_3> not a real sid <SID_L9_99>",
        "a" * 3000 if n < 50 else "a" * 300,
        "def f(x):\n    return x ** 2  # what does f(12) return?",
    ]
    out = []
    for i in range(n):
        out.append(extra[i // 5 % len(extra)] if i % 5 == 0 else maths[i][: rng.randrange(20, 240)])
    return out


@pytest.fixture(scope="module")
def generator(default_policy) -> TransformersSIDGenerator:
    return TransformersSIDGenerator(default_policy, DEFAULT_SPEC)


@pytest.mark.slow
def test_greedy_on_200_contexts_is_always_valid(generator) -> None:
    contexts = _contexts(200)
    results = generator.decode(contexts, k=1)
    assert len(results) == 200
    for res in results:
        assert res.invalid == 0
        assert len(res.candidates) == 1
        DEFAULT_SPEC.parse(res.candidates[0].sid)  # raises if not valid
        assert res.candidates[0].score < 0


@pytest.mark.slow
def test_beam_is_distinct_sorted_and_consistent_with_greedy(generator) -> None:
    context = _contexts(3)[1]
    greedy = generator.generate(context, k=1)[0]
    beams = generator.generate(context, k=10)
    sids = [c.sid for c in beams]
    scores = [c.score for c in beams]
    assert len(sids) == 10 == len(set(sids))
    assert scores == sorted(scores, reverse=True)
    # beam search explores more than greedy, so its best is at least as likely
    assert beams[0].score >= greedy.score - 1e-3
    assert [generator.generate(context, k=10)[i].sid for i in range(10)] == sids  # deterministic


@pytest.mark.slow
@pytest.mark.parametrize("allowed", ["all", "occupied"])
def test_trie_engine_matches_transformers_generate(small_bank, allowed) -> None:
    # float32: in bfloat16 the two engines' batched sums round differently and near-ties swap
    default_policy = load_policy(dtype="float32")
    contexts = _contexts(8)[1:3]
    kwargs = {"bank": small_bank if allowed == "occupied" else None}
    fast = TransformersSIDGenerator(
        default_policy, config=SIDDecodingConfig(allowed=allowed), **kwargs
    )
    ref = TransformersSIDGenerator(
        default_policy, config=SIDDecodingConfig(allowed=allowed, engine="generate"), **kwargs
    )
    for k in (1, 4):
        for a, b in zip(
            fast.generate_batch(contexts, k), ref.generate_batch(contexts, k), strict=True
        ):
            assert [c.sid for c in a] == [c.sid for c in b]
            assert [c.score for c in a] == pytest.approx([c.score for c in b], abs=1e-3)


@pytest.mark.slow
def test_beam_50_and_batches(generator) -> None:
    contexts = _contexts(4)[1:3]
    results = generator.generate_batch(contexts, k=MAX_BEAMS)
    for res in results:
        assert len(res) == MAX_BEAMS == len({c.sid for c in res})
        for c in res:
            DEFAULT_SPEC.parse(c.sid)
    with pytest.raises(ValueError, match="1 to 50"):
        generator.generate("x", k=MAX_BEAMS + 1)
    with pytest.raises(ValueError, match="1 to 50"):
        generator.generate("x", k=0)


@pytest.mark.slow
def test_occupied_mode_returns_only_occupied_and_follows_the_bank(default_policy, small_bank):
    gen = TransformersSIDGenerator(
        default_policy, bank=small_bank, config=SIDDecodingConfig(allowed="occupied")
    )
    occupied = {str(s) for s in small_bank.occupied()}
    for res in gen.generate_batch(_contexts(6), k=5):
        assert {c.sid for c in res} == occupied  # k equals the bank size: all come back
    # fewer slots than k: only what exists
    assert {c.sid for c in gen.generate("task", k=20)} == occupied
    # the trie follows inserts and deletions
    new = SID((9, 9, 1, 1))
    small_bank.insert(new, "new")
    small_bank.revise(SID((0, 0, 0, 0)), "")
    now = {c.sid for c in gen.generate("task", k=20)}
    assert now == (occupied | {str(new)}) - {str(SID((0, 0, 0, 0)))}


@pytest.mark.slow
def test_prefix_mode_stays_under_occupied_parents(default_policy, small_bank) -> None:
    gen = TransformersSIDGenerator(
        default_policy, bank=small_bank, config=SIDDecodingConfig(allowed="prefix")
    )
    parents = {s.codes[:-1] for s in small_bank.occupied()}
    res = gen.generate("Natalia sold clips in April and May.", k=20)
    assert len(res) == 20
    assert all(DEFAULT_SPEC.parse(c.sid).codes[:-1] in parents for c in res)


@pytest.mark.slow
def test_unconstrained_untrained_model_is_reported_invalid(default_policy) -> None:
    gen = TransformersSIDGenerator(default_policy, config=SIDDecodingConfig(constrained=False))
    res = gen.decode(["What is 2 + 2?"], k=1)[0]
    assert len(res.raw) == 1
    assert res.invalid + len(res.candidates) == 1
    for c in res.candidates:
        DEFAULT_SPEC.parse(c.sid)


@pytest.mark.slow
def test_generator_needs_a_bank_for_bank_modes(default_policy) -> None:
    with pytest.raises(ValueError, match="needs a bank"):
        TransformersSIDGenerator(default_policy, config=SIDDecodingConfig(allowed="occupied"))
