"""Choice scoring on the real default model: both layouts, cached or not, equal a full forward."""

from __future__ import annotations

import pytest

from genmem.policies.choice_scoring import score_choices
from genmem.policies.local import LocalPolicy

CHOICES = ["take printer from shelf", "look", "go north", "put printer on bookshelf"]
# commands that share beginnings (one trie node serves several) and one the others extend
SHARING = [*CHOICES, "go south", "go north then east", "take printer", "take printer from desk"]


def _prompt(policy: LocalPolicy, extra: str = "") -> str:
    messages = [
        {"role": "system", "content": "You play a text game. Reply with the next command."},
        {
            "role": "user",
            "content": "Objective: pick up the printer from the shelf, then put it on the "
            f"bookshelf.{extra}\nValid commands: {', '.join(CHOICES)}\nNext command?",
        },
    ]
    template = policy.tokenizer.apply_chat_template
    return template(messages, add_generation_prompt=True, tokenize=False)


def _full_forward(policy: LocalPolicy, prompt: str, choice: str) -> float:
    import torch

    tok = policy.tokenizer
    n = len(tok(prompt, add_special_tokens=False)["input_ids"])
    ids = tok(prompt + choice + tok.eos_token, add_special_tokens=False, return_tensors="pt")
    with torch.inference_mode():
        runner = policy.runner  # on the GPU where there is one
        logp = runner(input_ids=ids["input_ids"].to(runner.device)).logits.float().log_softmax(-1)
    row = ids["input_ids"][0]
    picked = [logp[0, j - 1, row[j]].item() for j in range(n, len(row))]
    return sum(picked) / len(picked)


@pytest.mark.slow
@pytest.mark.parametrize("layout", ["packed", "batched"])
def test_scores_equal_a_full_forward_per_choice(default_policy: LocalPolicy, layout) -> None:
    prompt = _prompt(default_policy)
    if default_policy.prefixes is not None:
        default_policy.prefixes.clear()  # the prompt is read here, not taken from a cache
    scores = score_choices(default_policy, prompt, SHARING, layout=layout)
    expected = [_full_forward(default_policy, prompt, c) for c in SHARING]
    assert scores == pytest.approx(expected, abs=1e-4)
    # the objective's first step outranks a command that does nothing
    assert scores[0] > scores[1]


@pytest.mark.slow
def test_the_layouts_agree_from_the_cache_too(default_policy: LocalPolicy) -> None:
    prompt = _prompt(default_policy, " You see a desk.")
    packed = score_choices(default_policy, prompt, SHARING, layout="packed")
    again = score_choices(default_policy, prompt, SHARING, layout="packed")  # prompt cached
    batched = score_choices(default_policy, prompt, SHARING, layout="batched")
    assert packed == pytest.approx(batched, abs=1e-4)
    assert again == pytest.approx(batched, abs=1e-4)


@pytest.mark.slow
def test_a_prompt_that_extends_the_last_one_scores_the_same_from_the_cache(
    default_policy: LocalPolicy,
) -> None:
    first = _prompt(default_policy)
    longer = _prompt(default_policy, " You have played: look.")
    score_choices(default_policy, first, CHOICES)  # leaves its cache behind
    cached = score_choices(default_policy, longer, CHOICES)
    if default_policy.prefixes is not None:
        default_policy.prefixes.clear()
    fresh = score_choices(default_policy, longer, CHOICES)
    assert cached == pytest.approx(fresh, abs=2e-3)


def test_no_choice_or_an_empty_one_is_refused(default_policy: LocalPolicy) -> None:
    with pytest.raises(ValueError, match="at least one"):
        score_choices(default_policy, "x", [])
    with pytest.raises(ValueError, match="non-empty"):
        score_choices(default_policy, "x", ["look", "  "])
    with pytest.raises(ValueError, match="layout="):
        score_choices(default_policy, "x", ["look"], layout="tree")  # type: ignore[arg-type]
