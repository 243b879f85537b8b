"""The top-level package: what it exports, that importing it is light, and that the library
road (a bank from texts, then the closed loop with any chat model) works without the CLI."""

from __future__ import annotations

import inspect
import subprocess
import sys

import pytest

import genmem
from genmem.errors import InvalidModelSpec
from genmem.graph.addressing import addressing_for
from tests.fakes import RoutingChat

LESSONS = [
    "To split a bill evenly, add the tip to the total first, then divide by the number of people.",
    "For distance, multiply speed by time and keep the units the same throughout.",
    "When items come in packs, divide the count needed by the pack size and round up.",
    "For an average, add the values and divide by how many values there are.",
]


def test_every_public_name_resolves_and_is_listed() -> None:
    assert sorted(genmem.__all__) == sorted(["GenMemError", "__version__", *genmem._PUBLIC])
    for name in genmem.__all__:
        assert getattr(genmem, name) is not None
    assert set(genmem._PUBLIC) <= set(dir(genmem))
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        genmem.nothing  # noqa: B018


def test_public_functions_are_typed_and_document_their_arguments() -> None:
    for name in genmem._PUBLIC:
        value = getattr(genmem, name)
        if not inspect.isfunction(value):
            continue
        sig = inspect.signature(value)
        untyped = [
            p.name for p in sig.parameters.values() if p.annotation is inspect.Parameter.empty
        ]
        assert not untyped, f"{name}: {untyped} have no type"
        assert sig.return_annotation is not inspect.Signature.empty, name
        doc = inspect.getdoc(value) or ""
        assert "Args:" in doc and "Returns:" in doc, name
        for param in sig.parameters.values():
            key = f"**{param.name}" if param.kind is param.VAR_KEYWORD else param.name
            assert f"{key}:" in doc, f"{name}: argument {param.name} is not documented"


def test_importing_genmem_loads_no_framework() -> None:
    code = (
        "import sys, genmem; heavy = [m for m in ('torch', 'transformers', 'langgraph', "
        "'langchain_core', 'sklearn') if m in sys.modules]; print(heavy)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_a_bank_from_texts_serves_the_closed_loop_of_a_non_local_model(
    tmp_path, monkeypatch
) -> None:
    monkeypatch.setenv("GENMEM_CACHE", str(tmp_path / "cache"))
    url = f"sqlite:///{tmp_path}/bank.db?bank=lessons"
    built = genmem.bank_from_texts(LESSONS, url)
    events = built.bank.stats().events
    before = {str(s): built.bank.get(s).payload for s in built.bank.occupied()}

    # a hosted model has no local weights: auto quantises with the bank's codebooks and never
    # loads the embedded policy to find out that it is not aligned
    def no_policy(*args: object, **kwargs: object) -> None:
        raise AssertionError("the embedded policy was loaded")

    monkeypatch.setattr("genmem.graph.addressing.sid_generator_for", no_policy)
    chat = RoutingChat(answer="15")
    loop = genmem.closed_loop(chat, max_steps=2)
    out = loop.invoke(
        {"query": "Four friends share a $48 meal and a $12 tip. How much does each pay?"},
        context={"bank": built.bank},
    )
    assert out["answer"] == "15"
    assert out["addresser"] == "quantizer"
    # what memory_lookup read there (the slot or its nearest entries) reached the rewrite, and
    # MemEvolver wrote to the bank
    assert any(text[:40] in p for text in before.values() for p in chat.texts())
    assert chat.decisions == 1 and genmem.open_bank(url).stats().events > events


def test_a_sid_model_must_be_local() -> None:
    assert addressing_for("local") is None
    assert addressing_for("openai:gpt-4o-mini") is not None
    with pytest.raises(InvalidModelSpec, match="use local or local:DIR"):
        addressing_for("openai:gpt-4o-mini", "vllm:http://x:1/v1#m")
    with pytest.raises(ValueError, match="beam=0"):
        genmem.closed_loop(RoutingChat(), beam=0)
