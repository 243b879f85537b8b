"""Models with sliding-window layers (Gemma 3) take the reference paths, and get the same answers.

The tree engine and packed choice scoring read a prompt's continuations through a custom 4D
attention mask, which a sliding-window layer would cut by position. So such a model decodes SIDs
with ``trie`` and scores commands ``batched``. A tiny random Gemma 3 whose window (4 tokens) is
shorter than every prompt stands in for the real one (an opt-in extra: ``genmem[gemma]``).
"""

from __future__ import annotations

import pytest

from genmem.policies.choice_scoring import score_choices
from genmem.policies.local import LocalPolicy
from genmem.policies.policy_dir import PolicyInfo
from genmem.policies.prefix_cache import PrefixCache
from genmem.policies.sid_decoding import SIDDecodingConfig, TransformersSIDGenerator
from genmem.policies.sid_tree import supports_tree
from tests.fakes import gsm8k_texts, tiny_gemma3
from tests.policies.test_choice_scoring import SHARING, _full_forward, _prompt


@pytest.fixture(scope="module")
def gemma_policy() -> LocalPolicy:
    from transformers import AutoTokenizer

    from genmem.policies.embedded import embedded_directory

    tok = AutoTokenizer.from_pretrained(embedded_directory())
    return LocalPolicy(
        model=tiny_gemma3(tok, seed=5),
        tokenizer=tok,
        info=PolicyInfo(base_model="tiny-gemma3"),
        prefixes=PrefixCache(),
    )


def test_sids_come_from_the_reference_engine(gemma_policy, small_bank) -> None:
    assert not supports_tree(gemma_policy.model)
    contexts = [t[:160] for t in gsm8k_texts(2)]
    for allowed, bank in (("all", None), ("occupied", small_bank)):
        tree, trie, generate = (
            TransformersSIDGenerator(
                gemma_policy, bank=bank, config=SIDDecodingConfig(allowed=allowed, engine=engine)
            )
            for engine in ("tree", "trie", "generate")
        )
        for k in (1, 5):
            for context in contexts:
                asked = tree.generate(context, k)
                assert asked == trie.generate(context, k)
                # transformers' own generate, whose masks know the window, agrees
                assert [c.sid for c in asked] == [c.sid for c in generate.generate(context, k)]


def test_commands_are_scored_one_row_each_and_equal_a_full_forward(gemma_policy) -> None:
    prompt = _prompt(gemma_policy)
    assert gemma_policy.prefixes is not None
    gemma_policy.prefixes.clear()
    packed = score_choices(gemma_policy, prompt, SHARING)  # asks for packed: gets batched
    expected = [_full_forward(gemma_policy, prompt, c) for c in SHARING]
    assert packed == pytest.approx(expected, abs=1e-4)
    assert score_choices(gemma_policy, prompt, SHARING, layout="batched") == pytest.approx(packed)
