"""The trained memory reader: its steps are the ranking interactor's own prompts before each
walkthrough command, games the bank holds are left out, a real-model run trains a reader that
ranks the walkthrough better than the model it started from, and ``--reader`` reaches the ranker.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import Field

pytest.importorskip("textworld")

from genmem.cli import main
from genmem.envs.cooking import CookingConfig, CookingEnvironment
from genmem.experiments.reader import (
    ReaderConfig,
    ranks_first,
    reader_games,
    reader_steps,
    run_reader,
)
from genmem.graph.subagents import SubAgent
from genmem.memory.sid import DEFAULT_SPEC
from genmem.memory.sqlite_store import SQLiteBankStore
from tests.conftest import TEST_HASH
from tests.fakes import FakeChat, FixedGenerator, ScoringChat
from tests.graph._banks import A

PAYLOAD = "Procedure: examine cookbook; take the ingredient; cook it as the recipe says; eat meal"


def _bank(directory: Path, sources: list[str]) -> str:
    """A bank holding :data:`PAYLOAD` at :data:`A`, built (its metadata says) from ``sources``."""
    bank = SQLiteBankStore(directory / "bank.db").create_bank(
        "cooking", spec=DEFAULT_SPEC, codebook_hash=TEST_HASH
    )
    bank.insert(A, PAYLOAD, metadata={"sources": [{"query": q} for q in sources]})
    return f"sqlite:///{directory}/bank.db?bank=cooking"


class _Walkthrough(FakeChat):
    """Scores the walkthrough's next command first, and keeps every conversation it scored."""

    plan: list[str] = Field(default_factory=list)
    scored: list[list[Any]] = Field(default_factory=list)

    def choice_logprobs(self, messages: Any, choices: Any) -> list[Any]:
        from genmem.policies.choice_scoring import ChoiceLogProb

        wanted = self.plan[len(self.scored)]
        self.scored.append(list(messages))
        return [ChoiceLogProb(0.0 if c == wanted else -1.0, 1) for c in choices]


def test_the_steps_are_the_prompts_the_ranking_interactor_scores(cooking_pair: CookingConfig):
    from genmem.graph.ranked_actor import RankedActor

    env = CookingEnvironment(cooking_pair)
    task = env.tasks()[1]
    steps = reader_steps(env, task, PAYLOAD)
    walkthrough = env.walkthrough(task)
    assert [s.command for s in steps] == walkthrough and [s.index for s in steps] == list(
        range(len(walkthrough))
    )
    assert all(s.command in s.commands and s.support == PAYLOAD for s in steps)
    assert steps[-1].history == walkthrough[:-1] and steps[-1].notes  # the recipe, once read
    shown = ("<retrieved_experience>", "take the ingredient")
    assert all(all(text in s.user for text in shown) for s in steps)
    # the ranking interactor itself, playing the walkthrough, scores exactly these turns
    scorer = _Walkthrough(responses=[], plan=walkthrough, scored=[])
    agent = SubAgent(
        name="interactor", description="plays", tools=env.tools().interactor, act="rank",
        max_tool_calls=len(walkthrough),
    )  # fmt: skip
    env.start(task)
    try:
        RankedActor(agent, scorer).run(task.query, task.query, PAYLOAD)
        assert env.episode.won
    finally:
        env.finish(task)
    assert [m[1].content for m in scorer.scored] == [s.user for s in steps]
    # no experience: the same turns without the data block
    bare = reader_steps(env, task, "")
    assert [s.command for s in bare] == walkthrough
    assert not any("retrieved_experience" in s.user for s in bare)


def test_games_the_bank_was_built_from_are_left_out(cooking_pair: CookingConfig, tmp_path):
    from genmem.memory.location import open_bank

    env = CookingEnvironment(cooking_pair)
    first, second = env.tasks()
    tasks, held = reader_games(env, open_bank(_bank(tmp_path, [first.query])))
    assert [t.id for t in tasks] == [second.id] and held == [first.id]


def test_ranks_first_counts_a_tie_as_not_first(cooking_pair: CookingConfig) -> None:
    env = CookingEnvironment(cooking_pair)
    steps = reader_steps(env, env.tasks()[0], "")[:3]
    for step in steps:
        assert ranks_first(ScoringChat(responses=[], prefer=[step.command]), [step]) == [True]
    flat = ScoringChat(responses=[], prefer=[])  # the given order: only a game's first command
    assert ranks_first(flat, steps) == [s.commands.index(s.command) == 0 for s in steps]
    tied = _Walkthrough(responses=[], plan=["(none)"] * 3, scored=[])  # every command scores -1
    assert ranks_first(tied, steps) == [False, False, False]
    with pytest.raises(ValueError, match="'mean' or 'sum'"):
        ranks_first(flat, steps, rule="calibrated")


@pytest.mark.slow
def test_a_reader_trained_on_the_real_model_ranks_its_walkthrough_better(
    cooking_config: CookingConfig, tmp_path: Path
) -> None:
    """One small game, a few SFT steps on the embedded model: the trained reader puts more of
    the walkthrough's commands first than the model it started from, and its steps show the
    experience MemRetriever read."""
    from genmem.policies.backends import load_chat_model
    from genmem.training.config import load_preset

    env = CookingEnvironment(cooking_config)
    url = _bank(tmp_path, [])
    config = ReaderConfig(bank_url=url, rewrite=False)
    preset = load_preset("cpu").model_copy(
        update={"mid_learning_rate": 5e-4, "per_device_train_batch_size": 2}
    )
    out = tmp_path / "reader"
    report = run_reader(
        env, config, out, preset=preset, max_steps=2, sid_generator=FixedGenerator([A]),
        progress=False,
    )  # fmt: skip
    steps = [json.loads(line) for line in (out / "steps.jsonl").read_text().splitlines()]
    assert report.games == 1 and report.left_out == [] and report.steps_seen == len(steps) > 2
    assert report.without_support == 0 and all(s["support"] == PAYLOAD for s in steps)
    assert report.train_steps == 2 and len(report.losses) == 2
    assert (out / "reader.png").is_file() and (out / "run.json").is_file()
    from genmem.experiments.reader import ReaderStep

    parsed = [ReaderStep.model_validate(s) for s in steps]
    before = sum(ranks_first(load_chat_model("local"), parsed))
    after = sum(ranks_first(load_chat_model(f"local:{out}"), parsed))
    print(f"walkthrough commands ranked first: {before} -> {after} of {len(parsed)}")
    assert after > before, (before, after)


def test_a_reader_run_that_fails_midway_is_recorded_as_failed(
    cooking_pair: CookingConfig, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run stopped after it started (here: while it plays the walkthroughs) leaves ``run.json``
    at "failed" with the error, not at "running"."""
    from genmem.experiments import reader
    from genmem.training.config import load_preset

    def broken(*args: Any, **kwargs: Any) -> list[Any]:
        raise RuntimeError("the game server went away")

    monkeypatch.setattr(reader, "reader_steps", broken)
    out = tmp_path / "reader"
    config = ReaderConfig(bank_url=_bank(tmp_path, []), memory=False)
    env = CookingEnvironment(cooking_pair)
    with pytest.raises(RuntimeError, match="went away"):
        run_reader(env, config, out, preset=load_preset("cpu"), progress=False)
    run = json.loads((out / "run.json").read_text())
    assert run["status"] == "failed" and run["error"] == "RuntimeError: the game server went away"
    assert json.loads((out / "report.json").read_text())["games"] == 2
    assert not (out / "settings.json").exists()


def test_train_reader_refuses_what_it_cannot_train(tmp_path: Path, capsys) -> None:
    url = _bank(tmp_path, [])
    base = ["train", "reader", "--bank", url, "--out", str(tmp_path / "r"), "--games", "1"]
    assert main([*base, "--config", "cpu-lora"]) == 1
    assert "trains every weight in one process" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:  # no walkthroughs: not offered
        main([*base, "--bench", "gsm8k-train"])
    assert exc.value.code == 2 and "invalid choice: 'gsm8k-train'" in capsys.readouterr().err
    assert not (tmp_path / "r" / "config.json").exists()


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--reader", "local:/x"], "add --interactor rank"),
        (["--interactor", "rank", "--reader", "vllm:http://x#m"], "--reader 'vllm:http://x#m'"),
    ],
)
def test_eval_refuses_a_reader_it_cannot_use(tmp_path: Path, capsys, extra, message) -> None:
    out = tmp_path / "out"
    assert main(["eval", "--bench", "cooking-test", *extra, "--out", str(out)]) == 2
    assert message in capsys.readouterr().err
    assert not out.exists() or not any(out.iterdir())


def test_the_reader_scores_the_ranking_interactors_commands_only() -> None:
    from langchain_core.tools import tool

    from genmem.graph.stackplanner import Coordinator, default_subagents

    @tool
    def game_reset() -> str:
        """Restart."""
        return "start"

    @tool
    def game_step(command: str) -> str:
        """Play."""
        return command

    @tool
    def search(query: str) -> str:
        """Search."""
        return query

    lead, reader = FakeChat(responses=["x"]), ScoringChat(responses=[])
    team = default_subagents(
        interactor_tools=[game_reset, game_step], research_tools=[search], interactor="rank"
    )
    node = Coordinator(lead, team, reader=reader)
    assert node.runners["interactor"].model is reader
    others = [r for name, r in node.runners.items() if name != "interactor"]
    assert others and all(r.model is lead for r in others)  # they keep the graph's model


def test_eval_scores_the_games_commands_with_the_reader(
    cooking_config: CookingConfig, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--reader``: the ranking interactor scores with the reader; the graph's model does not
    score a command (it coordinates)."""
    import genmem.policies.backends as backends
    from genmem.experiments.evaluate import EvalConfig, evaluate
    from tests.fakes import by_role

    def delegate(messages: list[Any]) -> str:
        action = {"action": "delegate", "agent": "interactor", "task": "cook"}
        return json.dumps({"thought": "t", "action": action})

    lead = ScoringChat(reply=by_role(team=delegate, other="<answer>done</answer>"))
    reader = ScoringChat(responses=[], prefer=["examine cookbook"])
    loaded: list[str] = []
    real = backends.capped_chat_model

    def capped(spec: str, *args: Any, **kwargs: Any) -> Any:
        if spec == "local:/the/reader":
            loaded.append(spec)
            return reader
        return real(spec, *args, **kwargs)

    monkeypatch.setattr(backends, "capped_chat_model", capped)
    env = CookingEnvironment(cooking_config)
    settings = EvalConfig(
        methods=["none"], interactor="rank", reader="local:/the/reader", max_steps=2
    )
    report = evaluate(env, settings, out=tmp_path / "eval", model=lead, progress=False)
    assert loaded == ["local:/the/reader"] and reader.scored and not lead.scored
    assert report.summaries[0].n == 1
    saved = json.loads((tmp_path / "eval" / "settings.json").read_text())
    assert saved["reader"] == "local:/the/reader"  # a resume with another reader is refused
