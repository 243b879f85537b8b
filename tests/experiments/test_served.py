"""Every graph ``langgraph.json`` names imports as an uncompiled builder without loading weights."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

from langgraph.graph import StateGraph

from genmem.policies import local

REPO = Path(__file__).resolve().parents[2]


def test_every_served_graph_is_a_lazy_builder(monkeypatch) -> None:
    config = json.loads((REPO / "langgraph.json").read_text(encoding="utf-8"))
    loaded_before = dict(local._CACHE)
    for name, spec in config["graphs"].items():
        path, _, variable = spec.partition(":")
        module_spec = importlib.util.spec_from_file_location(f"served_{name}", REPO / path)
        assert module_spec is not None and module_spec.loader is not None, spec
        module = importlib.util.module_from_spec(module_spec)
        monkeypatch.setitem(sys.modules, module_spec.name, module)  # as the server loads it
        module_spec.loader.exec_module(module)
        graph = getattr(module, variable)
        assert isinstance(graph, StateGraph), f"{name}: the server compiles it with its store"
    assert local._CACHE == loaded_before  # no model was loaded to build them


def test_gsm8k_loop_is_the_genmem_loop() -> None:
    from genmem.experiments import served
    from genmem.graph import loop

    assert set(served.gsm8k.nodes) == set(loop.graph.nodes)
    assert served.gsm8k.input_schema is loop.graph.input_schema
