"""Benchmarks by name, and any task file by its format: what ``genmem eval`` evaluates.

A bench name opens a bundled or served environment (:data:`BENCHES`); a task file is read by
the environment its format names (``qa``, ``gsm8k``, ``choice``, ``math``), which
:func:`detect_format` reads off the first record when not given. :class:`BenchOptions` carries
what some environments need beyond the tasks: a corpus or a retrieval server for QA search, a
WebShop server, ALFWorld's data, the TextWorld set.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from genmem.envs.base import Environment
from genmem.envs.search import DEFAULT_SEARCH_K, HOTPOTQA_DISTRACTOR, Searcher

__all__ = [
    "BENCHES",
    "DATASETS",
    "FORMATS",
    "BenchOptions",
    "DataFormat",
    "detect_format",
    "open_bench",
    "open_data",
    "open_dataset",
]

DataFormat = Literal["qa", "gsm8k", "choice", "math"]
FORMATS: tuple[DataFormat, ...] = ("qa", "gsm8k", "choice", "math")

BENCHES: dict[str, str] = {
    "gsm8k-test": "GSM8K test problems (1,319 bundled), a calculator for the solver, accuracy",
    "hotpotqa-distractor": "the 100 HotpotQA dev questions of the bundled distractor file, BM25 "
    "search over their ~1,000 paragraphs, F1/EM",
    "hotpotqa": "200 HotpotQA dev questions, F1/EM; search needs --corpus or --search-url",
    "2wiki": "200 2WikiMultihopQA dev questions, F1/EM; search needs --corpus or --search-url",
    "nq": "200 NQ-open test questions, F1/EM; search needs --corpus or --search-url",
    "textworld": "seeded TextWorld household games (pick and place), the game's won signal",
    "alfworld": "ALFWorld games (needs `alfworld` and its data), success per subtask",
    "webshop": "WebShop goals on a running server (--webshop-url or $WEBSHOP_URL), score/success",
}
"""Bench names and what each one runs."""


DATASETS: dict[str, tuple[str, ...]] = {
    "gsm8k": ("train", "test"),
    "textworld": ("train", "test"),
    "hotpotqa": ("dev",),
    "2wiki": ("dev",),
    "nq": ("test",),
}
"""Bundled datasets by name and the splits each ships (``genmem bank coldstart``, ``evolve``)."""

_TEXTWORLD_TRAIN_SEED = 10_000
"""TextWorld's train split: games seeded from here, far from the test set's seeds."""


class BenchOptions(BaseModel):
    """What environments need beyond their tasks."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    corpus: Path | None = Field(
        default=None, description='Corpus JSONL {"id", "title", "text"} for BM25 search (QA).'
    )
    search_url: str | None = Field(
        default=None, description="A Search-R1-style retrieval server (QA), instead of --corpus."
    )
    search_k: int = Field(default=DEFAULT_SEARCH_K, ge=1, le=20, description="Passages a search.")
    webshop_url: str | None = Field(default=None, description="WebShop server; $WEBSHOP_URL.")
    alfworld_data: Path | None = Field(default=None, description="ALFWorld data; $ALFWORLD_DATA.")
    games: int = Field(default=10, ge=1, description="TextWorld games in the seeded set.")
    seed: int = Field(default=0, ge=0, description="Seed of the TextWorld set / option shuffles.")

    def model_post_init(self, __context: object) -> None:
        """A QA search has one source."""
        if self.corpus is not None and self.search_url is not None:
            raise ValueError("give --corpus or --search-url, not both")


def _searcher(
    options: BenchOptions, default_corpus: list[dict[str, str]] | None = None
) -> Searcher | None:
    """The QA searcher the options name (None: closed-book)."""
    from genmem.envs.search import BM25Index, SearchR1Client

    if options.search_url:
        return SearchR1Client(options.search_url, topk=options.search_k)
    if options.corpus is not None:
        if not options.corpus.is_file():
            raise FileNotFoundError(f"corpus {str(options.corpus)!r} does not exist")
        from genmem.policies.local import cache_root

        return BM25Index.from_jsonl(options.corpus, cache_dir=cache_root() / "bm25" / _key(options))
    if default_corpus is not None:
        return BM25Index.from_records(default_corpus)
    return None


def _key(options: BenchOptions) -> str:
    import hashlib

    return hashlib.sha256(str(Path(options.corpus or "").resolve()).encode()).hexdigest()[:16]


def open_bench(name: str, options: BenchOptions | None = None) -> Environment:
    """The environment of a bench name (see :data:`BENCHES`).

    Raises:
        ValueError: an unknown name.
        ALFWorldUnavailable, WebShopUnavailable, ModuleNotFoundError: what a bench needs is
            missing (the message says how to get it).
    """
    options = options or BenchOptions()
    if name == "gsm8k-test":
        from genmem.envs.gsm8k import GSM8KEnvironment

        return GSM8KEnvironment()
    if name in ("hotpotqa-distractor", "hotpotqa", "2wiki", "nq"):
        from genmem.envs.qa import HOTPOTQA_DEV_200, NQ_TEST_200, TWOWIKI_DEV_200, QAEnvironment
        from genmem.envs.search import distractor_corpus

        if name == "hotpotqa-distractor":
            return QAEnvironment(
                HOTPOTQA_DEV_200,
                searcher=_searcher(options, distractor_corpus()),
                k=options.search_k,
                name=name,
                ids=_distractor_ids(HOTPOTQA_DEV_200),
            )
        path = {"hotpotqa": HOTPOTQA_DEV_200, "2wiki": TWOWIKI_DEV_200, "nq": NQ_TEST_200}[name]
        return QAEnvironment(path, searcher=_searcher(options), k=options.search_k, name=name)
    if name == "textworld":
        from genmem.envs.textworld_env import TextWorldConfig, TextWorldEnvironment

        return TextWorldEnvironment(TextWorldConfig(n_games=options.games, seed=options.seed))
    if name == "alfworld":
        from genmem.envs.alfworld_env import ALFWorldConfig, ALFWorldEnvironment

        return ALFWorldEnvironment(ALFWorldConfig(data_dir=options.alfworld_data))
    if name == "webshop":
        from genmem.envs.webshop import WebShopEnvironment

        return WebShopEnvironment(options.webshop_url)
    raise ValueError(f"unknown bench {name!r}; choose from {', '.join(BENCHES)}")


def open_dataset(name: str, split: str, options: BenchOptions | None = None) -> Environment:
    """The environment of a bundled dataset split (see :data:`DATASETS`).

    Raises:
        ValueError: an unknown dataset, or a split it does not ship (the message lists both).
    """
    options = options or BenchOptions()
    if name not in DATASETS:
        raise ValueError(f"unknown dataset {name!r}; choose from {', '.join(DATASETS)}")
    if split not in DATASETS[name]:
        raise ValueError(
            f"dataset {name!r} ships the split(s) {', '.join(DATASETS[name])}, not {split!r}; "
            "pass --data FILE for your own"
        )
    if name == "gsm8k":
        from genmem.envs.bundled import GSM8K_TRAIN
        from genmem.envs.gsm8k import GSM8K_TEST, GSM8KEnvironment

        path = GSM8K_TRAIN if split == "train" else GSM8K_TEST
        return GSM8KEnvironment(path, name=f"gsm8k-{split}")
    if name == "textworld":
        from genmem.envs.textworld_env import TextWorldConfig, TextWorldEnvironment

        seed = options.seed + (_TEXTWORLD_TRAIN_SEED if split == "train" else 0)
        return TextWorldEnvironment(TextWorldConfig(n_games=options.games, seed=seed))
    return open_bench(name, options)


def _distractor_ids(path: Path) -> list[str]:
    """Ids, in the QA file ``path``, of the questions of the bundled distractor file."""
    from genmem.envs.qa import read_qa_jsonl

    texts = {r["question"] for r in json.loads(HOTPOTQA_DISTRACTOR.read_text(encoding="utf-8"))}
    return [r.id for r in read_qa_jsonl(path) if r.question in texts]


def detect_format(path: str | Path) -> DataFormat:
    """The format of a task file, read off its first record's keys.

    Raises:
        ValueError: an empty file, or keys that fit no format (the message lists them).
    """
    from genmem.envs.choice import read_rows

    path = Path(path)
    first = next(iter(read_rows(path)), None)
    if first is None:
        raise ValueError(f"{path}: holds no records")
    line, row = first
    keys = set(row)
    if "answers" in keys and "question" in keys:
        return "qa"
    if keys & {"options", "choices", "Correct Answer"}:
        return "choice"
    if "problem" in keys or "solution" in keys:
        return "math"
    if "question" in keys and "####" in str(row.get("answer", "")):
        return "gsm8k"
    raise ValueError(
        f"{path}:{line}: cannot tell the format from keys {sorted(keys)}; a line needs "
        '{"id", "question", "answers": [...]} (qa), {"question", "answer": "... #### N"} '
        '(gsm8k), {"question", "options", "answer"} (choice) or {"problem", "answer"} (math); '
        "or name the format"
    )


def open_data(
    path: str | Path, fmt: DataFormat | None = None, options: BenchOptions | None = None
) -> Environment:
    """The environment for a task file (``fmt`` None: :func:`detect_format`).

    Raises:
        FileNotFoundError: no such file.
        ValueError: an unknown format, or a record that does not fit it (``path:line``).
    """
    options = options or BenchOptions()
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"task file {str(path)!r} does not exist")
    fmt = fmt or detect_format(path)
    if fmt == "qa":
        from genmem.envs.qa import QAEnvironment

        return QAEnvironment(path, searcher=_searcher(options), k=options.search_k)
    if fmt == "gsm8k":
        from genmem.envs.gsm8k import GSM8KEnvironment

        return GSM8KEnvironment(path)
    if fmt == "choice":
        from genmem.envs.choice import MultipleChoiceEnvironment

        return MultipleChoiceEnvironment(path, seed=options.seed)
    if fmt == "math":
        from genmem.envs.choice import MathEnvironment

        return MathEnvironment(path)
    raise ValueError(f"unknown format {fmt!r}; choose from {', '.join(FORMATS)}")
