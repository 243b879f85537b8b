"""Flags generated from a pydantic model's fields (genmem.cli.fields), and the commands that use
them: one default per concept, the library's, whatever command shows it."""

from __future__ import annotations

import argparse
from typing import Literal

import pytest
from pydantic import BaseModel, Field

from genmem.cli.common import CLIError
from genmem.cli.fields import add_field_flags, model_from_args
from genmem.cli.main import build_parser


class Settings(BaseModel):
    runs: int = Field(ge=1, description="Runs to make.")
    k: int = Field(default=5, ge=1, le=50, description="Entries a lookup returns.")
    mode: Literal["fast", "slow"] = Field(default="fast", description="How to run.")
    rerank: bool = Field(default=True, description="Rerank the candidates.")
    strict: bool = Field(default=False, description="Refuse anything odd.")
    cap: int | None = Field(default=None, ge=1, description="Reply cap.")
    steps: int = Field(default=0, ge=0, description="StackPlanner steps.")


def _parser(**kwargs) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(exit_on_error=False)
    add_field_flags(p, Settings, **kwargs)
    return p


def test_fields_become_flags_with_their_defaults_choices_and_help() -> None:
    p = _parser()
    flags = {a.option_strings[0]: a for a in p._actions if a.option_strings[1:] == []}
    assert flags["--runs"].required and flags["--k"].default == 5
    assert flags["--mode"].choices == ("fast", "slow")
    assert flags["--no-rerank"].dest == "rerank" and flags["--strict"].dest == "strict"
    assert flags["--k"].help == "entries a lookup returns (default 5)"
    assert flags["--cap"].help == "reply cap" and flags["--steps"].help.startswith("StackPlanner")
    assert flags["--no-rerank"].help == "rerank the candidates (on by default)"
    args = p.parse_args(["--runs", "2"])
    assert model_from_args(Settings, args) == Settings(runs=2)
    args = p.parse_args(["--runs", "2", "--no-rerank", "--strict", "--cap", "9", "--mode", "slow"])
    assert model_from_args(Settings, args) == Settings(
        runs=2, rerank=False, strict=True, cap=9, mode="slow"
    )


@pytest.mark.parametrize(
    ("argv", "message"),
    [(["--runs", "0"], "must be >= 1"), (["--steps", "-1"], "must be >= 0")],
)
def test_integer_bounds_are_checked_by_argparse(argv, message) -> None:
    with pytest.raises(argparse.ArgumentError, match=message):
        _parser().parse_args(argv)


def test_a_value_the_model_refuses_names_its_flag() -> None:
    args = _parser().parse_args(["--runs", "1", "--k", "60"])
    with pytest.raises(CLIError, match=r"--k 60: Input should be less than or equal to 50"):
        model_from_args(Settings, args)
    assert model_from_args(Settings, args, k=7).k == 7  # a value given outright wins


def test_overrides_rename_a_flag_and_replace_what_it_shows() -> None:
    p = _parser(names=["k"], overrides={"k": {"flag": "--memory-k", "help": "mine"}})
    (action,) = [a for a in p._actions if a.dest == "k"]
    assert action.option_strings == ["--memory-k"] and action.help == "mine"
    assert action.metavar == "MEMORY_K"
    assert p.parse_args(["--memory-k", "3"]).k == 3


def _defaults(argv: list[str]) -> dict[str, object]:
    """What ``genmem ARGV`` parses to (the defaults of every flag not in ``argv``)."""
    parser = build_parser()
    return vars(parser.parse_args(argv))


def test_commands_show_the_library_defaults() -> None:
    from genmem.experiments.evaluate import EvalConfig
    from genmem.experiments.evolution_config import EvolveConfig
    from genmem.graph.retriever import RetrieverConfig
    from genmem.training.config import RolloutConfig

    schedule = ["--blocks", "1", "--block-size", "1", "--probe-size", "1"]
    evolve = _defaults(["evolve", "--bank", "b", *schedule, "--bench", "gsm8k-test", "--out", "o"])
    run = _defaults(["run", "--bank", "b", "--out", "o"])
    grpo = _defaults(["train", "grpo", "--bank", "b", "--out", "o"])
    library = EvolveConfig(blocks=1, block_size=1, probe_size=1)
    for name in ("model", "candidates", "rerank", "allowed", "memory_k", "max_steps"):
        assert evolve[name] == getattr(library, name)
    read = EvalConfig(methods=["none"]).allowed
    assert run["allowed"] == RetrieverConfig().allowed == read == "occupied"
    rollout = RolloutConfig()
    for name in ("max_steps", "max_new_tokens", "judge", "max_failures", "completion"):
        assert grpo[name] == getattr(rollout, name)
