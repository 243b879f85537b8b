"""``concurrency`` in eval, the query stream, cold start and evolution: runs overlap, records
match a sequential run, a failure stays one task's record, and partial files resume."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from genmem.envs.gsm8k import GSM8KEnvironment
from genmem.envs.pool import ConcurrencyWarning
from genmem.experiments import coldstart
from genmem.experiments.coldstart import ColdStartConfig
from genmem.experiments.evaluate import EvalConfig, evaluate
from genmem.experiments.evolution import run_evolution
from genmem.experiments.experience_schemas import AttemptProse, ExperienceFields
from genmem.experiments.runner import run_stream
from tests.experiments.test_evaluate import failing_generator, role_fake
from tests.experiments.test_evolution import _evolve, _Say, coin_chat
from tests.experiments.test_runner import QUERIES, ScriptedApp
from tests.fakes import FakeChat, FixedGenerator, Overlap
from tests.graph._banks import A, one_entry_bank

SEEN = Overlap(0.05)


@pytest.fixture(autouse=True)
def _fresh_count() -> None:
    SEEN.most = SEEN.active = 0


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text().splitlines()]


def _timeless(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in r.items() if k != "seconds"} for r in rows]


# -- eval ---------------------------------------------------------------------------------------


def _eval(tmp_path: Path, out: str, concurrency: int, gen: Any = None) -> Path:
    (tmp_path / out).mkdir()
    bank_url = one_entry_bank(tmp_path / out, "Work out the daily amount first, then the money.")
    settings = EvalConfig(
        methods=["none", "sid"], bank_url=bank_url, limit=4, max_steps=2, candidates=1
    )
    slow = role_fake(before=SEEN.wait)  # 50 ms a call, counted in SEEN
    evaluate(
        GSM8KEnvironment(calculator=False), settings, out=tmp_path / out, model=slow,
        sid_generator=gen or FixedGenerator([A]), progress=False, concurrency=concurrency,
    )  # fmt: skip
    return tmp_path / out / "records.jsonl"


def test_eval_runs_overlap_and_write_what_a_sequential_run_writes(tmp_path) -> None:
    one = _eval(tmp_path, "one", 1)
    assert SEEN.most == 1
    from genmem.policies.local import import_transformers

    import_transformers()  # what a pool of 4 does first (seconds in a fresh process): not timed
    started = time.perf_counter()
    four = _eval(tmp_path, "four", 4)
    assert SEEN.most > 1 and time.perf_counter() - started < 5
    # Each run scored its own task (only the ducks problem is answered right), and the file is
    # rewritten in task order, whatever order the runs finished in.
    assert _timeless(_lines(four)) == _timeless(_lines(one))
    assert [r["score"] for r in _lines(four) if r["method"] == "none"] == [1.0, 0.0, 0.0, 0.0]
    keys = ("method", "n", "metrics", "success_rate", "contrastive", "errors", "paired")
    one_sum, four_sum = (
        [{k: s[k] for k in keys} for s in json.loads((p.parent / "summary.json").read_text())[
            "summaries"
        ]]
        for p in (one, four)
    )  # fmt: skip
    assert four_sum == one_sum


def test_a_failing_eval_run_is_its_record_and_the_others_finish(tmp_path) -> None:
    env = GSM8KEnvironment(calculator=False)
    crash = env.tasks(4)[2]
    rows = _lines(_eval(tmp_path, "e", 3, failing_generator(crash.query.split()[0])))
    assert [(r["method"], r["id"]) for r in rows if r["error"]] == [("sid", crash.id)]
    assert len(rows) == 8 and sum(r["error"] is None for r in rows) == 7


def test_evolve_mode_refuses_concurrent_eval_runs(tmp_path) -> None:
    settings = EvalConfig(methods=["none"], mode="evolve", limit=1)
    with pytest.raises(ValueError, match="updates must land in task order"):
        evaluate(GSM8KEnvironment(), settings, out=tmp_path, model=role_fake(), concurrency=2)


def test_an_episodic_environment_runs_one_task_at_a_time(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(GSM8KEnvironment, "concurrent_tasks", False)
    with pytest.warns(ConcurrencyWarning, match="holds one episode at a time"):
        _eval(tmp_path, "e", 4)
    assert SEEN.most == 1


# -- the query stream ---------------------------------------------------------------------------


class SlowApp(ScriptedApp):
    """:class:`ScriptedApp` taking 0.1 s a query; ``interrupt`` raises Ctrl-C on that query."""

    def __init__(self, *args: Any, interrupt: str | None = None, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.interrupt = interrupt
        self.seen = Overlap(0.1)

    def invoke(self, payload: dict[str, Any], context: dict[str, Any]) -> dict[str, Any]:
        if payload["query"] == self.interrupt:
            raise KeyboardInterrupt
        with self.seen:
            time.sleep(self.seen.seconds)
        return super().invoke(payload, context)


ANSWERS = {"1+1?": "2", "2+2?": "5", **{f"q{i}": str(i) for i in range(6)}}
STREAM = QUERIES + [{"id": f"q{i}", "query": f"q{i}", "reference": str(i % 2)} for i in range(6)]


def test_stream_queries_overlap_and_come_back_in_query_order(tmp_path) -> None:
    seq = run_stream(
        SlowApp(ANSWERS, fail={"boom"}), STREAM, context={}, mode="read_only",
        out=tmp_path / "one", progress=False,
    )  # fmt: skip
    app = SlowApp(ANSWERS, fail={"boom"})
    seen: list[str] = []
    par = run_stream(
        app, STREAM, context={}, mode="read_only", out=tmp_path / "four", progress=False,
        on_record=lambda r: seen.append(r.id), concurrency=4,
    )  # fmt: skip
    assert app.seen.most > 1
    assert [r.id for r in par] == [q["id"] for q in STREAM] and sorted(seen) == sorted(
        q["id"] for q in STREAM
    )
    strip = {"seconds"}
    assert [r.model_dump(exclude=strip) for r in par] == [r.model_dump(exclude=strip) for r in seq]
    assert "model crashed" in par[2].error  # the failing query is its own record
    written = _lines(tmp_path / "four" / "results.jsonl")
    assert sorted(r["id"] for r in written) == sorted(q["id"] for q in STREAM)


def test_evolve_mode_refuses_a_concurrent_stream(tmp_path) -> None:
    with pytest.raises(ValueError, match="applied before the next query"):
        run_stream(ScriptedApp(ANSWERS), STREAM, context={}, mode="evolve", concurrency=2)


def test_ctrl_c_leaves_whole_records_and_a_rerun_does_the_rest(tmp_path) -> None:
    with pytest.raises(KeyboardInterrupt):
        run_stream(
            SlowApp(ANSWERS, interrupt="q1"), STREAM, context={}, mode="read_only",
            out=tmp_path, progress=False, concurrency=3,
        )  # fmt: skip
    kept = [r["id"] for r in _lines(tmp_path / "results.jsonl")]
    assert 0 < len(kept) < len(STREAM) and "q1" not in kept
    app = SlowApp(ANSWERS, fail={"boom"})
    rest = run_stream(
        app, STREAM, context={}, mode="read_only", out=tmp_path, progress=False, concurrency=3
    )
    assert len(app.calls) == len(STREAM) - len(kept)  # only what was missing ran
    assert sorted(r.id for r in rest) == sorted(q["id"] for q in STREAM)
    assert sorted(r["id"] for r in _lines(tmp_path / "results.jsonl")) == sorted(
        q["id"] for q in STREAM
    )


# -- cold start ---------------------------------------------------------------------------------


class SlowPlanner:
    """A StackPlanner stand-in: 50 ms a try, 18 for the ducks problem, 0 otherwise."""

    def invoke(self, payload: dict[str, Any]) -> dict[str, Any]:
        SEEN.wait()
        answer = "18" if "Janet" in payload["query"] else "0"
        return {"answer": f"Final answer: {answer}", "status": "finished", "trajectory": {}}


def _quoting_the_task(schema: dict, messages: list) -> dict[str, Any]:
    """A structured reply that quotes the task it was asked about (to catch mix-ups)."""
    text = str(messages[-1].content)
    task = text.split("Task:\n", 1)[1][:12]
    time.sleep(0.02)
    if "experiences" in schema["properties"]:  # a record the write gate keeps
        fields = {
            name: f"For {task}: {info.description}"
            for name, info in ExperienceFields.model_fields.items()
        }
        return {"experiences": [fields | {"skill_name": task}]}
    return dict.fromkeys(AttemptProse.model_fields, task)


def _coldstart(tmp_path: Path, out: str, concurrency: int, monkeypatch) -> dict[str, list]:
    monkeypatch.setattr(coldstart._Stages, "_planners", lambda self: ([SlowPlanner()] * 2, None))
    env = GSM8KEnvironment(calculator=False)
    tasks = env.tasks(4)
    stages = coldstart._Stages(
        env,
        ColdStartConfig(attempts=2),
        tmp_path / out,
        FakeChat(structured=_quoting_the_task),
        concurrency,
    )
    (tmp_path / out).mkdir()
    tries = stages.attempts(tasks, progress=False)
    summaries = stages.assess(tasks, tries, progress=False)
    lines = stages.extract(tasks, tries, summaries, progress=False)
    key = json.dumps
    return {
        "attempts": sorted(_timeless(_lines(stages.attempts_path)), key=key),
        "assessments": sorted(_lines(stages.assess_path), key=key),
        "experiences": [x.model_dump() for x in lines],
    }


def test_coldstart_stages_overlap_and_write_the_same_records(tmp_path, monkeypatch) -> None:
    one = _coldstart(tmp_path, "one", 1, monkeypatch)
    assert SEEN.most == 1
    three = _coldstart(tmp_path, "three", 3, monkeypatch)
    assert SEEN.most > 1
    assert three == one and len(one["attempts"]) == 8 and len(one["experiences"]) == 4
    # every summary and experience speaks of its own task
    queries = {t.id: t.query for t in GSM8KEnvironment(calculator=False).tasks(4)}
    for r in three["assessments"]:
        assert r["summary"]["decisive_steps"] == queries[r["query_id"]][:12]
    for x in three["experiences"]:
        assert x["fields"]["skill_name"] == x["query"][:12]


# -- evolution probes ---------------------------------------------------------------------------


def test_evolve_probes_overlap_and_reuse_the_t0_run_as_in_order(tmp_path) -> None:
    cfg, bank, probe = _evolve(tmp_path)
    rows = {}
    for n in (1, 3):
        out = tmp_path / f"run{n}"
        run_evolution(
            _Say(), cfg, bank_url=bank, out=out, chat=coin_chat(temperature=0.0),
            sid_generator=FixedGenerator([A]), progress=False, concurrency=n,
        )  # fmt: skip
        rows[n] = sorted(
            (_timeless(_lines(out / "probes.jsonl"))), key=lambda r: json.dumps(r, sort_keys=True)
        )
    assert rows[3] == rows[1]
    frozen = [r for r in rows[3] if r["method"] == "frozen"]
    assert len(frozen) == 2 * len(probe) and all(r["reused_from"] == "t0/sid" for r in frozen)


def test_evolve_stream_with_a_failing_probe_still_finishes(tmp_path) -> None:
    cfg, bank, probe = _evolve(tmp_path)
    out = tmp_path / "run"
    run_evolution(
        _Say(), cfg, bank_url=bank, out=out, chat=coin_chat(temperature=0.0),
        sid_generator=failing_generator(probe[0].query), progress=False, concurrency=4,
    )  # fmt: skip
    rows = _lines(out / "probes.jsonl")
    assert len(rows) == 2 * 2 * len(probe)
    assert {r["id"] for r in rows if r["error"]} == {probe[0].id}
