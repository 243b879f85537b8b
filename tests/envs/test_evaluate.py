"""Evaluation through the graph with a role-aware fake model: records, resume, summaries."""

from __future__ import annotations

import json
from typing import Any

import pytest
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult

from genmem.envs.evaluate import EvalSettings, evaluate, summary_markdown
from genmem.envs.gsm8k import GSM8KEnvironment, calculate, calculator_tool
from tests.graph._banks import A, one_entry_bank
from tests.graph.test_retriever import FixedGenerator


class RoleFake(BaseChatModel):
    """Answers by role: support for the retriever, an immediate finish for the coordinator.

    The coordinator answers 18 (right) for the ducks problem and 0 (wrong) otherwise.
    """

    @property
    def _llm_type(self) -> str:
        return "role-fake"

    def _generate(self, messages: list[BaseMessage], stop=None, run_manager=None, **kw: Any):
        text = "\n".join(str(m.content) for m in messages)
        if "small team" in str(messages[0].content):
            answer = "18" if "Janet" in text else "0"
            body = json.dumps({"thought": "t", "action": {"action": "finish", "answer": answer}})
        else:
            body = "<answer>Work out the daily amount first.</answer>"
        return ChatResult(generations=[ChatGeneration(message=AIMessage(body))])


def _settings(bank_url: str | None, **kw: Any) -> EvalSettings:
    return EvalSettings(**{"bank_url": bank_url, "limit": 2, "max_steps": 2, "candidates": 1, **kw})


def test_every_method_runs_through_the_graph_and_is_summarised(tmp_path) -> None:
    bank_url = one_entry_bank(tmp_path, "Work out the daily amount first, then the money.")
    env = GSM8KEnvironment(calculator=False)
    gen = FixedGenerator([A])
    settings = _settings(bank_url, methods=["none", "tfidf", "sid"])
    out = tmp_path / "eval"
    report = evaluate(env, settings, out=out, model=RoleFake(), sid_generator=gen, progress=False)

    records = [json.loads(x) for x in (out / "records.jsonl").read_text().splitlines()]
    # Task by task: every method on a task before the next task.
    assert [(r["method"], r["id"]) for r in records] == [
        (m, i) for i in ("test-0", "test-1") for m in ("none", "tfidf", "sid")
    ]
    assert all(r["error"] is None for r in records)
    assert [r["score"] for r in records] == [1.0] * 3 + [0.0] * 3
    none, tfidf, sid = ([r for r in records if r["method"] == m] for m in ("none", "tfidf", "sid"))
    assert all(r["sid"] is None and r["contrastive"] is None for r in none)
    assert all(r["sid"] == str(A) and r["retrieved"] for r in [tfidf[0], *sid])
    assert tfidf[1]["sid"] is None  # TF-IDF: the entry shares no term with the second problem
    assert all(r["memory_op"] is None for r in records)  # read_only: nothing written
    assert len(gen.calls) == 2  # only the sid method decodes SIDs

    by_method = {s.method: s for s in report.summaries}
    assert by_method["none"].metrics == {"accuracy": 0.5} and by_method["sid"].success_rate == 0.5
    assert by_method["tfidf"].contrastive is not None and by_method["none"].contrastive is None
    table = (out / "summary.md").read_text()
    assert table == summary_markdown(report, env.metric_names)
    assert "| sid | 2 | 50.0 | 50.0 |" in table
    assert json.loads((out / "summary.json").read_text())["bench"] == "gsm8k"

    # a rerun into the same folder runs nothing again
    again = evaluate(env, settings, out=out, model=RoleFake(), sid_generator=gen, progress=False)
    assert len((out / "records.jsonl").read_text().splitlines()) == 6
    assert again.summaries == report.summaries and len(gen.calls) == 2


def test_evolve_mode_gives_each_method_its_own_bank_copy(tmp_path) -> None:
    bank_url = one_entry_bank(tmp_path, "Work out the daily amount first.")
    settings = _settings(bank_url, methods=["tfidf"], mode="evolve", limit=1)
    evaluate(
        GSM8KEnvironment(calculator=False),
        settings,
        out=tmp_path / "e",
        model=RoleFake(),
        progress=False,
    )
    assert (tmp_path / "e" / "banks" / "tfidf.db").is_file()


def test_settings_are_validated() -> None:
    with pytest.raises(ValueError, match="need a bank"):
        EvalSettings(methods=["sid"])
    with pytest.raises(ValueError, match="'none', 'tfidf', 'dense' or 'sid'"):
        EvalSettings(methods=["bm25"], bank_url="sqlite:///x.db")  # type: ignore[list-item]
    assert EvalSettings(methods=["none"]).bank_url is None


def test_calculator() -> None:
    assert calculate("(48 / 2) + 48") == "72" and calculate("1,200 * 3") == "3600"
    assert calculate("7/3") == "2.3333333333" and calculate("2**10") == "1024"
    for bad in ("__import__('os')", "1/0", "", "2**0.5", "x + 1"):
        with pytest.raises(ValueError):
            calculate(bad)
    assert calculator_tool().invoke({"expression": "1/0"}) == "error: division by zero"


def test_gsm8k_environment() -> None:
    env = GSM8KEnvironment()
    (task,) = env.tasks(1)
    assert task.id == "test-0" and task.reference == "18"
    assert [t.name for t in env.tools().solver] == ["calculator"]
    assert GSM8KEnvironment(calculator=False).tools().solver == ()
    assert env.score(task, "She makes $18 every day.").success
    assert env.score(task, None).metrics == {"accuracy": 0.0}
