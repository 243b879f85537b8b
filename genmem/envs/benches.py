"""Benchmarks by name, and any task file by its format: what ``genmem eval`` evaluates.

A bench name opens a bundled or served environment (:data:`BENCHES`); a task file is read by
the environment its format names (``qa``, ``gsm8k``, ``choice``, ``math``), which
:func:`detect_format` reads off the first record when not given. :class:`BenchOptions` carries
what some environments need beyond the tasks: a corpus or a retrieval server for QA search, a
WebShop server, ALFWorld's data, the TextWorld set.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from genmem.envs.base import Environment
from genmem.envs.search import DEFAULT_SEARCH_K, HOTPOTQA_DISTRACTOR, Searcher

__all__ = [
    "BENCHES",
    "FORMATS",
    "LEGACY_SPLITS",
    "Bench",
    "BenchOptions",
    "DataFormat",
    "bench_tasks",
    "detect_format",
    "new_bench_name",
    "open_bench",
    "open_data",
]

DataFormat = Literal["qa", "gsm8k", "choice", "math"]
FORMATS: tuple[DataFormat, ...] = ("qa", "gsm8k", "choice", "math")


@dataclass(frozen=True)
class Bench:
    """One named benchmark: what it runs, what it scores, and what it needs beyond the install."""

    name: str
    about: str
    metrics: tuple[str, ...]
    needs: str = ""
    file: Path | None = None
    """The bundled task file, when the bench is one (``genmem run`` reads it as queries)."""


def _registry() -> dict[str, Bench]:
    from genmem.envs.bundled import GSM8K_TRAIN
    from genmem.envs.gsm8k import GSM8K_TEST
    from genmem.envs.qa import HOTPOTQA_DEV_200, NQ_TEST_200, TWOWIKI_DEV_200

    qa_search = "for search, a corpus (--corpus) or a server (--search-url); closed-book without"
    benches = [
        Bench("gsm8k-train", "GSM8K training problems, a calculator for the solver",
              ("accuracy",), file=GSM8K_TRAIN),
        Bench("gsm8k-test", "GSM8K test problems, a calculator for the solver",
              ("accuracy",), file=GSM8K_TEST),
        Bench("hotpotqa-distractor", "the HotpotQA dev questions of the bundled distractor "
              "file, BM25 search over their paragraphs", ("f1", "em")),
        Bench("hotpotqa", "HotpotQA dev questions", ("f1", "em"), qa_search, HOTPOTQA_DEV_200),
        Bench("2wiki", "2WikiMultihopQA dev questions", ("f1", "em"), qa_search, TWOWIKI_DEV_200),
        Bench("nq", "NQ-open test questions", ("f1", "em"), qa_search, NQ_TEST_200),
        Bench("textworld-train", "seeded TextWorld household games (pick and place), seeds far "
              "from the test set's", ("success",), "the textworld extra"),
        Bench("textworld-test", "seeded TextWorld household games (pick and place)",
              ("success",), "the textworld extra"),
        Bench("alfworld", "ALFWorld household games", ("success", "success per task type"),
              "the alfworld package and its data (--alfworld-data or $ALFWORLD_DATA)"),
        Bench("webshop", "WebShop shopping goals", ("score", "success"),
              "a running WebShop server (--webshop-url or $WEBSHOP_URL)"),
    ]  # fmt: skip
    return {b.name: b for b in benches}


BENCHES: dict[str, Bench] = _registry()
"""Every bench name, in the order ``genmem benches`` lists them."""

LEGACY_SPLITS = {"gsm8k": ("train", "test"), "textworld": ("train", "test")}
"""Datasets that were named ``--dataset NAME --split S``: now ``--bench NAME-S``."""


def bench_tasks(name: str, options: BenchOptions | None = None) -> int | None:
    """How many tasks a bench has (None where the server or external data decides)."""
    options = options or BenchOptions()
    bench = BENCHES[name]
    if name == "hotpotqa-distractor":
        from genmem.envs.qa import HOTPOTQA_DEV_200

        return len(_distractor_ids(HOTPOTQA_DEV_200))
    if name.startswith("textworld"):
        return options.games
    if bench.file is None:
        return None
    with bench.file.open("rb") as fh:
        return sum(1 for line in fh if line.strip())


def new_bench_name(dataset: str, split: str) -> str:
    """The bench an old ``--dataset NAME --split S`` meant (``gsm8k``, ``train``: gsm8k-train)."""
    if dataset in LEGACY_SPLITS and split in LEGACY_SPLITS[dataset]:
        return f"{dataset}-{split}"
    return dataset


TEXTWORLD_TRAIN_SEED = 10_000
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
    if name in ("gsm8k-train", "gsm8k-test"):
        from genmem.envs.gsm8k import GSM8KEnvironment

        return GSM8KEnvironment(BENCHES[name].file, name=name)
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
    if name in ("textworld-train", "textworld-test"):
        from genmem.envs.textworld_env import TextWorldConfig, TextWorldEnvironment

        seed = options.seed + (TEXTWORLD_TRAIN_SEED if name == "textworld-train" else 0)
        return TextWorldEnvironment(TextWorldConfig(n_games=options.games, seed=seed))
    if name == "alfworld":
        from genmem.envs.alfworld_env import ALFWorldConfig, ALFWorldEnvironment

        return ALFWorldEnvironment(ALFWorldConfig(data_dir=options.alfworld_data))
    if name == "webshop":
        from genmem.envs.webshop import WebShopEnvironment

        return WebShopEnvironment(options.webshop_url)
    raise ValueError(f"unknown bench {name!r}; choose from {', '.join(BENCHES)}")


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
