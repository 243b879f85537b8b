"""Evaluation through the graph with a role-aware fake model: records, resume, summaries."""

from __future__ import annotations

import json
from typing import Any

import pytest
from langchain_core.messages import BaseMessage

from genmem.envs.gsm8k import GSM8KEnvironment, calculate, calculator_tool
from genmem.envs.stats import DEFAULT_INTERVALS
from genmem.experiments.evaluate import (
    EvalConfig,
    EvalRecord,
    _summaries,
    _with_contrastive,
    evaluate,
    summary_markdown,
)
from genmem.memory.sid import SID
from tests.fakes import FakeChat, FixedGenerator, by_role, finish_reply
from tests.graph._banks import A, one_entry_bank


def _ducks_only(messages: list[BaseMessage]) -> str:
    """The coordinator answers 18 (right) for the ducks problem and 0 (wrong) otherwise."""
    text = "\n".join(str(m.content) for m in messages)
    return finish_reply("18" if "Janet" in text else "0")


def role_fake(**options: Any) -> FakeChat:
    """Support for the retriever, an immediate finish for the coordinator (:func:`_ducks_only`);
    ``options`` go to the :class:`FakeChat`."""
    support = "<answer>Work out the daily amount first.</answer>"
    return FakeChat(reply=by_role(team=_ducks_only, other=support), **options)


def _settings(bank_url: str | None, **kw: Any) -> EvalConfig:
    return EvalConfig(**{"bank_url": bank_url, "limit": 2, "max_steps": 2, "candidates": 1, **kw})


def test_every_method_runs_through_the_graph_and_is_summarised(tmp_path) -> None:
    bank_url = one_entry_bank(tmp_path, "Work out the daily amount first, then the money.")
    env = GSM8KEnvironment(calculator=False)
    gen = FixedGenerator([A])
    settings = _settings(bank_url, methods=["none", "tfidf", "sid"])
    out = tmp_path / "eval"
    report = evaluate(env, settings, out=out, model=role_fake(), sid_generator=gen, progress=False)

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
    # the fake's rewrite passes the gate's checks, so the planner got it, not the raw entry
    assert [r["support_source"] for r in sid] == ["rewrite", "rewrite"]
    assert tfidf[1]["support_source"] == "none" and none[0]["support_source"] is None
    assert all(r["support_refused"] is None for r in records)
    assert all(r["memory_op"] is None for r in records)  # read_only: nothing written
    assert len(gen.calls) == 2  # only the sid method decodes SIDs

    by_method = {s.method: s for s in report.summaries}
    assert by_method["none"].metrics == {"accuracy": 0.5} and by_method["sid"].success_rate == 0.5
    assert by_method["tfidf"].contrastive is not None and by_method["none"].contrastive is None
    table = (out / "summary.md").read_text()
    assert table == summary_markdown(report, env.metric_names)
    assert "| sid | 2 | 50.0 [0.0, 100.0] | 50.0 [0.0, 100.0] |" in table
    assert "| sid | accuracy | +0.0 [+0.0, +0.0] | 0 | 0 | 2 | 2 |" in table
    assert "| sid - tfidf | success | +0.0 [+0.0, +0.0] | 0 | 0 | 2 | 2 |" in table
    saved = json.loads((out / "summary.json").read_text())
    assert saved["bench"] == "gsm8k"
    assert saved["intervals"] == {
        "confidence": 0.95,
        "resamples": 2000,
        "seed": 0,
        "method": "percentile bootstrap over tasks",
    }
    sid = saved["summaries"][2]
    assert sid["metrics_ci"]["accuracy"] == [0.0, 1.0]
    assert sid["paired"]["accuracy"] == {
        "diff": 0.0, "ci": [0.0, 0.0], "wins": 0, "losses": 0, "ties": 2, "n": 2
    }  # fmt: skip

    # a rerun into the same folder runs nothing again
    again = evaluate(env, settings, out=out, model=role_fake(), sid_generator=gen, progress=False)
    assert len((out / "records.jsonl").read_text().splitlines()) == 6
    assert again.summaries == report.summaries and len(gen.calls) == 2


def failing_generator(marker: str) -> FixedGenerator:
    """Proposes ``A``, but raises for tasks that mention ``marker``."""

    def sids(context: str) -> list[SID]:
        if marker in context:
            raise RuntimeError("decoder crashed")
        return [A]

    return FixedGenerator(sids)


def test_an_errored_run_is_a_failure_in_the_written_summary(tmp_path) -> None:
    bank_url = one_entry_bank(tmp_path, "Work out the daily amount first, then the money.")
    env = GSM8KEnvironment(calculator=False)
    ducks, _ = env.tasks(2)
    settings = _settings(bank_url, methods=["none", "sid"])
    out = tmp_path / "eval"
    # The sid run of the ducks problem, which the model answers right, crashes.
    gen = failing_generator(ducks.query.split()[0])
    report = evaluate(env, settings, out=out, model=role_fake(), sid_generator=gen, progress=False)
    records = [json.loads(x) for x in (out / "records.jsonl").read_text().splitlines()]
    crashed = [r for r in records if r["error"]]
    assert [(r["method"], r["id"]) for r in crashed] == [("sid", ducks.id)]
    assert crashed[0]["contrastive"] == -1.0  # none solved it, the memory run did not
    none, sid = report.summaries
    assert (sid.n, sid.errors, sid.success_rate, sid.metrics["accuracy"]) == (2, 1, 0.0, 0.0)
    assert sid.contrastive == -0.5 and none.success_rate == 0.5
    assert (sid.paired["success_rate"].losses, sid.paired["success_rate"].n) == (1, 2)
    saved = json.loads((out / "summary.json").read_text())
    assert saved["summaries"][1]["paired"]["accuracy"]["diff"] == -0.5
    assert (
        "| sid | success | -50.0 [-100.0, +0.0] | 0 | 1 | 1 | 2 |"
        in (out / "summary.md").read_text()
    )


def test_evolve_mode_gives_each_method_its_own_bank_copy(tmp_path) -> None:
    bank_url = one_entry_bank(tmp_path, "Work out the daily amount first.")
    settings = _settings(bank_url, methods=["tfidf"], mode="evolve", limit=1)
    evaluate(
        GSM8KEnvironment(calculator=False),
        settings,
        out=tmp_path / "e",
        model=role_fake(),
        progress=False,
    )
    assert (tmp_path / "e" / "banks" / "tfidf.db").is_file()


def test_settings_are_validated() -> None:
    with pytest.raises(ValueError, match="need a bank"):
        EvalConfig(methods=["sid"])
    with pytest.raises(ValueError, match="'none', 'tfidf', 'dense', 'quantizer' or 'sid'"):
        EvalConfig(methods=["bm25"], bank_url="sqlite:///x.db")  # type: ignore[list-item]
    assert EvalConfig(methods=["none"]).bank_url is None


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


def _record(method: str, task: str, score: float | None) -> EvalRecord:
    """A finished run (score given) or a run that errored (score None)."""
    if score is None:
        return EvalRecord(bench="gsm8k", method=method, id=task, query=task, error="boom")
    metrics = {"accuracy": score}
    return EvalRecord(
        bench="gsm8k",
        method=method,
        id=task,
        query=task,
        score=score,
        success=score == 1.0,
        metrics=metrics,
    )


def test_errored_runs_count_as_failures_in_every_headline_number() -> None:
    """Eq. 34 averages over all n: an errored run is a failure, never left out."""
    records = [
        _record("none", "t1", 1.0),
        _record("none", "t2", 0.0),
        _record("none", "t3", None),
        _record("sid", "t1", None),  # memory errored where the baseline succeeded: a loss
        _record("sid", "t2", 1.0),
        _record("sid", "t3", 1.0),  # baseline errored: a failed baseline, so a win
        _record("sid", "t4", 1.0),  # no baseline run: left out of every pair
    ]
    records = _with_contrastive(records)
    contrast = {r.id: r.contrastive for r in records if r.method == "sid"}
    assert contrast == {"t1": -1.0, "t2": 1.0, "t3": 1.0, "t4": None}
    env = GSM8KEnvironment(calculator=False)
    none, sid = _summaries(env, records, ["none", "sid"], DEFAULT_INTERVALS)
    assert (none.n, none.errors, sid.n, sid.errors) == (3, 1, 4, 1)
    assert none.metrics == {"accuracy": pytest.approx(1 / 3)}
    assert none.success_rate == pytest.approx(1 / 3)
    assert sid.metrics == {"accuracy": 0.75} and sid.success_rate == 0.75
    assert sid.contrastive == pytest.approx(1 / 3)
    # Intervals over tasks for every metric, success and the contrastive outcome.
    assert set(sid.metrics_ci) == {"accuracy", "success_rate", "contrastive"}
    assert set(none.metrics_ci) == {"accuracy", "success_rate"}
    lo, hi = sid.metrics_ci["accuracy"]
    assert 0.0 <= lo <= 0.75 <= hi <= 1.0
    # The paired difference is method minus none, over the tasks both ran.
    assert none.paired == {}
    acc = sid.paired["accuracy"]
    assert (acc.wins, acc.losses, acc.ties, acc.n) == (2, 1, 0, 3)
    assert acc.diff == pytest.approx(1 / 3) and acc.ci[0] <= acc.diff <= acc.ci[1]
    assert sid.paired["success_rate"].diff == pytest.approx(1 / 3)


def test_memory_methods_are_paired_with_each_other_on_shared_tasks() -> None:
    records = [
        _record("none", "t1", 0.0),
        _record("tfidf", "t1", 1.0),
        _record("tfidf", "t2", 0.0),
        _record("tfidf", "t3", None),  # errored: a failure in the pair too
        _record("sid", "t1", 0.0),
        _record("sid", "t2", 1.0),
        _record("sid", "t3", 1.0),
        _record("sid", "t4", 1.0),  # tfidf never ran it: left out
    ]
    env = GSM8KEnvironment(calculator=False)
    none, tfidf, sid = _summaries(env, records, ["none", "tfidf", "sid"], DEFAULT_INTERVALS)
    assert none.versus == {} and tfidf.versus == {}  # each pair once: the later minus the earlier
    acc = sid.versus["tfidf"]["accuracy"]
    assert (acc.wins, acc.losses, acc.ties, acc.n) == (2, 1, 0, 3)
    assert acc.diff == pytest.approx(1 / 3)
    assert sid.paired["accuracy"].n == 1  # against none: only t1 is shared
    from genmem.experiments.evaluate import EvalReport

    report = EvalReport(
        bench="gsm8k",
        settings=_settings("sqlite:///b.db"),
        summaries=[none, tfidf, sid],
        records="r",
    )
    assert "| sid - tfidf | accuracy | +33.3 [" in summary_markdown(report, env.metric_names)
    # a game's one metric is its success: one column, not two
    game = summary_markdown(report, ("success",))
    assert "| method | n | success | contrastive | s/task | errors |" in game


def test_a_method_with_only_errors_scores_zero() -> None:
    env = GSM8KEnvironment(calculator=False)
    (s,) = _summaries(env, [_record("sid", "t1", None)], ["sid"], DEFAULT_INTERVALS)
    assert (s.metrics, s.success_rate, s.errors) == ({"accuracy": 0.0}, 0.0, 1)
    assert s.metrics_ci["accuracy"] == (0.0, 0.0)


def test_a_resume_with_other_settings_is_refused_and_changes_nothing(tmp_path) -> None:
    """Records made with one budget are never extended by runs made with another: the folder
    keeps what its first run used; methods, limit and shard may change on a resume."""
    from genmem.experiments.evaluate import SETTINGS_FILE, EvalResumeMismatch

    bank_url = one_entry_bank(tmp_path, "Work out the daily amount first, then the money.")
    env, gen, out = GSM8KEnvironment(calculator=False), FixedGenerator([A]), tmp_path / "run"
    first = _settings(bank_url, methods=["none"], limit=1)
    evaluate(env, first, out=out, model=role_fake(), sid_generator=gen, progress=False)
    before = (out / "records.jsonl").read_text()
    assert json.loads((out / SETTINGS_FILE).read_text())["max_steps"] == first.max_steps
    other = first.model_copy(update={"max_steps": first.max_steps + 1, "limit": 2})
    with pytest.raises(EvalResumeMismatch, match=r"max_steps: \d+ there, \d+ now"):
        evaluate(env, other, out=out, model=role_fake(), sid_generator=gen, progress=False)
    assert (out / "records.jsonl").read_text() == before
    more = first.model_copy(update={"methods": ["none", "sid"], "limit": 2})
    evaluate(env, more, out=out, model=role_fake(), sid_generator=gen, progress=False)
    assert len((out / "records.jsonl").read_text().splitlines()) == 4


def test_a_second_process_on_the_same_records_is_refused_until_the_first_ends(tmp_path) -> None:
    """Two processes given the same --out and --shard would run the same tasks twice."""
    import subprocess
    import sys

    from genmem.experiments.evaluate import RecordsInUse, hold_records

    path = tmp_path / "records-0of2.jsonl"
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, pathlib; from genmem.experiments.evaluate import "
         "hold_records; h = hold_records(pathlib.Path(sys.argv[1])); print('held', flush=True); "
         "sys.stdin.read()", str(path)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(RecordsInUse, match="the same --out and --shard"):
            hold_records(path)
        assert hold_records(tmp_path / "records-1of2.jsonl")  # another shard: free
    finally:
        holder.communicate("")
    hold_records(path).close()  # the first process ended: free again
    assert not path.exists()  # the lock is a file of its own


def test_shards_split_the_tasks_and_the_last_summary_covers_every_part(tmp_path) -> None:
    """Two processes given --shard 0/2 and 1/2 and one --out: each runs every other task into
    its own records file; the summary (written by each, complete once both ran) equals the
    unsharded run's. A bad shard, or one in evolve mode, is refused."""
    bank_url = one_entry_bank(tmp_path, "Work out the daily amount first, then the money.")
    env = GSM8KEnvironment(calculator=False)
    whole = _settings(bank_url, methods=["none", "sid"], limit=4)
    gen = FixedGenerator([A])
    report = evaluate(env, whole, out=tmp_path / "one", model=role_fake(), sid_generator=gen,
                      progress=False)  # fmt: skip
    out = tmp_path / "split"
    first = whole.model_copy(update={"shard": "0/2"})
    partial = evaluate(env, first, out=out, model=role_fake(), sid_generator=gen, progress=False)
    part = [json.loads(x) for x in (out / "records-0of2.jsonl").read_text().splitlines()]
    assert [r["id"] for r in part] == ["test-0", "test-0", "test-2", "test-2"]
    assert {s.n for s in partial.summaries} == {2} and not (out / "records.jsonl").exists()
    second = whole.model_copy(update={"shard": "1/2"})
    both = evaluate(env, second, out=out, model=role_fake(), sid_generator=gen, progress=False)

    def same(summaries):  # all but the wall-clock seconds
        return [s.model_dump(exclude={"mean_seconds"}) for s in summaries]

    assert same(both.summaries) == same(report.summaries)
    assert both.records.endswith("records-*of2.jsonl")
    for bad in ("2/2", "1", "-1/2"):
        with pytest.raises(ValueError, match=r"shard|pattern"):
            EvalConfig.model_validate({**whole.model_dump(), "shard": bad})
    with pytest.raises(ValueError, match="evolve mode"):
        EvalConfig.model_validate({**whole.model_dump(), "shard": "0/2", "mode": "evolve"})
