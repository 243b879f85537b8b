"""QA environment: bundled files, the search tool for research, F1/EM scoring, bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from langchain_core.messages import ToolMessage

from genmem.envs.base import Environment
from genmem.envs.qa import (
    HOTPOTQA_DEV_200,
    NQ_TEST_200,
    TWOWIKI_DEV_200,
    QAEnvironment,
    read_qa_jsonl,
)
from genmem.envs.search import HOTPOTQA_DISTRACTOR, BM25Index, Passage, SearchUnavailable


class _DownSearcher:
    def search(self, query: str, k: int) -> list[Passage]:
        raise SearchUnavailable("cannot reach the retrieval server", url="http://x/retrieve")


def _write(path: Path, *lines: str) -> Path:
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("path", "prefix"),
    [(HOTPOTQA_DEV_200, "hotpotqa-"), (TWOWIKI_DEV_200, "2wiki-"), (NQ_TEST_200, "nq-")],
)
def test_bundled_files_load_as_tasks(path: Path, prefix: str) -> None:
    env = QAEnvironment(path)
    assert isinstance(env, Environment)
    assert env.name == path.stem and env.metric_names == ("f1", "em")
    tasks = env.tasks()
    assert len(tasks) == 200 and len({t.id for t in tasks}) == 200
    assert all(t.id.startswith(prefix) and t.query and t.reference for t in tasks)
    assert [t.id for t in env.tasks(limit=3)] == [t.id for t in tasks[:3]]
    assert tasks[0].meta == {"source": path.name}
    assert env.tools().research == ()


def test_hotpotqa_questions_match_the_distractor_file() -> None:
    # The first 100 questions are the ones whose paragraphs distractor_corpus() pools.
    distractor = json.loads(HOTPOTQA_DISTRACTOR.read_text(encoding="utf-8"))
    tasks = QAEnvironment(HOTPOTQA_DEV_200).tasks(limit=100)
    assert [t.query for t in tasks] == [q["question"] for q in distractor]
    assert [t.reference for t in tasks] == [[q["answer"]] for q in distractor]


def test_scoring_takes_the_best_answer() -> None:
    env = QAEnvironment(NQ_TEST_200)
    task = env.tasks(limit=1)[0]  # "when was the last time anyone was on the moon"
    assert task.reference == ["14 December 1972 UTC", "December 1972"]

    exact = env.score(task, "December, 1972.")
    assert (exact.score, exact.success, exact.metrics) == (1.0, True, {"f1": 1.0, "em": 1.0})

    partial = env.score(task, "in December 1972 with Apollo 17")
    assert 0 < partial.score < 1 and not partial.success
    assert partial.metrics == {"f1": partial.score, "em": 0.0}

    for missing in (None, "", "   "):
        assert env.score(task, missing).model_dump() == {
            "score": 0.0,
            "success": False,
            "metrics": {"f1": 0.0, "em": 0.0},
        }


def test_yes_no_answers_get_no_partial_credit() -> None:
    env = QAEnvironment(HOTPOTQA_DEV_200)
    task = env.tasks(limit=1)[0]
    assert task.reference == ["yes"]
    assert env.score(task, "Yes").success
    assert env.score(task, "no").score == 0.0


def test_research_tool_searches_the_given_index() -> None:
    index = BM25Index.from_records(
        [
            {
                "id": "1",
                "title": "Scott Derrickson",
                "text": "Scott Derrickson is an American director.",
            },
            {"id": "2", "title": "Ed Wood", "text": "Ed Wood was an American filmmaker."},
            {"id": "3", "title": "Woodson", "text": "Woodson is a place in Arkansas."},
        ]
    )
    env = QAEnvironment(HOTPOTQA_DEV_200, searcher=index, k=1)
    (tool,) = env.tools().research
    assert env.tools().solver == () and env.tools().interactor == ()
    message = tool.invoke(
        {"type": "tool_call", "id": "c", "name": "search", "args": {"query": "Ed Wood nationality"}}
    )
    assert isinstance(message, ToolMessage)
    assert "[1] Ed Wood\nEd Wood was an American filmmaker." in message.content
    assert [p["id"] for p in message.artifact] == ["2"]


def test_research_tool_reports_a_server_that_is_down() -> None:
    (tool,) = QAEnvironment(HOTPOTQA_DEV_200, searcher=_DownSearcher()).tools().research
    assert tool.invoke({"query": "Ed Wood"}).startswith("Error: search is unavailable")


def test_custom_file_keeps_extra_fields_and_numeric_ids(tmp_path: Path) -> None:
    path = _write(
        tmp_path / "bamboogle.jsonl",
        '{"id": 1, "question": "Who?", "answers": ["Ada"], "hops": 2}',
        "",
        '{"id": "b", "question": "When?", "answers": ["1843", "in 1843"]}',
    )
    env = QAEnvironment(path, name="bamboogle")
    first, second = env.tasks()
    assert env.name == "bamboogle"
    assert (first.id, first.meta) == ("1", {"source": "bamboogle.jsonl", "hops": 2})
    assert env.score(second, "1843").success
    assert [r.id for r in read_qa_jsonl(path, limit=1)] == ["1"]


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ("not json", r"bad\.jsonl:2: not a QA record \(Expecting value"),
        ('["a list"]', r"bad\.jsonl:2: .*valid dictionary"),
        ('{"id": "b", "question": "Q?"}', r"bad\.jsonl:2: .*answers: Field required"),
        ('{"id": "b", "question": "Q?", "answers": []}', r"bad\.jsonl:2: .*answers: List should"),
        ('{"id": "b", "question": "", "answers": ["x"]}', r"bad\.jsonl:2: .*question"),
        ('{"id": "b", "question": "Q?", "answers": "x"}', r"bad\.jsonl:2: .*answers"),
        (
            '{"id": "a", "question": "Q?", "answers": ["x"]}',
            r"bad\.jsonl:2: id 'a' already used on line 1",
        ),
    ],
)
def test_bad_lines_name_path_and_line(tmp_path: Path, bad: str, message: str) -> None:
    path = _write(tmp_path / "bad.jsonl", '{"id": "a", "question": "Q?", "answers": ["x"]}', bad)
    with pytest.raises(ValueError, match=message):
        QAEnvironment(path)


def test_missing_file_raises() -> None:
    with pytest.raises(FileNotFoundError):
        QAEnvironment("does/not/exist.jsonl")
