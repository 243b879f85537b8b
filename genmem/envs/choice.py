"""Question files as environments: GPQA-style multiple choice and MATH-style final answers.

:class:`MultipleChoiceEnvironment` reads four-option questions and scores the letter an answer
commits to (GPQA accuracy, paper appendix D); :class:`MathEnvironment` reads MATH-style problems
and scores the final answer. Both read a JSONL file (one object a line) or, for the layout GPQA
itself ships in, a CSV file with a header row. Scoring is :mod:`genmem.envs.scoring`'s.

Accepted rows:

- Multiple choice: ``question`` (or GPQA's ``Question``) and either ``options`` / ``choices``
  (a list of 4 strings, shown in file order) with ``answer`` (a letter ``A``-``D``, an index
  0-3, or the text of the correct option); or GPQA's ``Correct Answer`` and
  ``Incorrect Answer 1``-``3``, shuffled per question with a seeded RNG so that the correct
  option's letter is spread evenly and the same for a given seed.
- Math: ``problem`` (or ``question``) and ``answer``, or a ``solution`` whose last
  ``\\boxed{...}`` holds the answer.

A row that does not fit raises :class:`ValueError` naming it as ``path:line``.
"""

from __future__ import annotations

import csv
import random
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from genmem.envs.base import Environment, Outcome, Task
from genmem.envs.bundled import read_jsonl
from genmem.envs.scoring import extract_boxed, score_math, score_multiple_choice

__all__ = [
    "GPQA_INCORRECT",
    "LETTERS",
    "MathEnvironment",
    "MultipleChoiceEnvironment",
    "choice_query",
    "read_rows",
]

LETTERS = "ABCD"
"""Option letters, in the order options are shown."""
GPQA_INCORRECT = ("Incorrect Answer 1", "Incorrect Answer 2", "Incorrect Answer 3")
"""GPQA's columns of wrong options (its right one is ``Correct Answer``)."""


def read_rows(path: str | Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(line, row)`` for each record of a JSONL file, or of a CSV file with a header row.

    The line is where the record starts (CSV fields may span lines). Blank JSONL lines are
    skipped.

    Raises:
        ValueError: a JSONL line that is not a JSON object, named as ``path:line``.
    """
    path = Path(path)
    with path.open(encoding="utf-8", newline="" if path.suffix.lower() == ".csv" else None) as fh:
        if path.suffix.lower() == ".csv":
            reader = csv.DictReader(fh)
            start = 2  # line 1 is the header
            for row in reader:
                yield start, {k: v for k, v in row.items() if k is not None}
                start = reader.line_num + 1
            return
    yield from read_jsonl(path)


def choice_query(question: str, options: list[str]) -> str:
    """The question with its options lettered A-D, and how to answer."""
    lines = [question.strip(), ""]
    lines += [f"{letter}) {text}" for letter, text in zip(LETTERS, options, strict=True)]
    lines += ["", "Answer with the letter (A, B, C or D) of the correct option."]
    return "\n".join(lines)


def _text(row: Mapping[str, Any], keys: tuple[str, ...], where: str, what: str) -> str:
    for key in keys:
        value = row.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip()
    named = " or ".join(repr(k) for k in keys)
    raise ValueError(f"{where}: needs {what}: a non-empty string in {named}")


def _answer_index(answer: Any, options: list[str], where: str) -> int:
    """The index of the correct option: from a letter, an index 0-3 or the option's text."""
    if isinstance(answer, int) and not isinstance(answer, bool) and 0 <= answer < len(options):
        return answer
    if isinstance(answer, str):
        text = answer.strip()
        letter = text.strip("()").strip().rstrip(".").upper()
        if len(letter) == 1 and letter in LETTERS:
            return LETTERS.index(letter)
        matches = [i for i, option in enumerate(options) if option == text]
        if len(matches) == 1:
            return matches[0]
    raise ValueError(
        f"{where}: answer {answer!r} is not a letter A-D, an index 0-3, or the text of exactly "
        "one option; fix 'answer'"
    )


def _options(row: Mapping[str, Any], where: str) -> tuple[list[str], int, bool]:
    """(options, index of the correct one, whether the file fixes their order)."""
    listed = row.get("options", row.get("choices"))
    if listed is not None:
        if (
            not isinstance(listed, list)
            or len(listed) != len(LETTERS)
            or not all(isinstance(o, str | int | float) and str(o).strip() for o in listed)
        ):
            raise ValueError(
                f"{where}: 'options' (or 'choices') must be a list of {len(LETTERS)} non-empty "
                f"strings, got {listed!r:.120}"
            )
        if "answer" not in row:
            raise ValueError(f"{where}: has 'options' but no 'answer' (a letter A-D)")
        options = [str(o).strip() for o in listed]
        return options, _answer_index(row["answer"], options, where), True
    if "Correct Answer" in row or any(k in row for k in GPQA_INCORRECT):
        correct = _text(row, ("Correct Answer",), where, "the correct option")
        wrong = [_text(row, (k,), where, "a wrong option") for k in GPQA_INCORRECT]
        return [correct, *wrong], 0, False
    raise ValueError(
        f"{where}: needs 'options' (or 'choices') with 'answer', or GPQA's 'Correct Answer' and "
        f"{', '.join(repr(k) for k in GPQA_INCORRECT)}"
    )


def _check_unique(task_id: str, seen: dict[str, str], where: str) -> None:
    if task_id in seen:
        raise ValueError(f"{where}: id {task_id!r} is already used at {seen[task_id]}")
    seen[task_id] = where


class MultipleChoiceEnvironment(Environment):
    """Four-option questions (GPQA format); the score is 1 when the chosen letter is right.

    Args:
        path: A JSONL or CSV file of questions (see the module docstring for the columns).
        seed: Seeds the shuffle of GPQA-column options (each question is shuffled with
            ``random.Random(f"{seed}:{id}")``, so one question's order does not depend on the
            others). Files that list ``options`` keep their order.
        name: Name in result files and tables (default: the class's ``multiple_choice``).

    Raises:
        ValueError: a row that does not fit, or a file with no questions.
    """

    name = "multiple_choice"
    experience_type = "factual"
    metric_names = ("accuracy",)

    def __init__(self, path: str | Path, *, seed: int = 0, name: str | None = None) -> None:
        self.path = Path(path)
        self.seed = seed
        if name is not None:
            self.name = name
        self._tasks = self._load()

    def _load(self) -> list[Task]:
        tasks: list[Task] = []
        seen: dict[str, str] = {}
        for line, row in read_rows(self.path):
            where = f"{self.path}:{line}"
            question = _text(row, ("question", "Question"), where, "the question")
            options, correct, fixed = _options(row, where)
            task_id = str(row.get("id") or row.get("Record ID") or f"{self.path.stem}-{len(tasks)}")
            _check_unique(task_id, seen, where)
            order = list(range(len(options)))
            if not fixed:
                random.Random(f"{self.seed}:{task_id}").shuffle(order)
            shown = [options[i] for i in order]
            letter = LETTERS[order.index(correct)]
            meta: dict[str, Any] = {"options": shown}
            for key, field in (("High-level domain", "domain"), ("Subdomain", "subdomain")):
                if isinstance(row.get(key), str) and row[key].strip():
                    meta[field] = row[key].strip()
            tasks.append(
                Task(id=task_id, query=choice_query(question, shown), reference=letter, meta=meta)
            )
        if not tasks:
            raise ValueError(f"{self.path}: holds no questions")
        return tasks

    def tasks(self, limit: int | None = None) -> list[Task]:
        """The questions in file order, the correct letter as reference."""
        return list(self._tasks[:limit])

    def score(self, task: Task, answer: str | None) -> Outcome:
        """1 when the letter the answer commits to is the correct one (accuracy)."""
        value = score_multiple_choice(answer, task.reference)
        return Outcome(score=value, success=value == 1.0, metrics={"accuracy": value})


class MathEnvironment(Environment):
    """MATH-style problems; the score is 1 when the final answer equals the reference.

    Args:
        path: A JSONL or CSV file of problems: ``problem`` (or ``question``) and ``answer``,
            or a ``solution`` with the answer in its last ``\\boxed{...}``.
        name: Name in result files and tables (default: the class's ``math``).

    Raises:
        ValueError: a row that does not fit, or a file with no problems.
    """

    name = "math"
    metric_names = ("accuracy",)

    def __init__(self, path: str | Path, *, name: str | None = None) -> None:
        self.path = Path(path)
        if name is not None:
            self.name = name
        self._tasks = self._load()

    def _load(self) -> list[Task]:
        tasks: list[Task] = []
        seen: dict[str, str] = {}
        for line, row in read_rows(self.path):
            where = f"{self.path}:{line}"
            problem = _text(row, ("problem", "question"), where, "the problem")
            gold = self._gold(row, where)
            task_id = str(row.get("unique_id") or row.get("id") or f"{self.path.stem}-{len(tasks)}")
            _check_unique(task_id, seen, where)
            meta = {k: row[k] for k in ("level", "type", "subject") if row.get(k) not in (None, "")}
            tasks.append(Task(id=task_id, query=problem, reference=gold, meta=meta))
        if not tasks:
            raise ValueError(f"{self.path}: holds no problems")
        return tasks

    @staticmethod
    def _gold(row: Mapping[str, Any], where: str) -> str:
        answer = row.get("answer")
        if isinstance(answer, int | float) and not isinstance(answer, bool):
            return str(answer)
        if isinstance(answer, str) and answer.strip():
            return answer.strip()
        solution = row.get("solution")
        if isinstance(solution, str) and solution.strip():
            boxed = extract_boxed(solution)
            if boxed:
                return boxed
            raise ValueError(
                f"{where}: 'solution' has no closed \\boxed{{...}} answer; box it or add 'answer'"
            )
        raise ValueError(
            f"{where}: needs an 'answer', or a 'solution' with a \\boxed{{...}} answer"
        )

    def tasks(self, limit: int | None = None) -> list[Task]:
        """The problems in file order, the final answer as reference."""
        return list(self._tasks[:limit])

    def score(self, task: Task, answer: str | None) -> Outcome:
        """1 when the answer's final answer (last box, stated answer or last number) matches."""
        value = score_math(answer, task.reference)
        return Outcome(score=value, success=value == 1.0, metrics={"accuracy": value})
