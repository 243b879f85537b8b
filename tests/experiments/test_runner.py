"""The query stream runner: one record per query, appended as it goes, resumed on rerun."""

from __future__ import annotations

import json
import re
import warnings
from pathlib import Path
from typing import Any

import pytest

from genmem.experiments.runner import QueryRecord, load_queries, run_stream, summarize


class ScriptedApp:
    """Stands in for a compiled ``genmem`` graph: answers from a table, fails on request."""

    def __init__(self, answers: dict[str, str], fail: set[str] = frozenset()) -> None:
        self.answers, self.fail, self.calls = answers, fail, []

    def invoke(self, payload: dict[str, Any], context: dict[str, Any]) -> dict[str, Any]:
        self.calls.append((payload, context))
        if payload["query"] in self.fail:
            raise RuntimeError("model crashed")
        answer = self.answers[payload["query"]]
        score = None if "reference" not in payload else float(answer == payload["reference"])
        update = {"outcome": "inserted", "sid": "<SID_L1_0>"} if score == 1.0 else None
        error = None if update else {"kind": "invalid_output"}
        return {
            "answer": answer,
            "score": score,
            "update": update,
            "evolve_error": error,
            "status": "finished",
            "not_a_record_field": 1,
        }


def _write(path: Path, rows: list[Any]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


QUERIES = [
    {"id": "a", "query": "1+1?", "reference": "2"},
    {"id": "b", "query": "2+2?", "reference": "4"},
    {"id": "c", "query": "boom", "reference": "0"},
]


def test_records_are_appended_and_a_rerun_resumes(tmp_path: Path) -> None:
    app = ScriptedApp({"1+1?": "2", "2+2?": "5"}, fail={"boom"})
    seen: list[str] = []
    records = run_stream(
        app,
        QUERIES,
        context={"bank_url": "x"},
        out=tmp_path,
        progress=False,
        on_record=lambda r: seen.append(r.id),
    )
    assert seen == ["a", "b", "c"]
    assert [c[1] for c in app.calls] == [{"bank_url": "x"}] * 3
    assert [c[0]["mode"] for c in app.calls] == ["evolve"] * 3
    lines = (tmp_path / "results.jsonl").read_text().splitlines()
    assert [json.loads(line)["id"] for line in lines] == ["a", "b", "c"]
    assert records[0].score == 1.0 and records[0].memory_op() == "inserted"
    assert records[1].memory_op() == "rejected (invalid_output)"
    assert records[2].error and "model crashed" in records[2].error  # the stream went on

    again = ScriptedApp({})
    resumed = run_stream(again, QUERIES, context={}, out=tmp_path, progress=False)
    assert again.calls == [] and [r.id for r in resumed] == ["a", "b", "c"]

    summary = summarize(resumed, {"mode": "evolve"})
    # the crashed query had a reference: it counts as a wrong answer (issue 18 item 6)
    assert (summary.queries, summary.answered, summary.scored, summary.errors) == (3, 2, 3, 1)
    assert summary.accuracy == pytest.approx(1 / 3)
    assert summary.operations == {"inserted": 1, "rejected (invalid_output)": 1}


def test_a_run_killed_mid_write_resumes_from_its_whole_lines(tmp_path: Path) -> None:
    first = ScriptedApp({"1+1?": "2", "2+2?": "4"}, fail={"boom"})
    run_stream(first, QUERIES, context={}, out=tmp_path, progress=False)
    results = tmp_path / "results.jsonl"
    whole = results.read_bytes()
    # kill -9 while the third record was being written: its line is cut short, no newline.
    cut = whole.rindex(b"\n", 0, len(whole) - 1) + 1 + 25
    results.write_bytes(whole[:cut])

    again = ScriptedApp({"boom": "0"})
    with pytest.warns(RuntimeWarning, match=rf"{re.escape(str(results))}:3: .*torn"):
        resumed = run_stream(again, QUERIES, context={}, out=tmp_path, progress=False)
    assert [c[0]["query"] for c in again.calls] == ["boom"]  # only the torn item runs again
    assert [(r.id, r.answer, r.error) for r in resumed] == [
        ("a", "2", None),
        ("b", "4", None),
        ("c", "0", None),
    ]
    lines = results.read_text(encoding="utf-8").splitlines()
    assert [QueryRecord.model_validate_json(x).id for x in lines] == ["a", "b", "c"]

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the file is whole again: a third run reads it quietly
        third = run_stream(ScriptedApp({}), QUERIES, context={}, out=tmp_path, progress=False)
    assert [r.model_dump() for r in third] == [r.model_dump() for r in resumed]


def test_a_bad_line_before_the_last_stops_the_resume(tmp_path: Path) -> None:
    run_stream(
        ScriptedApp({"1+1?": "2", "2+2?": "4", "boom": "0"}),
        QUERIES,
        context={},
        out=tmp_path,
        progress=False,
    )
    results = tmp_path / "results.jsonl"
    lines = results.read_bytes().splitlines(keepends=True)
    results.write_bytes(lines[0] + lines[1][:20] + b"\n" + lines[2])
    app = ScriptedApp({})
    with pytest.raises(ValueError, match=rf"{re.escape(str(results))}:2: "):
        run_stream(app, QUERIES, context={}, out=tmp_path, progress=False)
    assert app.calls == []


def test_reference_is_only_sent_when_there_is_one() -> None:
    app = ScriptedApp({"q": "1"})
    run_stream(app, [{"id": "1", "query": "q"}], context={}, mode="read_only", progress=False)
    assert app.calls[0][0] == {"query": "q", "mode": "read_only"}


def test_load_queries_accepts_the_common_field_names(tmp_path: Path) -> None:
    path = _write(
        tmp_path / "q.jsonl",
        [
            {"question": "How many?", "answer": "steps\n#### 1,000"},
            {"query": "Name it", "reference": "x", "id": 7},
            {"query": "List", "answers": ["a", "b"]},
        ],
    )
    rows = load_queries(path)
    assert rows[0] == {"id": "q-1", "query": "How many?", "reference": "1000"}
    assert rows[1]["id"] == "7" and rows[2]["reference"] == ["a", "b"]
    assert len(load_queries(path, limit=2)) == 2


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("{not json", "not a JSON line"),
        ('{"answer": "4"}', "non-empty 'query'"),
        ("[1]", "expected a JSON object"),
    ],
)
def test_load_queries_names_the_bad_line(tmp_path: Path, line: str, message: str) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text('{"query": "fine"}\n' + line + "\n", encoding="utf-8")
    with pytest.raises(ValueError, match=message) as info:
        load_queries(path)
    assert ":2:" in str(info.value)


def test_summary_of_nothing() -> None:
    summary = summarize([])
    assert summary.queries == 0 and summary.accuracy is None and summary.mean_seconds == 0.0
    assert QueryRecord(id="1", query="q", mode="evolve").memory_op() == "none"
