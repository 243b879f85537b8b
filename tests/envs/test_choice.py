"""Multiple-choice (GPQA format) and MATH-style environments over small hand-written files."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pytest

from genmem.envs.choice import (
    GPQA_INCORRECT,
    MathEnvironment,
    MultipleChoiceEnvironment,
    choice_query,
)

DATA = Path(__file__).parent / "data"
GPQA_SAMPLE = DATA / "gpqa_sample.jsonl"
MATH_SAMPLE = DATA / "math_sample.jsonl"


def _jsonl(path: Path, rows: list[Any]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _gpqa_rows() -> list[dict[str, str]]:
    return [json.loads(line) for line in GPQA_SAMPLE.read_text(encoding="utf-8").splitlines()]


# -- multiple choice -----------------------------------------------------------------------------


def test_gpqa_columns_are_shuffled_by_the_seed() -> None:
    env = MultipleChoiceEnvironment(GPQA_SAMPLE)
    tasks = env.tasks()
    assert [t.id for t in tasks] == [r["Record ID"] for r in _gpqa_rows()]
    assert env.name == "multiple_choice" and env.metric_names == ("accuracy",)
    for task, row in zip(tasks, _gpqa_rows(), strict=True):
        options = task.meta["options"]
        assert sorted(options) == sorted([row["Correct Answer"], *(row[k] for k in GPQA_INCORRECT)])
        assert options["ABCD".index(task.reference)] == row["Correct Answer"]
        assert task.query.startswith(row["Question"])
        assert f"{task.reference}) {row['Correct Answer']}\n" in task.query
        assert task.meta["domain"] == row["High-level domain"]
    assert [t.reference for t in tasks] == ["D", "C", "C", "C", "C"]  # seed 0, fixed forever
    assert MultipleChoiceEnvironment(GPQA_SAMPLE).tasks() == tasks
    assert [t.reference for t in MultipleChoiceEnvironment(GPQA_SAMPLE, seed=2).tasks()] == list(
        "DCBAD"
    )
    assert env.tasks(limit=2) == tasks[:2]


def test_a_question_keeps_its_order_whatever_else_is_loaded(tmp_path: Path) -> None:
    rows = _gpqa_rows()
    alone = MultipleChoiceEnvironment(_jsonl(tmp_path / "one.jsonl", rows[3:4])).tasks()
    assert alone[0] == MultipleChoiceEnvironment(GPQA_SAMPLE).tasks()[3]


def test_query_letters_the_options() -> None:
    query = choice_query(" Which? ", ["w", "x", "y", "z"])
    assert query == (
        "Which?\n\nA) w\nB) x\nC) y\nD) z\n\n"
        "Answer with the letter (A, B, C or D) of the correct option."
    )


@pytest.mark.parametrize(
    ("answer", "letter"),
    [("B", "B"), ("(c)", "C"), ("d.", "D"), (0, "A"), (2, "C"), ("  oxygen ", "B")],
)
def test_listed_options_keep_their_order(tmp_path: Path, answer: Any, letter: str) -> None:
    row = {"question": "Which gas?", "options": ["argon", "oxygen", "neon", "xenon"]}
    path = _jsonl(tmp_path / "q.jsonl", [{**row, "answer": answer}])
    (task,) = MultipleChoiceEnvironment(path, name="mcq").tasks()
    assert task.reference == letter and task.id == "q-0"
    assert task.meta["options"] == ["argon", "oxygen", "neon", "xenon"]
    assert "A) argon\nB) oxygen\nC) neon\nD) xenon" in task.query


def test_choices_and_ids_are_read_too(tmp_path: Path) -> None:
    path = _jsonl(
        tmp_path / "mmlu.jsonl",
        [{"id": 7, "question": "2+2?", "choices": [3, 4, 5, 6], "answer": 1}],
    )
    env = MultipleChoiceEnvironment(path, name="mmlu")
    (task,) = env.tasks()
    assert env.name == "mmlu" and task.id == "7" and task.reference == "B"


def test_score_is_the_letter_accuracy() -> None:
    env = MultipleChoiceEnvironment(GPQA_SAMPLE)
    task = env.tasks()[0]  # correct letter D
    right = env.score(task, "The energy scales as 1/L^2, so the answer is (D).")
    assert right.score == 1.0 and right.success and right.metrics == {"accuracy": 1.0}
    assert env.score(task, "Final answer: B").score == 0.0
    wrong = env.score(task, None)
    assert wrong.score == 0.0 and not wrong.success and wrong.metrics == {"accuracy": 0.0}


def test_gpqa_csv_with_multiline_questions(tmp_path: Path) -> None:
    path = tmp_path / "gpqa.csv"
    columns = ["Record ID", "Question", "Correct Answer", *GPQA_INCORRECT]
    with path.open("w", encoding="utf-8", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=columns)
        writer.writeheader()
        for values in (
            ["r1", "Line one\nline two?", " yes ", "no", "maybe", "never"],
            ["r2", "Second?", "", "a", "b", "c"],
        ):
            writer.writerow(dict(zip(columns, values, strict=True)))
    with pytest.raises(ValueError, match=rf"{path}:4: needs the correct option"):
        MultipleChoiceEnvironment(path)
    path.write_text("\n".join(path.read_text(encoding="utf-8").splitlines()[:3]) + "\n")
    (task,) = MultipleChoiceEnvironment(path).tasks()
    assert task.id == "r1" and task.query.startswith("Line one\nline two?\n\n")
    assert task.meta["options"]["ABCD".index(task.reference)] == "yes"


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ({"options": ["a", "b", "c", "d"], "answer": "A"}, "needs the question"),
        ({"question": "q?", "options": ["a", "b", "c"], "answer": "A"}, "list of 4"),
        ({"question": "q?", "options": ["a", "b", "c", " "], "answer": "A"}, "list of 4"),
        ({"question": "q?", "options": ["a", "b", "c", "d"]}, "no 'answer'"),
        ({"question": "q?", "options": ["a", "b", "c", "d"], "answer": "E"}, "'E' is not"),
        ({"question": "q?", "options": ["a", "b", "c", "d"], "answer": 4}, "4 is not"),
        ({"question": "q?", "options": ["ca", "ca", "c", "d"], "answer": "ca"}, "exactly one"),
        ({"question": "q?", "options": ["a", "b", "c", "d"], "answer": True}, "True is not"),
        ({"question": "q?", "Correct Answer": "x", "Incorrect Answer 1": "y"}, "a wrong option"),
        ({"question": "q?", "answer": "A"}, "needs 'options'"),
    ],
)
def test_bad_rows_name_their_line(tmp_path: Path, row: dict[str, Any], message: str) -> None:
    good = {"question": "ok?", "options": ["a", "b", "c", "d"], "answer": "A"}
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps(good) + "\n\n" + json.dumps(row) + "\n", encoding="utf-8")
    with pytest.raises(ValueError, match=rf"bad\.jsonl:3: .*{message}"):
        MultipleChoiceEnvironment(path)


def test_broken_files_are_named(tmp_path: Path) -> None:
    path = tmp_path / "broken.jsonl"
    path.write_text('{"question": \n', encoding="utf-8")
    with pytest.raises(ValueError, match=r"broken\.jsonl:1: not a JSON line"):
        MultipleChoiceEnvironment(path)
    path.write_text("[1, 2]\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"broken\.jsonl:1: expected a JSON object, got list"):
        MultipleChoiceEnvironment(path)
    path.write_text("\n", encoding="utf-8")
    with pytest.raises(ValueError, match="holds no questions"):
        MultipleChoiceEnvironment(path)
    row = {"id": "same", "question": "q?", "options": ["a", "b", "c", "d"], "answer": "A"}
    _jsonl(path, [row, row])
    with pytest.raises(ValueError, match=r"broken\.jsonl:2: id 'same' is already used at .*:1"):
        MultipleChoiceEnvironment(path)


# -- math ----------------------------------------------------------------------------------------


def test_math_references_come_from_boxes_or_answers() -> None:
    env = MathEnvironment(MATH_SAMPLE)
    tasks = env.tasks()
    assert [t.reference for t in tasks] == ["91", "1", "6", "\\frac{1}{4}", "5\\sqrt{2}"]
    assert tasks[0].id == "sample/number_theory/1" and tasks[0].query.startswith("What is the sum")
    assert tasks[3].meta == {"level": "Level 2", "type": "Counting & Probability"}
    assert env.name == "math" and env.metric_names == ("accuracy",)
    assert env.tasks(limit=1) == tasks[:1]


@pytest.mark.parametrize(
    ("index", "answer", "score"),
    [
        (0, "Adding them up gives \\boxed{91}.", 1.0),
        (0, "So the sum is 90.", 0.0),
        (2, "x = 6", 1.0),
        (3, "The probability is 0.25", 1.0),
        (3, "\\boxed{\\dfrac{1}{4}}", 1.0),
        (3, "\\boxed{\\frac{1}{2}}", 0.0),
        (4, "Final answer: $5\\sqrt{2}$", 1.0),
        (4, None, 0.0),
    ],
)
def test_math_score_checks_the_final_answer(index: int, answer: str | None, score: float) -> None:
    env = MathEnvironment(MATH_SAMPLE)
    outcome = env.score(env.tasks()[index], answer)
    assert outcome.score == score and outcome.success == (score == 1.0)
    assert outcome.metrics == {"accuracy": score}


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ({"solution": "\\boxed{1}"}, "needs the problem"),
        ({"problem": "p"}, "needs an 'answer'"),
        ({"problem": "p", "solution": "It is 4."}, "no closed \\\\boxed"),
        ({"problem": "p", "solution": "\\boxed{4"}, "no closed \\\\boxed"),
        ({"problem": "p", "answer": "  "}, "needs an 'answer'"),
    ],
)
def test_bad_math_rows_name_their_line(tmp_path: Path, row: dict[str, Any], message: str) -> None:
    path = _jsonl(tmp_path / "math.jsonl", [{"problem": "1+1?", "answer": 2}, row])
    with pytest.raises(ValueError, match=rf"math\.jsonl:2: .*{message}"):
        MathEnvironment(path)
    ok = _jsonl(tmp_path / "ok.jsonl", [{"question": "1+1?", "answer": 2}])
    (task,) = MathEnvironment(ok).tasks()
    assert task.reference == "2" and task.id == "ok-0"
