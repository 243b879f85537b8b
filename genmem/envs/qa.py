"""Search-augmented question answering: HotpotQA, 2WikiMultihopQA, NQ and any QA file alike.

A QA file is JSONL, one ``{"id", "question", "answers": [...]}`` a line, ``answers`` listing
every acceptable gold answer (MuSiQue and Bamboogle convert to it as easily). The research
sub-agent gets one ``search`` tool over a local :class:`~genmem.envs.search.BM25Index` or a
Search-R1 server; answers are scored by SQuAD-normalised token F1 and exact match, the best over
the acceptable answers.
"""

from __future__ import annotations

import json
from collections.abc import Collection
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from genmem.envs.base import Environment, EnvTools, Outcome, Task
from genmem.envs.bundled import DATA_DIR
from genmem.envs.scoring import qa_scores
from genmem.envs.search import DEFAULT_SEARCH_K, Searcher, create_search_tool

__all__ = [
    "HOTPOTQA_DEV_200",
    "NQ_TEST_200",
    "TWOWIKI_DEV_200",
    "QAEnvironment",
    "QARecord",
    "read_qa_jsonl",
]

HOTPOTQA_DEV_200 = DATA_DIR / "qa" / "hotpotqa_dev_200.jsonl"
"""First 200 HotpotQA dev questions (CC BY-SA 4.0); the first 100 are those of the bundled
distractor file, so :func:`~genmem.envs.search.distractor_corpus` holds their paragraphs."""
TWOWIKI_DEV_200 = DATA_DIR / "qa" / "2wiki_dev_200.jsonl"
"""First 200 2WikiMultihopQA dev questions (Apache-2.0)."""
NQ_TEST_200 = DATA_DIR / "qa" / "nq_test_200.jsonl"
"""First 200 NQ-open test questions, several acceptable answers each (CC BY-SA 3.0)."""


class QARecord(BaseModel):
    """One line of a QA file; keys beyond these three are kept as the task's ``meta``."""

    model_config = ConfigDict(extra="allow", coerce_numbers_to_str=True)

    id: str = Field(min_length=1)
    question: str = Field(min_length=1)
    answers: list[str] = Field(min_length=1, description="Every acceptable gold answer.")


def read_qa_jsonl(path: str | Path, limit: int | None = None) -> list[QARecord]:
    """Records of a QA JSONL file in file order (blank lines skipped).

    Raises:
        ValueError: a line that is not a QA record, or an id seen before, named as
            ``path:line``.
    """
    path = Path(path)
    records: list[QARecord] = []
    seen: dict[str, int] = {}
    with path.open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if limit is not None and len(records) >= limit:
                break
            if not line.strip():
                continue
            try:
                record = QARecord.model_validate(json.loads(line))
            except ValueError as exc:  # JSONDecodeError and ValidationError are ValueErrors
                raise ValueError(
                    f"{path}:{lineno}: not a QA record ({_describe(exc)}); each line "
                    'must be {"id": str, "question": str, "answers": [str, ...]}'
                ) from exc
            if record.id in seen:
                raise ValueError(
                    f"{path}:{lineno}: id {record.id!r} already used on line {seen[record.id]}; "
                    "ids must be unique within a file"
                )
            seen[record.id] = lineno
            records.append(record)
    return records


class QAEnvironment(Environment):
    """Questions from a QA JSONL file, a ``search`` tool for research, F1/EM scoring.

    Args:
        path: The QA file (``{"id", "question", "answers"}`` per line).
        searcher: What the ``search`` tool queries (a ``BM25Index``, a ``SearchR1Client``).
            None: no research tools are offered (closed-book).
        k: Passages per search.
        name: Name in result files; the file's stem by default.
        ids: Keep only these tasks, in file order (None: all of them).

    Raises:
        ValueError: a bad line in ``path`` (named as ``path:line``), or an id not in it.
    """

    metric_names = ("f1", "em")
    experience_type = "factual"

    def __init__(
        self,
        path: str | Path = HOTPOTQA_DEV_200,
        *,
        searcher: Searcher | None = None,
        k: int = DEFAULT_SEARCH_K,
        name: str | None = None,
        ids: Collection[str] | None = None,
    ) -> None:
        self.path = Path(path)
        self.name = name or self.path.stem
        self.searcher = searcher
        self._records = read_qa_jsonl(self.path)
        if ids is not None:
            missing = set(ids) - {r.id for r in self._records}
            if missing:
                raise ValueError(f"{self.path}: no question with id {sorted(missing)[0]!r}")
            self._records = [r for r in self._records if r.id in set(ids)]
        self._tools = (
            EnvTools(research=(create_search_tool(searcher, k),))
            if searcher is not None
            else EnvTools()
        )

    def tasks(self, limit: int | None = None) -> list[Task]:
        """The questions as tasks, reference = the acceptable answers, in file order."""
        records = self._records if limit is None else self._records[:limit]
        return [
            Task(
                id=r.id,
                query=r.question,
                reference=list(r.answers),
                meta={"source": self.path.name, **(r.model_extra or {})},
            )
            for r in records
        ]

    def tools(self) -> EnvTools:
        """``research=[search]`` when a searcher was given, else no tools."""
        return self._tools

    def score(self, task: Task, answer: str | None) -> Outcome:
        """Best token F1 / exact match of ``answer`` over the task's acceptable answers."""
        result = qa_scores(answer, task.reference)
        return Outcome(
            score=result.f1, success=result.em == 1.0, metrics={"f1": result.f1, "em": result.em}
        )


def _describe(exc: ValueError) -> str:
    if isinstance(exc, ValidationError):
        return "; ".join(
            f"{'.'.join(map(str, e['loc'])) or 'line'}: {e['msg']}" for e in exc.errors()
        )
    return str(exc)
