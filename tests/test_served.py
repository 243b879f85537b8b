"""The served graphs: every ``langgraph.json`` name is a factory the server can call, each builds
its graph on first use without loading weights, and importing the graph layer builds none."""

from __future__ import annotations

import importlib.util
import inspect
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from langgraph.graph.state import CompiledStateGraph

from genmem.policies import local

REPO = Path(__file__).resolve().parents[1]


def _served_entries() -> dict[str, str]:
    return json.loads((REPO / "langgraph.json").read_text(encoding="utf-8"))["graphs"]


def test_every_served_graph_is_a_lazy_factory(monkeypatch) -> None:
    loaded_before = dict(local._CACHE)
    for name, spec in _served_entries().items():
        path, _, variable = spec.partition(":")
        module_spec = importlib.util.spec_from_file_location(f"served_{name}", REPO / path)
        assert module_spec is not None and module_spec.loader is not None, spec
        module = importlib.util.module_from_spec(module_spec)
        monkeypatch.setitem(sys.modules, module_spec.name, module)  # as the server loads it
        module_spec.loader.exec_module(module)
        factory = module.__dict__[variable]  # the server's look-up, not getattr
        assert callable(factory) and not inspect.signature(factory).parameters, name
        graph = factory()
        assert isinstance(graph, CompiledStateGraph), name
        # compiled bare: the server gives every run its own store and checkpointer
        assert graph.store is None and graph.checkpointer is None, name
        assert factory() is graph, f"{name}: built once, then the same graph"
    assert local._CACHE == loaded_before  # no model was loaded to build them


def test_gsm8k_loop_is_the_genmem_loop() -> None:
    from genmem import served

    gsm8k, loop = served.genmem_gsm8k(), served.genmem()
    assert set(gsm8k.builder.nodes) == set(loop.builder.nodes)
    assert gsm8k.builder.input_schema is loop.builder.input_schema


def test_importing_the_graph_layer_builds_no_graph() -> None:
    # In a fresh interpreter: this one has imported the graph layer already.
    script = textwrap.dedent(
        """
        import langgraph.graph.state as state

        counts = {"built": 0, "compiled": 0}
        init, compile_ = state.StateGraph.__init__, state.StateGraph.compile

        def counting_init(self, *args, **kwargs):
            counts["built"] += 1
            init(self, *args, **kwargs)

        def counting_compile(self, *args, **kwargs):
            counts["compiled"] += 1
            return compile_(self, *args, **kwargs)

        state.StateGraph.__init__ = counting_init
        state.StateGraph.compile = counting_compile

        import genmem.graph
        from genmem.graph import add_memory
        import genmem.served

        held = sorted(
            f"{name}.{attr}"
            for name, module in list(sys.modules.items())
            if name.startswith("genmem.")
            for attr, value in vars(module).items()
            if isinstance(value, (state.StateGraph, state.CompiledStateGraph))
        )
        print(json.dumps({**counts, "held": held}))
        """
    )
    env = {**os.environ, "PYTHONPATH": f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    result = subprocess.run(
        [sys.executable, "-c", f"import json, sys\n{script}"],
        capture_output=True,
        text=True,
        env=env,
        check=True,
        timeout=300,
    )
    assert json.loads(result.stdout.splitlines()[-1]) == {"built": 0, "compiled": 0, "held": []}
