"""The package's layers, read from its source: nothing imports upwards and no modules import
each other in a circle (imports inside functions and under TYPE_CHECKING count too)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "genmem"

# Which top-level parts each part may import (itself always). ``envs`` sits beside ``graph``.
ALLOWED = {
    "errors": set(),
    "memory": {"errors"},
    "tools": {"errors", "memory"},
    "policies": {"errors", "memory"},
    "graph": {"errors", "memory", "tools", "policies"},
    "envs": {"errors", "memory", "tools", "policies"},
    # the graphs langgraph.json serves: the scored loops need environments; nothing imports it
    "served": {"errors", "memory", "tools", "policies", "graph", "envs"},
    "experiments": {"errors", "memory", "tools", "policies", "graph", "envs", "training"},
    # an experiment may train a policy (codebook_policy); training never uses an experiment
    "training": {"errors", "memory", "tools", "policies", "graph", "envs"},
    "explorer": {"errors", "memory", "policies"},
    "cli": {
        "errors",
        "memory",
        "tools",
        "policies",
        "graph",
        "envs",
        "experiments",
        "training",
        "explorer",
    },
}


def _module(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _type_only(tree: ast.Module) -> set[int]:
    """The ids of the nodes under ``if TYPE_CHECKING:`` (imports no running program makes)."""
    return {
        id(inner)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and ast.unparse(node.test).endswith("TYPE_CHECKING")
        for inner in ast.walk(node)
    }


def _imports(*, runtime_only: bool = False) -> dict[str, set[str]]:
    """Module -> the genmem modules it imports (``from a import b`` counts ``a.b`` if a module);
    ``runtime_only`` leaves out imports under ``if TYPE_CHECKING:``."""
    sources = {_module(p): p for p in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in sources.items():
        found: set[str] = set()
        tree = ast.parse(path.read_text(encoding="utf-8"))
        skip = _type_only(tree) if runtime_only else set()
        for node in ast.walk(tree):
            if id(node) in skip:
                continue
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                if node.module.startswith("genmem"):
                    subs = {f"{node.module}.{a.name}" for a in node.names}
                    found |= (subs & sources.keys()) or {node.module}
            elif isinstance(node, ast.Import):
                found |= {a.name for a in node.names if a.name.startswith("genmem")}
        graph[name] = {m for m in found if m in sources and m != name}
    return graph


def _part(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_module_imports_a_higher_layer() -> None:
    graph = _imports()
    upward = sorted(
        f"{m} -> {d}"
        for m, deps in graph.items()
        for d in deps
        if _part(m) in ALLOWED
        and _part(d) in ALLOWED
        and _part(d) != _part(m)
        and _part(d) not in ALLOWED[_part(m)]
    )
    assert upward == []


TYPE_ONLY_CIRCLES = [["genmem.memory._bank_async", "genmem.memory.bank"]]
"""The one circle allowed, and only through a type-only import: the bank's async mixin annotates
``self: Bank`` (the class that inherits it)."""


def test_no_import_circles() -> None:
    assert _cycles(_imports(runtime_only=True)) == []
    assert _cycles(_imports()) == TYPE_ONLY_CIRCLES


@pytest.mark.parametrize(
    ("graph", "cycles"),
    [
        ({"a": {"b"}, "b": {"a"}, "c": {"a"}}, [["a", "b"]]),
        ({"a": {"b"}, "b": {"c"}, "c": set()}, []),
    ],
)
def test_the_circle_finder_finds_circles(graph, cycles) -> None:
    assert _cycles(graph) == cycles


CONFIG_SUFFIXES_REFUSED = ("Settings", "Preset", "Presets", "Budget", "Params", "Parameters")
"""Suffixes that no settings class carries: ``<Concern>Config`` names them (docs/development.md,
"Naming configs")."""


def _config_names(sources: dict[str, str]) -> list[str]:
    """Classes of ``sources`` (module -> text) that break the naming rule for configs, each with
    why: a refused suffix, an ``Options`` class outside the benchmark option groups, or a
    benchmark option group not named ``Options``."""
    bases: dict[str, set[str]] = {}
    where: dict[str, str] = {}
    for module, text in sources.items():
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.ClassDef):
                bases[node.name] = {ast.unparse(b).rsplit(".", 1)[-1] for b in node.bases}
                where[node.name] = module

    def option_group(name: str, seen: frozenset[str] = frozenset()) -> bool:
        if name == "EnvOptions":
            return True
        return any(option_group(b, seen | {name}) for b in bases.get(name, ()) if b not in seen)

    wrong = []
    for name in sorted(bases):
        place = f"{where[name]}.{name}"
        if name.endswith(CONFIG_SUFFIXES_REFUSED):
            wrong.append(f"{place}: a settings class ends in Config")
        elif name.endswith("Options") and name != "BenchOptions" and not option_group(name):
            wrong.append(f"{place}: Options names only a benchmark's option group (EnvOptions)")
        elif option_group(name) and not name.endswith("Options"):
            wrong.append(f"{place}: a benchmark's option group ends in Options")
    return wrong


def test_config_classes_follow_the_naming_rule() -> None:
    sources = {_module(p): p.read_text(encoding="utf-8") for p in PACKAGE.rglob("*.py")}
    assert _config_names(sources) == []


@pytest.mark.parametrize(
    ("source", "wrong"),
    [
        ("class EnvOptions: ...\nclass WebOptions(EnvOptions): ...\nclass GateConfig: ...", []),
        ("class EvalSettings: ...", ["m.EvalSettings: a settings class ends in Config"]),
        ("class RunOptions: ...", ["m.RunOptions: Options names only a benchmark's option group"]),
        (
            "class EnvOptions: ...\nclass QAOptions(EnvOptions): ...\nclass Web(QAOptions): ...",
            ["m.Web: a benchmark's option group ends in Options"],
        ),
    ],
)
def test_the_naming_rule_finds_wrong_names(source, wrong) -> None:
    found = _config_names({"m": source})
    assert [w.split(" (")[0] for w in found] == wrong
