"""Search for research agents: a local BM25 index, a Search-R1 retrieval client, and the tool.

Two backends answer the same call, ``search(query, k) -> list[Passage]``:

- :class:`BM25Index`, an in-process BM25 index (``bm25s``, numpy only) over a corpus JSONL of
  ``{"id", "title", "text"}``, saved to and loaded from a directory;
- :class:`SearchR1Client`, a client of a Search-R1-style retrieval server
  (``POST {url}/retrieve``), for the Wikipedia-scale corpora those servers hold.

:func:`create_search_tool` wraps either one as the ``search`` tool a research sub-agent calls.
:func:`distractor_corpus` pools the paragraphs of the bundled HotpotQA distractor questions into a
~1,000-paragraph corpus, small enough to index in a test.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import httpx
from langchain_core.tools import BaseTool, StructuredTool
from pydantic import BaseModel, Field

from genmem.envs.bundled import DATA_DIR, read_jsonl
from genmem.errors import GenMemError

if TYPE_CHECKING:
    import bm25s

__all__ = [
    "DEFAULT_SEARCH_K",
    "HOTPOTQA_DISTRACTOR",
    "BM25Index",
    "BM25Metadata",
    "Passage",
    "SearchInput",
    "SearchR1Client",
    "SearchUnavailable",
    "Searcher",
    "create_search_tool",
    "distractor_corpus",
    "format_passages",
    "read_corpus_jsonl",
    "write_corpus_jsonl",
]

HOTPOTQA_DISTRACTOR = DATA_DIR / "hotpotqa" / "distractor_100.json"
"""The first 100 HotpotQA dev questions with their 10 paragraphs each (CC BY-SA 4.0)."""

DEFAULT_SEARCH_K = 3
_INDEX_FORMAT = 1
_STOPWORDS = "en"


class Passage(BaseModel):
    """One retrieved passage."""

    id: str = Field(description="Document id, unique within its corpus.")
    title: str = Field(default="", description="Title of the page the passage comes from.")
    text: str = Field(description="The passage text (without the title).")
    score: float = Field(default=0.0, description="Retrieval score; higher is better.")


@runtime_checkable
class Searcher(Protocol):
    """Anything that answers a text query with its ``k`` best passages, best first."""

    def search(self, query: str, k: int) -> list[Passage]: ...


class SearchUnavailable(GenMemError, RuntimeError):
    """The retrieval server cannot be reached, fails, or answers in an unknown shape."""

    def __init__(self, message: str, *, url: str) -> None:
        super().__init__(message)
        self.url = url


# -- corpus files -------------------------------------------------------------------------------


def _split_contents(contents: str) -> tuple[str, str]:
    # Search-R1 / FlashRAG corpora store '"Title"\ntext' in one field.
    head, sep, rest = contents.partition("\n")
    if not sep:
        return "", contents.strip()
    return head.strip().strip('"').strip(), rest.strip()


def _passage_from_record(record: Mapping[str, Any]) -> Passage:
    """A passage from ``{"id", "title", "text"}`` (or Search-R1's ``{"id", "contents"}``)."""
    if "id" not in record:
        raise ValueError(f"a corpus record needs an 'id'; got keys {sorted(record)}")
    if "text" in record:
        title, text = record.get("title") or "", record["text"]
    elif "contents" in record:
        title, text = _split_contents(str(record["contents"]))
    else:
        raise ValueError(f"a corpus record needs 'text' (or 'contents'); got keys {sorted(record)}")
    if not isinstance(text, str) or not isinstance(title, str):
        raise ValueError(f"'title' and 'text' must be strings in record {record['id']!r}")
    return Passage(id=str(record["id"]), title=title, text=text)


def read_corpus_jsonl(path: str | Path) -> list[Passage]:
    """Passages of a corpus JSONL, one ``{"id", "title", "text"}`` a line (blank lines skipped).

    Raises:
        ValueError: a line that is not such a record, named as ``path:line``.
    """
    passages = []
    for lineno, record in read_jsonl(path):
        try:
            passages.append(_passage_from_record(record))
        except ValueError as exc:
            raise ValueError(
                f"{path}:{lineno}: not a corpus record ({exc}); each line must be "
                '{"id": ..., "title": ..., "text": ...}'
            ) from exc
    return passages


def write_corpus_jsonl(records: Iterable[Mapping[str, Any] | Passage], path: str | Path) -> Path:
    """Write records as a corpus JSONL of ``{"id", "title", "text"}``; returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as fh:
        for record in records:
            p = record if isinstance(record, Passage) else _passage_from_record(record)
            row = {"id": p.id, "title": p.title, "text": p.text}
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")
    return path


def distractor_corpus(path: str | Path = HOTPOTQA_DISTRACTOR) -> list[dict[str, str]]:
    """The paragraphs of HotpotQA distractor questions, pooled and deduplicated by title.

    Each paragraph becomes ``{"id", "title", "text"}`` with ``id`` a stable hash of the title
    (titles are unique Wikipedia page names, so the id does not depend on question order). The
    bundled 100 questions give 991 paragraphs. Accepts the official list-of-pairs context
    format as well as the ``{"title": [...], "sentences": [[...]]}`` one.
    """
    questions = json.loads(Path(path).read_text(encoding="utf-8"))
    seen: dict[str, str] = {}
    for q in questions:
        ctx = q["context"]
        pairs = zip(ctx["title"], ctx["sentences"], strict=True) if isinstance(ctx, dict) else ctx
        for title, sentences in pairs:
            # HotpotQA sentences carry their own leading spaces: join them as they are.
            seen.setdefault(title, "".join(sentences).strip())
    return [
        {"id": hashlib.sha1(title.encode()).hexdigest()[:12], "title": title, "text": text}
        for title, text in seen.items()
    ]


# -- local BM25 ---------------------------------------------------------------------------------


class BM25Metadata(BaseModel):
    """What ``metadata.json`` records beside a saved index, checked on load."""

    format: int = _INDEX_FORMAT
    bm25s_version: str
    num_docs: int
    k1: float
    b: float
    stopwords: str = _STOPWORDS
    corpus_sha256: str | None = Field(
        default=None, description="Hash of the corpus file the index was built from, if any."
    )


def _require_bm25s() -> Any:
    try:
        import bm25s
    except ImportError as exc:  # pragma: no cover - bm25s is a declared dependency
        raise ImportError("BM25Index needs the 'bm25s' package: pip install bm25s==0.3.16") from exc
    bm25s_logger = logging.getLogger("bm25s")
    if bm25s_logger.level == logging.DEBUG:
        # bm25s pins its logger to DEBUG on import, which bypasses the application's log level
        # and prints a line per index build; let it inherit the level like any library logger.
        bm25s_logger.setLevel(logging.NOTSET)
    return bm25s


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


class BM25Index:
    """An in-process BM25 index over passages (title and text both indexed).

    Build it with :meth:`from_records` or :meth:`from_jsonl`, keep it with :meth:`save` and
    :meth:`load`. Tokens are lower-cased words with English stop words removed, no stemming
    (nothing is downloaded).
    """

    _PASSAGES = "passages.jsonl"
    _METADATA = "metadata.json"

    def __init__(
        self, passages: Sequence[Passage], retriever: bm25s.BM25, metadata: BM25Metadata
    ) -> None:
        """Wrap a built ``bm25s`` retriever; use the ``from_*`` constructors or :meth:`load`."""
        if len(passages) != metadata.num_docs:
            raise ValueError(
                f"{len(passages)} passages for an index of {metadata.num_docs} documents; "
                "rebuild the index from its corpus"
            )
        self.passages = list(passages)
        self.retriever = retriever
        self.metadata = metadata

    @classmethod
    def from_records(
        cls,
        records: Iterable[Mapping[str, Any] | Passage],
        *,
        k1: float = 1.5,
        b: float = 0.75,
    ) -> BM25Index:
        """Index ``{"id", "title", "text"}`` records (or :class:`Passage` objects).

        Raises:
            ValueError: no records, or two records with the same id.
        """
        bm25s = _require_bm25s()
        passages = [r if isinstance(r, Passage) else _passage_from_record(r) for r in records]
        if not passages:
            raise ValueError("cannot index an empty corpus; pass at least one record")
        ids: set[str] = set()
        for p in passages:
            if p.id in ids:
                raise ValueError(f"duplicate passage id {p.id!r}; ids must be unique")
            ids.add(p.id)
        texts = [f"{p.title}\n{p.text}" if p.title else p.text for p in passages]
        tokens = bm25s.tokenize(texts, stopwords=_STOPWORDS, show_progress=False)
        retriever = bm25s.BM25(k1=k1, b=b)
        retriever.index(tokens, show_progress=False)
        metadata = BM25Metadata(
            bm25s_version=bm25s.__version__,
            num_docs=len(passages),
            k1=k1,
            b=b,
        )
        return cls(passages, retriever, metadata)

    @classmethod
    def from_jsonl(
        cls,
        path: str | Path,
        *,
        cache_dir: str | Path | None = None,
        k1: float = 1.5,
        b: float = 0.75,
    ) -> BM25Index:
        """Index a corpus JSONL; with ``cache_dir``, reuse the index saved there for this file.

        The cached index is used when it was built from a file with the same content hash and
        the same parameters; otherwise the index is rebuilt and saved to ``cache_dir``.
        """
        path = Path(path)
        digest = _sha256(path)
        if cache_dir is not None:
            meta_path = Path(cache_dir) / cls._METADATA
            if meta_path.exists():
                m = BM25Metadata.model_validate_json(meta_path.read_text())
                if (m.format, m.corpus_sha256, m.k1, m.b) == (_INDEX_FORMAT, digest, k1, b):
                    return cls.load(cache_dir)
        index = cls.from_records(read_corpus_jsonl(path), k1=k1, b=b)
        index.metadata = index.metadata.model_copy(update={"corpus_sha256": digest})
        if cache_dir is not None:
            index.save(cache_dir)
        return index

    def __len__(self) -> int:
        return len(self.passages)

    def search(self, query: str, k: int = DEFAULT_SEARCH_K) -> list[Passage]:
        """The ``k`` passages that best match ``query``, best first (none when no word matches)."""
        if k < 1:
            raise ValueError(f"k must be >= 1, got {k}")
        bm25s = _require_bm25s()
        tokenized = bm25s.tokenize(
            query, stopwords=_STOPWORDS, return_ids=False, show_progress=False
        )
        token_ids = self.retriever.get_tokens_ids(tokenized[0])
        if not token_ids:
            return []
        scores = self.retriever.get_scores_from_ids(token_ids)
        top = (-scores).argsort(kind="stable")[:k]  # ties keep corpus order
        return [
            self.passages[i].model_copy(update={"score": float(scores[i])})
            for i in top
            if scores[i] > 0
        ]

    def save(self, directory: str | Path) -> Path:
        """Save the index (arrays, vocabulary, passages, ``metadata.json``) to ``directory``."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        # metadata.json is written last and marks a complete save: drop a stale one first
        (directory / self._METADATA).unlink(missing_ok=True)
        self.retriever.save(directory, show_progress=False)
        write_corpus_jsonl(self.passages, directory / self._PASSAGES)
        (directory / self._METADATA).write_text(self.metadata.model_dump_json(indent=2) + "\n")
        return directory

    @classmethod
    def load(cls, directory: str | Path) -> BM25Index:
        """Load an index saved by :meth:`save`.

        Raises:
            FileNotFoundError: ``directory`` holds no saved index.
            ValueError: the index was saved in a format this version cannot read.
        """
        bm25s = _require_bm25s()
        directory = Path(directory)
        meta_path = directory / cls._METADATA
        if not meta_path.exists():
            raise FileNotFoundError(
                f"no saved BM25 index in {directory} (missing {cls._METADATA}); build one with "
                "BM25Index.from_jsonl(...).save(directory)"
            )
        metadata = BM25Metadata.model_validate_json(meta_path.read_text())
        if metadata.format != _INDEX_FORMAT:
            raise ValueError(
                f"index in {directory} has format {metadata.format}, this version reads "
                f"{_INDEX_FORMAT}; rebuild it from its corpus"
            )
        retriever = bm25s.BM25.load(directory, show_progress=False)
        passages = read_corpus_jsonl(directory / cls._PASSAGES)
        return cls(passages, retriever, metadata)


# -- Search-R1 retrieval server -----------------------------------------------------------------


class SearchR1Client:
    """Client of a Search-R1-style retrieval server (``POST {url}/retrieve``).

    The server takes ``{"queries": [...], "topk": k, "return_scores": true}`` and answers
    ``{"result": [[{"document": {"id", "contents"}, "score"}, ...]]}``, one list per query, with
    ``contents`` written ``'"Title"\\ntext'``.

    Args:
        url: Server base URL, e.g. ``http://127.0.0.1:8000`` (a URL already ending in
            ``/retrieve`` is used as it is).
        topk: Passages per query when :meth:`search` is given no ``k``.
        timeout: Seconds to wait for the server (connect and read).
        client: An ``httpx.Client`` to send requests with (its owner closes it).
    """

    def __init__(
        self,
        url: str,
        topk: int = DEFAULT_SEARCH_K,
        *,
        timeout: float = 10.0,
        client: httpx.Client | None = None,
    ) -> None:
        if topk < 1:
            raise ValueError(f"topk must be >= 1, got {topk}")
        base = url.rstrip("/")
        self.url = base if base.endswith("/retrieve") else f"{base}/retrieve"
        self.topk = topk
        self._owns_client = client is None
        self._client = client if client is not None else httpx.Client(timeout=timeout)
        self._timeout = timeout

    def __enter__(self) -> SearchR1Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the HTTP client if this object created it."""
        if self._owns_client:
            self._client.close()

    def search(self, query: str, k: int | None = None) -> list[Passage]:
        """The server's ``k`` (default ``topk``) best passages for ``query``, best first.

        Raises:
            SearchUnavailable: the server cannot be reached, times out, returns an HTTP error,
                or answers in a shape other than the one above.
        """
        k = self.topk if k is None else k
        if k < 1:
            raise ValueError(f"k must be >= 1, got {k}")
        payload = {"queries": [query], "topk": k, "return_scores": True}
        try:
            response = self._client.post(self.url, json=payload, timeout=self._timeout)
            response.raise_for_status()
            body = response.json()
        except httpx.TimeoutException as exc:
            raise SearchUnavailable(
                f"retrieval server at {self.url} did not answer within {self._timeout}s; "
                "check that it is running and not overloaded, or raise timeout",
                url=self.url,
            ) from exc
        except httpx.HTTPStatusError as exc:
            raise SearchUnavailable(
                f"retrieval server at {self.url} answered HTTP {exc.response.status_code}; "
                "check the server log",
                url=self.url,
            ) from exc
        except httpx.HTTPError as exc:
            raise SearchUnavailable(
                f"cannot reach the retrieval server at {self.url} ({type(exc).__name__}: {exc}); "
                "start it (Search-R1: search_r1/search/retrieval_server.py) or pass its url",
                url=self.url,
            ) from exc
        except ValueError as exc:
            raise SearchUnavailable(
                f"retrieval server at {self.url} answered with a body that is not JSON",
                url=self.url,
            ) from exc
        return self._parse(body)

    def _parse(self, body: Any) -> list[Passage]:
        try:
            hits = body["result"][0]
            passages = []
            for hit in hits:
                # with return_scores the server wraps each document; without, it sends it bare
                doc = hit["document"] if "document" in hit else hit
                passage = _passage_from_record(doc)
                passages.append(passage.model_copy(update={"score": float(hit.get("score", 0))}))
        except (KeyError, IndexError, TypeError, ValueError) as exc:
            raise SearchUnavailable(
                f"retrieval server at {self.url} answered in an unexpected shape "
                f"({type(exc).__name__}: {exc}); expected "
                '{"result": [[{"document": {"id", "contents"}, "score"}, ...]]}',
                url=self.url,
            ) from exc
        return passages


# -- the tool -----------------------------------------------------------------------------------


class SearchInput(BaseModel):
    """What the model passes to ``search``."""

    query: str = Field(
        description="A short keyword query, e.g. an entity name plus the fact you need."
    )


def _truncate(text: str, max_chars: int) -> str:
    text = " ".join(text.split())
    if len(text) <= max_chars:
        return text
    cut = text[:max_chars]
    space = cut.rfind(" ")
    # cut on a word boundary unless that would lose most of the budget
    if space > max_chars // 2:
        cut = cut[:space]
    return cut.rstrip(" ,;:") + " ..."


def format_passages(query: str, passages: Sequence[Passage], max_chars: int = 600) -> str:
    """Render passages for a model: numbered, title on its own line, text cut to ``max_chars``."""
    lines = [f"search results for {query!r} ({len(passages)} passages):"]
    for i, p in enumerate(passages, 1):
        lines.append(f"[{i}] {p.title}" if p.title else f"[{i}]")
        lines.append(_truncate(p.text, max_chars))
    return "\n".join(lines)


def create_search_tool(
    searcher: Searcher,
    k: int = DEFAULT_SEARCH_K,
    *,
    max_chars: int = 600,
    name: str = "search",
) -> BaseTool:
    """Build the ``search`` tool over a :class:`BM25Index`, a :class:`SearchR1Client`, or any
    :class:`Searcher`.

    The model sees one argument, ``query``. An empty query, no match, or an unreachable server
    come back as the tool's result, worded as what to retry; the tool never raises for them.
    The passages also come back as the tool message's artifact (a list of dicts).

    Args:
        searcher: What answers the queries.
        k: Passages returned per query.
        max_chars: Most characters of each passage's text shown to the model.
        name: Tool name the model sees.
    """
    if k < 1 or max_chars < 1:
        raise ValueError(f"k and max_chars must be >= 1, got k={k}, max_chars={max_chars}")
    if not isinstance(searcher, Searcher):
        raise TypeError(
            f"searcher must have a search(query, k) method (BM25Index, SearchR1Client); "
            f"got {type(searcher).__name__}"
        )

    def search(query: str) -> tuple[str, list[dict[str, Any]]]:
        query = query.strip()
        if not query:
            return (
                "Error: the query is empty. Retry search with a few keywords, e.g. an entity "
                "name plus the fact you need.",
                [],
            )
        try:
            passages = searcher.search(query, k)
        except SearchUnavailable as exc:
            return (
                f"Error: search is unavailable right now ({exc}). Retry once; if it fails "
                "again, answer from what you already know.",
                [],
            )
        if not passages:
            return (
                f"No passages match {query!r}. Retry with other keywords: names, titles, "
                "dates or distinctive words.",
                [],
            )
        return format_passages(query, passages, max_chars), [p.model_dump() for p in passages]

    return StructuredTool.from_function(
        func=search,
        name=name,
        description=(
            f"Search the document collection. Give a short keyword query; get the {k} "
            "best-matching passages (title and text). Search again with new keywords for "
            "each fact a multi-step question needs."
        ),
        args_schema=SearchInput,
        response_format="content_and_artifact",
    )
