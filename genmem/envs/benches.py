"""The environment registry: every bench name, how it opens, the options it reads and how its
training data seeds a bank; and task files, read by their format.

An environment is registered once, with one :class:`EnvSpec` passed to :func:`register`: its bench
names (:class:`Bench`), how a bench opens, the options it reads (its own :class:`EnvOptions`
model), how many tasks a bench has, and, when its training data can seed a bank, how
(:class:`Seeding`). The rest derives from the registry: :data:`BENCHES` and ``genmem benches``,
:class:`BenchOptions`, the ``--bench`` choices and the option flags of every command that takes
tasks, and the ``--source`` choices of ``genmem bank seed``. The built-in environments are
registered at the end of this module.

A task file is read by the environment its format names (``qa``, ``gsm8k``, ``choice``,
``math``), which :func:`detect_format` reads off the first record when not given.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic.fields import FieldInfo

from genmem.envs.base import Environment
from genmem.envs.bundled import GSM8K_TRAIN, read_gsm8k
from genmem.envs.cooking import cooking_seed_rows
from genmem.envs.cooking_experience import WRITER, cooking_experience
from genmem.envs.game_experience import textworld_experience, textworld_seed_rows
from genmem.envs.gsm8k import GSM8K_TEST
from genmem.envs.qa import HOTPOTQA_DEV_200, NQ_TEST_200, TWOWIKI_DEV_200
from genmem.envs.qa_experience import qa_seed_experience, qa_seed_rows
from genmem.envs.search import DEFAULT_SEARCH_K, HOTPOTQA_DISTRACTOR, Searcher

__all__ = [
    "BENCHES",
    "ENVIRONMENTS",
    "FORMATS",
    "Bench",
    "BenchOptions",
    "DataFormat",
    "EnvOptions",
    "EnvSpec",
    "Seeding",
    "bench_tasks",
    "detect_format",
    "open_bench",
    "open_data",
    "option_fields",
    "register",
    "seed_sources",
    "seeding",
    "unregister",
]

DataFormat = Literal["qa", "gsm8k", "choice", "math"]
FORMATS: tuple[DataFormat, ...] = ("qa", "gsm8k", "choice", "math")

OptionsT = TypeVar("OptionsT", bound="EnvOptions")


class EnvOptions(BaseModel):
    """The settings one environment reads beyond its tasks (this base: none).

    Each field becomes an option of :class:`BenchOptions` and a flag of every command that takes
    tasks (``search_k``: ``--search-k``), its description the help and its default the flag's,
    so every field needs a default. Two environments may share an option by declaring the same
    field with the same default.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)


@dataclass(frozen=True, kw_only=True)
class Bench:
    """One named benchmark: what it runs, what it scores, and what it needs beyond the install."""

    name: str
    about: str
    metrics: tuple[str, ...]
    needs: str = ""
    file: Path | None = None
    """The bundled task file, when the bench is one (``genmem run`` reads it as queries)."""


@dataclass(frozen=True, kw_only=True)
class Seeding:
    """How an environment's training data becomes seed experiences (``bank seed --source``)."""

    about: str
    """What the rows are, for ``--source``'s help."""
    rows: Callable[[int], list[dict[str, Any]]]
    """The first ``n`` rows as ``{"question", "answer"}`` (and ``"id"`` where they have one)."""
    heldout: str
    """The bench a bank of these rows is scored on by default: none of its tasks is a row."""
    write: Callable[[str, Any], str] | None = None
    """The environment's own writer, ``(question, answer) -> experience``: its banks are then
    abstract experiences only (``--distill abstract``). None: each answer is a worked solution
    ending ``#### N``, and every ``--distill`` mode applies."""
    size: Callable[[], int] | None = None
    """How many rows there are (None: as many as asked, as for generated games)."""
    unit: str = "rows"
    """What a row is, in messages: ``problems``, ``questions``, ``games``."""
    writer: str = "code"
    """Who :attr:`write` is, recorded as each entry's ``writer`` (``template``: the cooking
    distiller, :mod:`genmem.envs.cooking_experience`); a model-written bank says ``model``."""


@dataclass(frozen=True, kw_only=True)
class EnvSpec:
    """What the registry knows of one environment: the one place a new environment is added."""

    name: str
    """The environment's name; also its ``--source`` name when it can seed a bank."""
    benches: tuple[Bench, ...]
    open: Callable[[str, Any], Environment]
    """``(bench name, its options) -> Environment``, the options an instance of :attr:`options`."""
    options: type[EnvOptions] = EnvOptions
    count: Callable[[str, Any], int | None] | None = None
    """How many tasks a bench has, given its options (None: the lines of its file, when it has
    one; else unknown, as when a server or external data decides)."""
    seed: Seeding | None = None


ENVIRONMENTS: dict[str, EnvSpec] = {}
"""Every registered environment by name, in the order of registration."""

BENCHES: dict[str, Bench] = {}
"""Every bench name, in the order ``genmem benches`` lists them."""

_OWNER: dict[str, EnvSpec] = {}
"""The environment of each bench name."""


def register(spec: EnvSpec) -> EnvSpec:
    """Add an environment and its benches to the registry; returns ``spec``.

    Raises:
        ValueError: a name already taken (environment or bench), an option without a default or
            declared differently by another environment, or a seed source held out on a bench
            that is not registered.
    """
    if spec.name in ENVIRONMENTS:
        raise ValueError(f"environment {spec.name!r} is already registered; unregister it first")
    if not spec.benches:
        raise ValueError(f"environment {spec.name!r} names no bench")
    names = [b.name for b in spec.benches]
    for bench in names:
        if bench in _OWNER:
            raise ValueError(f"bench {bench!r} is already a bench of {_OWNER[bench].name!r}")
        if names.count(bench) > 1:
            raise ValueError(f"environment {spec.name!r} names bench {bench!r} twice")
    for name, field in spec.options.model_fields.items():
        if field.is_required():
            raise ValueError(
                f"option {name!r} of {spec.name!r} has no default; a bench must open without it"
            )
        for other in ENVIRONMENTS.values():
            known = other.options.model_fields.get(name)
            if known is not None and (known.annotation, known.default) != (
                field.annotation,
                field.default,
            ):
                raise ValueError(
                    f"option {name!r} of {spec.name!r} differs from {other.name!r}'s (type or "
                    "default); rename it or declare it the same way"
                )
    if spec.seed is not None:
        if spec.seed.heldout not in {*names, *BENCHES}:
            raise ValueError(
                f"{spec.name!r} holds its seed rows out of bench {spec.seed.heldout!r}, which is "
                "not registered"
            )
    ENVIRONMENTS[spec.name] = spec
    for bench in spec.benches:
        BENCHES[bench.name] = bench
        _OWNER[bench.name] = spec
    return spec


def unregister(name: str) -> None:
    """Remove an environment and its benches from the registry (KeyError: not registered)."""
    spec = ENVIRONMENTS.pop(name)
    for bench in spec.benches:
        del BENCHES[bench.name]
        del _OWNER[bench.name]


def _spec(bench: str) -> EnvSpec:
    """The environment of a bench name (ValueError naming every bench when unknown)."""
    if bench not in _OWNER:
        raise ValueError(f"unknown bench {bench!r}; choose from {', '.join(BENCHES)}")
    return _OWNER[bench]


def option_fields() -> dict[str, FieldInfo]:
    """Every option of the registered environments, by name, in the order of registration."""
    fields: dict[str, FieldInfo] = {}
    for spec in ENVIRONMENTS.values():
        for name, field in spec.options.model_fields.items():
            fields.setdefault(name, field)
    return fields


class BenchOptions:
    """What environments need beyond their tasks: every registered environment's options.

    Keyword arguments are option names (:func:`option_fields`); each environment's own model
    checks the ones it declares and fills in its defaults, so a bad value raises here (a
    pydantic ``ValidationError``, which is a ``ValueError``), as does a name no environment
    declares. An option reads as an attribute (``options.games``); :meth:`of` gives one
    environment's options as its own model.
    """

    __slots__ = ("_given", "_parts")

    def __init__(self, **given: Any) -> None:
        known = option_fields()
        unknown = [name for name in given if name not in known]
        if unknown:
            raise ValueError(
                f"unknown bench option {unknown[0]!r}; the registered environments take "
                f"{', '.join(known)}"
            )
        self._given = given
        self._parts: dict[type[EnvOptions], EnvOptions] = {}
        for spec in ENVIRONMENTS.values():
            self.of(spec.options)

    def of(self, model: type[OptionsT]) -> OptionsT:
        """These options as ``model``, one environment's own options."""
        part = self._parts.get(model)
        if part is None:
            fields = model.model_fields
            part = model.model_validate({k: v for k, v in self._given.items() if k in fields})
            self._parts[model] = part
        return part  # type: ignore[return-value]

    def __getattr__(self, name: str) -> Any:
        if not name.startswith("_"):
            for spec in ENVIRONMENTS.values():
                if name in spec.options.model_fields:
                    return getattr(self.of(spec.options), name)
        raise AttributeError(f"no bench option {name!r}")

    def __repr__(self) -> str:
        values = ", ".join(f"{k}={getattr(self, k)!r}" for k in option_fields())
        return f"BenchOptions({values})"


def open_bench(name: str, options: BenchOptions | None = None) -> Environment:
    """The environment of a bench name (see :data:`BENCHES`).

    Raises:
        ValueError: an unknown name (the message lists the known ones).
        ALFWorldUnavailable, WebShopUnavailable, ModuleNotFoundError: what a bench needs is
            missing (the message says how to get it).
    """
    spec = _spec(name)
    return spec.open(name, (options or BenchOptions()).of(spec.options))


def bench_tasks(name: str, options: BenchOptions | None = None) -> int | None:
    """How many tasks a bench has (None where the server or external data decides)."""
    spec = _spec(name)
    if spec.count is not None:
        return spec.count(name, (options or BenchOptions()).of(spec.options))
    return _lines(BENCHES[name].file)


def _lines(path: Path | None) -> int | None:
    """The non-blank lines of a task file (None: no file)."""
    if path is None:
        return None
    with path.open("rb") as fh:
        return sum(1 for line in fh if line.strip())


def seed_sources() -> dict[str, Seeding]:
    """The environments whose training data can seed a bank, by ``--source`` name."""
    return {name: spec.seed for name, spec in ENVIRONMENTS.items() if spec.seed is not None}


def seeding(source: str) -> Seeding:
    """How the seed source ``source`` is read and written (ValueError naming the sources)."""
    sources = seed_sources()
    if source not in sources:
        raise ValueError(f"unknown seed source {source!r}; choose from {', '.join(sources)}")
    return sources[source]


# --- The built-in environments, one registration each -------------------------------------


def _open_gsm8k(bench: str, options: EnvOptions) -> Environment:
    from genmem.envs.gsm8k import GSM8KEnvironment

    return GSM8KEnvironment(BENCHES[bench].file, name=bench)  # type: ignore[arg-type]


register(
    EnvSpec(
        name="gsm8k",
        benches=(
            Bench(
                name="gsm8k-train",
                about="GSM8K training problems, a calculator for the solver",
                metrics=("accuracy",),
                file=GSM8K_TRAIN,
            ),
            Bench(
                name="gsm8k-test",
                about="GSM8K test problems, a calculator for the solver",
                metrics=("accuracy",),
                file=GSM8K_TEST,
            ),
        ),
        open=_open_gsm8k,
        seed=Seeding(
            about="GSM8K training problems with their worked solutions",
            rows=lambda n: read_gsm8k(GSM8K_TRAIN, limit=n),
            heldout="gsm8k-test",
            unit="problems",
        ),
    )
)


class QASearchOptions(EnvOptions):
    """Where the QA search tool looks (neither: closed-book, except ``hotpotqa-distractor``)."""

    corpus: Path | None = Field(
        default=None, description='QA search: corpus JSONL of {"id", "title", "text"} (BM25)'
    )
    search_url: str | None = Field(
        default=None, description="QA search: a Search-R1 retrieval server instead"
    )
    search_k: int = Field(
        default=DEFAULT_SEARCH_K,
        ge=1,
        le=20,
        description="passages per search",
    )

    @model_validator(mode="after")
    def _one_source(self) -> QASearchOptions:
        if self.corpus is not None and self.search_url is not None:
            raise ValueError("give --corpus or --search-url, not both")
        return self


def _searcher(
    options: QASearchOptions, default_corpus: list[dict[str, str]] | None = None
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


def _key(options: QASearchOptions) -> str:
    import hashlib

    return hashlib.sha256(str(Path(options.corpus or "").resolve()).encode()).hexdigest()[:16]


def _distractor_ids(path: Path) -> list[str]:
    """Ids, in the QA file ``path``, of the questions of the bundled distractor file."""
    from genmem.envs.qa import read_qa_jsonl

    texts = {r["question"] for r in json.loads(HOTPOTQA_DISTRACTOR.read_text(encoding="utf-8"))}
    return [r.id for r in read_qa_jsonl(path) if r.question in texts]


def _open_qa(bench: str, options: QASearchOptions) -> Environment:
    from genmem.envs.qa import QAEnvironment
    from genmem.envs.search import distractor_corpus

    if bench == "hotpotqa-distractor":
        return QAEnvironment(
            HOTPOTQA_DEV_200,
            searcher=_searcher(options, distractor_corpus()),
            k=options.search_k,
            name=bench,
            ids=_distractor_ids(HOTPOTQA_DEV_200),
        )
    path: Path = BENCHES[bench].file  # type: ignore[assignment]
    return QAEnvironment(path, searcher=_searcher(options), k=options.search_k, name=bench)


def _count_qa(bench: str, options: QASearchOptions) -> int | None:
    if bench == "hotpotqa-distractor":
        return len(_distractor_ids(HOTPOTQA_DEV_200))
    return _lines(BENCHES[bench].file)


_QA_SEARCH = "for search, a corpus (--corpus) or a server (--search-url); closed-book without"

register(
    EnvSpec(
        name="qa",
        benches=(
            Bench(
                name="hotpotqa-distractor",
                about="the HotpotQA dev questions of the bundled "
                "distractor file, BM25 search over their paragraphs",
                metrics=("f1", "em"),
            ),
            Bench(
                name="hotpotqa",
                about="HotpotQA dev questions",
                metrics=("f1", "em"),
                needs=_QA_SEARCH,
                file=HOTPOTQA_DEV_200,
            ),
            Bench(
                name="2wiki",
                about="2WikiMultihopQA dev questions",
                metrics=("f1", "em"),
                needs=_QA_SEARCH,
                file=TWOWIKI_DEV_200,
            ),
            Bench(
                name="nq",
                about="NQ-open test questions",
                metrics=("f1", "em"),
                needs=_QA_SEARCH,
                file=NQ_TEST_200,
            ),
        ),
        open=_open_qa,
        options=QASearchOptions,
        count=_count_qa,
        seed=Seeding(
            about="the 300 bundled HotpotQA and 2WikiMultihopQA dev questions outside "
            "hotpotqa-distractor",
            rows=lambda n: qa_seed_rows()[:n],
            heldout="hotpotqa-distractor",
            write=qa_seed_experience,
            size=lambda: len(qa_seed_rows()),
            unit="questions",
        ),
    )
)


TEXTWORLD_TRAIN_SEED = 10_000
"""TextWorld's train split: games seeded from here, far from the test set's seeds."""


class TextWorldOptions(EnvOptions):
    """The seeded set of TextWorld games."""

    games: int = Field(default=10, ge=1, description="TextWorld games")
    # The multiple-choice task files shuffle their options with this seed too.
    seed: int = Field(default=0, ge=0, description="TextWorld set / option shuffle seed")


def _open_textworld(bench: str, options: TextWorldOptions) -> Environment:
    from genmem.envs.textworld_env import TextWorldConfig, TextWorldEnvironment

    seed = options.seed + (TEXTWORLD_TRAIN_SEED if bench == "textworld-train" else 0)
    return TextWorldEnvironment(TextWorldConfig(n_games=options.games, seed=seed))


register(
    EnvSpec(
        name="textworld",
        benches=(
            Bench(
                name="textworld-train",
                about="seeded TextWorld household games (pick and "
                "place), seeds far from the test set's",
                metrics=("success",),
                needs="the textworld extra",
            ),
            Bench(
                name="textworld-test",
                about="seeded TextWorld household games (pick and place)",
                metrics=("success",),
                needs="the textworld extra",
            ),
        ),
        open=_open_textworld,
        options=TextWorldOptions,
        count=lambda bench, options: options.games,
        seed=Seeding(
            about="textworld-train games, each as the plan and commands that won it",
            rows=lambda n: textworld_seed_rows(n, seed=TEXTWORLD_TRAIN_SEED),
            heldout="textworld-test",
            write=textworld_experience,
            unit="games",
        ),
    )
)


class CookingOptions(EnvOptions):
    """The seeded set of cooking games and their difficulty (TextWorld's cooking settings)."""

    games: int = Field(default=10, ge=1, description="TextWorld games (10)")
    seed: int = Field(default=0, ge=0, description="TextWorld set / option shuffle seed (0)")
    cooking_recipe: int = Field(
        default=2, ge=1, le=5, description="cooking games: ingredients in the recipe, 1-5 (2)"
    )
    cooking_rooms: int = Field(
        default=1, description="cooking games: rooms in the house, 1, 6, 9 or 12 (1)"
    )
    cooking_open: bool = Field(
        default=True,
        description="cooking games: containers and doors start closed, true/false (true)",
    )
    cooking_cook: bool = Field(
        default=True,
        description="cooking games: ingredients need frying/roasting/grilling, true/false (true)",
    )
    cooking_cut: bool = Field(
        default=True,
        description="cooking games: ingredients need chopping/slicing/dicing, true/false (true)",
    )

    @field_validator("cooking_rooms")
    @classmethod
    def _rooms(cls, rooms: int) -> int:
        if rooms not in (1, 6, 9, 12):
            raise ValueError(
                f"--cooking-rooms {rooms}: TextWorld's cooking games have 1, 6, 9 "
                "or 12 rooms; use one of those"
            )
        return rooms


def _open_cooking(bench: str, options: CookingOptions) -> Environment:
    from genmem.envs.cooking import CookingConfig, CookingEnvironment

    config = CookingConfig(
        split=bench.removeprefix("cooking-"),  # type: ignore[arg-type]
        n_games=options.games,
        seed=options.seed,
        recipe=options.cooking_recipe,
        rooms=options.cooking_rooms,  # type: ignore[arg-type]
        open=options.cooking_open,
        cook=options.cooking_cook,
        cut=options.cooking_cut,
    )
    return CookingEnvironment(config)


_COOKING = "TextWorld cooking games (read the recipe, cook, eat)"

register(
    EnvSpec(
        name="cooking",
        benches=tuple(
            Bench(
                name=f"cooking-{split}",
                about=f"{_COOKING}, the {split} split of foods",
                metrics=("success", "lost"),
                needs="the textworld extra",
            )
            for split in ("train", "valid", "test")
        ),
        open=_open_cooking,
        options=CookingOptions,
        count=lambda bench, options: options.games,
        seed=Seeding(
            about="cooking-train games (default difficulty), each as the procedure the template "
            "distiller reads off its won walkthrough and the pitfalls of plays that lose it",
            rows=cooking_seed_rows,
            heldout="cooking-test",
            write=cooking_experience,
            unit="games",
            writer=WRITER,
        ),
    )
)


class ALFWorldOptions(EnvOptions):
    """Where ALFWorld's data is."""

    alfworld_data: Path | None = Field(
        default=None, description="ALFWorld data folder (default $ALFWORLD_DATA)"
    )


def _open_alfworld(bench: str, options: ALFWorldOptions) -> Environment:
    from genmem.envs.alfworld_env import ALFWorldConfig, ALFWorldEnvironment

    return ALFWorldEnvironment(ALFWorldConfig(data_dir=options.alfworld_data))


register(
    EnvSpec(
        name="alfworld",
        benches=(
            Bench(
                name="alfworld",
                about="ALFWorld household games",
                metrics=("success", "success per task type"),
                needs="the alfworld package and its data (--alfworld-data or $ALFWORLD_DATA)",
            ),
        ),
        open=_open_alfworld,
        options=ALFWorldOptions,
    )
)


class WebShopOptions(EnvOptions):
    """Which WebShop server."""

    webshop_url: str | None = Field(
        default=None, description="WebShop server (default $WEBSHOP_URL)"
    )


def _open_webshop(bench: str, options: WebShopOptions) -> Environment:
    from genmem.envs.webshop import WebShopEnvironment

    return WebShopEnvironment(options.webshop_url)


register(
    EnvSpec(
        name="webshop",
        benches=(
            Bench(
                name="webshop",
                about="WebShop shopping goals",
                metrics=("score", "success"),
                needs="a running WebShop server (--webshop-url or $WEBSHOP_URL)",
            ),
        ),
        open=_open_webshop,
        options=WebShopOptions,
    )
)


# --- Task files, by format ------------------------------------------------------------------


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

    A QA file searches as the QA benches do (:class:`QASearchOptions`); a multiple-choice file
    shuffles its options with the ``seed`` option.

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

        search = options.of(QASearchOptions)
        return QAEnvironment(path, searcher=_searcher(search), k=search.search_k)
    if fmt == "gsm8k":
        from genmem.envs.gsm8k import GSM8KEnvironment

        return GSM8KEnvironment(path)
    if fmt == "choice":
        from genmem.envs.choice import MultipleChoiceEnvironment

        return MultipleChoiceEnvironment(path, seed=options.of(TextWorldOptions).seed)
    if fmt == "math":
        from genmem.envs.choice import MathEnvironment

        return MathEnvironment(path)
    raise ValueError(f"unknown format {fmt!r}; choose from {', '.join(FORMATS)}")
