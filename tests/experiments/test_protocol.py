"""Issue 18 item 2: no gold label, and no verdict computed from one, ever reaches an agent.

Every prompt of a run that has a reference is recorded (a role-aware fake chat model) through
each entry point that evolves memory: ``genmem eval --mode evolve``, ``genmem evolve``'s runner,
``genmem run`` and the served GSM8K graph. The reference must not appear in any prompt, and
MemEvolver's user turn must carry no outcome. An environment whose agent can see how its run
went (``outcome_observable``) is the one case where MemEvolver is told: success or failure.
"""

from __future__ import annotations

import json
import re

import pytest

from genmem.envs.base import Environment, Outcome, Task
from genmem.envs.gsm8k import GSM8KEnvironment
from genmem.experiments.evaluate import EvalConfig, evaluate
from genmem.experiments.evolution import EvolveConfig
from genmem.experiments.evolution_runner import EvolveRunner
from genmem.experiments.runner import run_stream
from genmem.graph.loop import build_genmem_graph
from tests.fakes import FakeChat, FixedGenerator, by_role, finish_reply
from tests.graph._banks import A, one_entry_bank, revise_reply

REFERENCE = "7391"
"""A gold answer no agent writes by itself, so finding it in a prompt can only be a leak."""
_VERDICT = re.compile(r"\b(success|succeeded|successful|failure|failed|correct|wrong)\b", re.I)


def prompt_recorder(answer: str = "12") -> FakeChat:
    """Answers each role in turn (the coordinator finishes with ``answer``) and records every
    call, so that :meth:`FakeChat.texts` gives a role's prompts."""
    return FakeChat(
        reply=by_role(
            evolver=revise_reply("Find the price of one item, then multiply."),
            retriever="<answer>Find the price of one item first.</answer>",
            team=finish_reply(answer),
            other="<answer>12</answer>",
        )
    )


def _assert_no_leak(chat: FakeChat, *, expect_evolver: bool = True) -> None:
    prompts = chat.texts()
    assert prompts, "the run made no model call"
    assert not any(REFERENCE in p for p in prompts)
    evolver = chat.texts("evolver", system=False)
    assert bool(evolver) == expect_evolver
    for turn in evolver:
        assert "Outcome" not in turn and not _VERDICT.search(turn), turn


class _GoldTask(GSM8KEnvironment):
    """Bundled GSM8K problems whose gold answer is :data:`REFERENCE`."""

    def tasks(self, limit: int | None = None) -> list[Task]:
        return [t.model_copy(update={"reference": REFERENCE}) for t in super().tasks(limit)]

    def score(self, task: Task, answer: str | None) -> Outcome:
        ok = (answer or "").strip() == REFERENCE
        return Outcome(score=float(ok), success=ok, metrics={"accuracy": float(ok)})


@pytest.mark.parametrize("answer", [REFERENCE, "12"])
def test_eval_evolve_mode_shows_memevolver_no_verdict(tmp_path, answer) -> None:
    """Both a right and a wrong answer: neither verdict may reach MemEvolver."""
    bank_url = one_entry_bank(tmp_path, "Find the price of one item first.")
    chat = prompt_recorder(answer)
    settings = EvalConfig(
        bank_url=bank_url, limit=2, max_steps=2, candidates=1, methods=["sid"], mode="evolve"
    )
    report = evaluate(
        _GoldTask(calculator=False),
        settings,
        out=tmp_path / "eval",
        model=chat,
        sid_generator=FixedGenerator([A]),
        progress=False,
    )
    assert report.summaries[0].n == 2
    # the coordinator repeats its own answer, so only a wrong answer keeps the gold text out
    if answer != REFERENCE:
        _assert_no_leak(chat)
    else:
        for turn in chat.texts("evolver", system=False):
            assert "Outcome" not in turn and not _VERDICT.search(turn)
    records = [
        json.loads(x) for x in (tmp_path / "eval" / "records.jsonl").read_text().splitlines()
    ]
    assert [r["memory_op"] for r in records] == ["revised", "retained"]


def test_evolution_runner_shows_memevolver_no_verdict(tmp_path) -> None:
    bank_url = one_entry_bank(tmp_path, "Find the price of one item first.")
    chat = prompt_recorder()
    env = _GoldTask(calculator=False)
    config = EvolveConfig(blocks=1, block_size=1, probe_size=1, methods=["tfidf"], max_steps=2)
    runner = EvolveRunner(env, config, chat)
    state = runner.run("tfidf", env.tasks(1)[0], "evolve", bank_url)
    assert "error" not in state and state["update"]["outcome"] == "revised"
    assert state["outcome_"].success is False and state["outcome"] is None
    _assert_no_leak(chat)


def test_genmem_run_and_the_served_graph_show_memevolver_no_verdict(tmp_path) -> None:
    from genmem.envs.gsm8k import score_gsm8k

    bank_url = one_entry_bank(tmp_path, "Find the price of one item first.")
    chat = prompt_recorder()
    app = build_genmem_graph(chat, sid_generator=FixedGenerator([A]), scorer=score_gsm8k)
    queries = [
        {"id": "q1", "query": "Pens cost $2. How much do 3 pens cost?", "reference": REFERENCE}
    ]
    (record,) = run_stream(app.compile(), queries, context={"bank_url": bank_url}, progress=False)
    assert record.score == 0.0 and record.outcome is None and record.update is not None
    _assert_no_leak(chat)


def test_an_outcome_the_caller_gives_does_reach_memevolver(tmp_path) -> None:
    bank_url = one_entry_bank(tmp_path, "Find the price of one item first.")
    chat = prompt_recorder()
    app = build_genmem_graph(chat, sid_generator=FixedGenerator([A]))
    queries = [
        {"id": "q1", "query": "Pens cost $2. How much do 3 pens cost?", "outcome": "failure"}
    ]
    (record,) = run_stream(app.compile(), queries, context={"bank_url": bank_url}, progress=False)
    assert record.outcome == "failure"
    (turn,) = chat.texts("evolver", system=False)
    assert "Outcome:\nfailure" in turn


class _Game(Environment):
    """An environment whose agent sees the result itself (like a text game's won flag)."""

    name = "game"
    outcome_observable = True

    def tasks(self, limit: int | None = None) -> list[Task]:
        return [Task(id="g0", query="Open the box.", reference=REFERENCE)]

    def score(self, task: Task, answer: str | None) -> Outcome:
        return Outcome(score=0.0, success=False)


def test_an_observable_environment_tells_memevolver_its_own_verdict(tmp_path) -> None:
    bank_url = one_entry_bank(tmp_path, "Look around before you act.")
    chat = prompt_recorder()
    settings = EvalConfig(
        bank_url=bank_url, limit=1, max_steps=2, candidates=1, methods=["sid"], mode="evolve"
    )
    evaluate(
        _Game(),
        settings,
        out=tmp_path / "eval",
        model=chat,
        sid_generator=FixedGenerator([A]),
        progress=False,
    )
    (turn,) = chat.texts("evolver", system=False)
    assert "Outcome:\nfailure" in turn
    assert not any(REFERENCE in p for p in chat.texts())
