"""Search: the pooled HotpotQA corpus, the local BM25 index, the Search-R1 client and the tool."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import ToolMessage

from genmem.envs.search import (
    HOTPOTQA_DISTRACTOR,
    BM25Index,
    Passage,
    SearchR1Client,
    SearchUnavailable,
    create_search_tool,
    distractor_corpus,
    read_corpus_jsonl,
    write_corpus_jsonl,
)
from genmem.errors import GenMemError

# Measured with bm25s 0.3.16 (English stop words, no stemming, k1=1.5, b=0.75): 97/100 questions
# have a supporting paragraph in the top 5, and 146/200 supporting paragraphs are found.
HIT_FLOOR = 0.95
TITLE_FLOOR = 0.70


@pytest.fixture(scope="module")
def corpus() -> list[dict[str, str]]:
    return distractor_corpus()


@pytest.fixture(scope="module")
def index(corpus: list[dict[str, str]]) -> BM25Index:
    return BM25Index.from_records(corpus)


def _call(tool: Any, query: str) -> ToolMessage:
    return tool.invoke(
        {"type": "tool_call", "id": "c1", "name": "search", "args": {"query": query}}
    )


# --- corpus -------------------------------------------------------------------------------------


def test_distractor_corpus_pools_unique_titles(corpus: list[dict[str, str]]) -> None:
    assert len(corpus) == 991  # 1,000 paragraphs, 9 shared between questions
    assert len({r["title"] for r in corpus}) == len({r["id"] for r in corpus}) == len(corpus)
    assert all(r["text"] and not r["text"].startswith(" ") for r in corpus)
    derrickson = next(r for r in corpus if r["title"] == "Scott Derrickson")
    assert derrickson["text"].startswith("Scott Derrickson (born July 16, 1966) is an American")
    assert distractor_corpus()[0]["id"] == corpus[0]["id"]  # ids are stable


def test_corpus_jsonl_round_trip_and_bad_lines(tmp_path: Path) -> None:
    path = write_corpus_jsonl(
        [{"id": "a", "title": "A", "text": "alpha"}, Passage(id="b", text="beta")],
        tmp_path / "c.jsonl",
    )
    assert [p.id for p in read_corpus_jsonl(path)] == ["a", "b"]

    path.write_text('{"id": "a", "title": "A", "text": "alpha"}\n\n{"id": "b", "title": "B"}\n')
    with pytest.raises(ValueError, match=r"c\.jsonl:3: .*'text'"):
        read_corpus_jsonl(path)
    path.write_text("not json\n")
    with pytest.raises(ValueError, match=r"c\.jsonl:1: "):
        BM25Index.from_jsonl(path)


def test_search_r1_contents_records_are_split_into_title_and_text() -> None:
    index = BM25Index.from_records(
        [
            {"id": "1", "contents": '"Ada Lovelace"\nAda Lovelace wrote the first program.'},
            {"id": "2", "contents": '"Alan Turing"\nAlan Turing defined computability.'},
        ]
    )
    (hit,) = index.search("first program", 1)
    assert (hit.id, hit.title, hit.text) == (
        "1",
        "Ada Lovelace",
        "Ada Lovelace wrote the first program.",
    )


# --- BM25 ---------------------------------------------------------------------------------------


def test_bm25_recall_at_5_on_hotpotqa_supporting_paragraphs(index: BM25Index) -> None:
    questions = json.loads(HOTPOTQA_DISTRACTOR.read_text(encoding="utf-8"))
    hits = found = total = 0
    start = time.perf_counter()
    for q in questions:
        gold = set(q["supporting_facts"]["title"])
        top = {p.title for p in index.search(q["question"], 5)}
        hits += bool(gold & top)
        found += len(gold & top)
        total += len(gold)
    per_query_ms = (time.perf_counter() - start) / len(questions) * 1000
    hit_rate, title_recall = hits / len(questions), found / total
    print(
        f"\nBM25 recall@5 over {len(questions)} HotpotQA distractor questions "
        f"({len(index)} paragraphs): question hit {hit_rate:.2f}, supporting titles "
        f"{found}/{total} = {title_recall:.2f}, {per_query_ms:.2f} ms/query"
    )
    assert hit_rate >= HIT_FLOOR
    assert title_recall >= TITLE_FLOOR


def test_search_ranks_best_first_and_finds_nothing_for_unknown_words(index: BM25Index) -> None:
    results = index.search("Scott Derrickson director", 4)
    assert len(results) == 4
    assert results[0].title == "Scott Derrickson"
    assert [r.score for r in results] == sorted((r.score for r in results), reverse=True)
    assert index.search("the of and", 3) == []  # stop words only
    assert index.search("qwertyuiopzxcv", 3) == []
    assert len(index.search("film", 5000)) <= len(index)
    with pytest.raises(ValueError, match="k must be"):
        index.search("film", 0)


def test_bm25_rejects_empty_and_duplicate_corpora() -> None:
    with pytest.raises(ValueError, match="empty corpus"):
        BM25Index.from_records([])
    with pytest.raises(ValueError, match="duplicate passage id 'x'"):
        BM25Index.from_records([{"id": "x", "text": "a b"}, {"id": "x", "text": "c d"}])


def test_save_load_round_trip(index: BM25Index, tmp_path: Path) -> None:
    index.save(tmp_path / "idx")
    loaded = BM25Index.load(tmp_path / "idx")
    assert len(loaded) == len(index)
    query = "Kiss and Tell Corliss Archer actress"
    assert loaded.search(query, 5) == index.search(query, 5)
    with pytest.raises(FileNotFoundError, match="no saved BM25 index"):
        BM25Index.load(tmp_path / "nothing")


def test_from_jsonl_reuses_its_cache_until_the_file_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    records = [{"id": str(i), "title": f"T{i}", "text": f"word{i} shared"} for i in range(5)]
    path = write_corpus_jsonl(records, tmp_path / "c.jsonl")
    first = BM25Index.from_jsonl(path, cache_dir=tmp_path / "cache")
    assert first.metadata.corpus_sha256 is not None

    built: list[int] = []
    real = BM25Index.from_records.__func__  # type: ignore[attr-defined]

    def counting(cls: type[BM25Index], recs: Any, **kw: Any) -> BM25Index:
        built.append(1)
        return real(cls, recs, **kw)

    monkeypatch.setattr(BM25Index, "from_records", classmethod(counting))
    again = BM25Index.from_jsonl(path, cache_dir=tmp_path / "cache")
    assert built == [] and again.search("word3", 1)[0].id == "3"

    write_corpus_jsonl([*records, {"id": "9", "title": "T9", "text": "word9"}], path)
    changed = BM25Index.from_jsonl(path, cache_dir=tmp_path / "cache")
    assert built == [1] and len(changed) == 6
    assert len(BM25Index.load(tmp_path / "cache")) == 6


# --- the tool -----------------------------------------------------------------------------------


def test_tool_shows_only_query_and_returns_passages(index: BM25Index) -> None:
    tool = create_search_tool(index, k=2, max_chars=80)
    assert tool.name == "search"
    assert set(tool.tool_call_schema.model_json_schema()["properties"]) == {"query"}

    message = _call(tool, "Scott Derrickson")
    assert message.content.startswith("search results for 'Scott Derrickson' (2 passages):")
    assert "[1] Scott Derrickson\n" in message.content
    assert all(len(line) <= 84 for line in message.content.splitlines()[1:])  # cut + " ..."
    assert message.artifact[0]["title"] == "Scott Derrickson"


def test_tool_answers_bad_queries_with_what_to_retry(index: BM25Index) -> None:
    tool = create_search_tool(index)
    assert tool.invoke({"query": "   "}).startswith("Error: the query is empty. Retry")
    assert tool.invoke({"query": "the of"}).startswith("No passages match 'the of'. Retry")
    with pytest.raises(TypeError, match="search"):
        create_search_tool(object())  # type: ignore[arg-type]


# --- Search-R1 client ---------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def fake_server() -> Iterator[Callable[..., tuple[str, list[dict[str, Any]]]]]:
    """Start a fake retrieval server answering with ``reply(body) -> (status, payload)``."""
    servers: list[ThreadingHTTPServer] = []

    def start(
        reply: Callable[[dict[str, Any]], tuple[int, Any]], delay: float = 0.0
    ) -> tuple[str, list[dict[str, Any]]]:
        seen: list[dict[str, Any]] = []

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                seen.append({"path": self.path, "body": body})
                time.sleep(delay)
                status, payload = reply(body)
                data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                try:
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (the timeout case)

            def log_message(self, *args: Any) -> None:
                pass

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        server.daemon_threads = True
        threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}", seen

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


def _retrieval_reply(body: dict[str, Any]) -> tuple[int, Any]:
    docs = [
        {
            "document": {
                "id": str(i),
                "contents": f'"Title {i}"\nText {i} about {body["queries"][0]}',
            },
            "score": 10.0 - i,
        }
        for i in range(body["topk"])
    ]
    return 200, {"result": [docs]}


def test_search_r1_client_speaks_the_protocol(fake_server: Any) -> None:
    url, seen = fake_server(_retrieval_reply)
    with SearchR1Client(url, topk=2) as client:
        passages = client.search("who wrote Dune")
        assert client.search("x", k=3)[2].id == "2"
    assert seen[0] == {
        "path": "/retrieve",
        "body": {"queries": ["who wrote Dune"], "topk": 2, "return_scores": True},
    }
    assert passages == [
        Passage(id="0", title="Title 0", text="Text 0 about who wrote Dune", score=10.0),
        Passage(id="1", title="Title 1", text="Text 1 about who wrote Dune", score=9.0),
    ]
    # Search-R1 configs give the endpoint itself; bare documents (return_scores off) parse too
    bare_url, bare_seen = fake_server(
        lambda body: (200, {"result": [[{"id": "7", "contents": '"T"\nbody'}]]})
    )
    with SearchR1Client(f"{bare_url}/retrieve/") as client:
        assert client.search("q") == [Passage(id="7", title="T", text="body", score=0.0)]
    assert bare_seen[0]["path"] == "/retrieve"


def test_tool_over_search_r1_client(fake_server: Any) -> None:
    url, _ = fake_server(_retrieval_reply)
    with SearchR1Client(url) as client:
        message = _call(create_search_tool(client, k=2), "Dune author")
    assert "[2] Title 1\nText 1 about Dune author" in message.content
    assert len(message.artifact) == 2


def test_server_down_is_search_unavailable_and_an_error_string() -> None:
    url = f"http://127.0.0.1:{_free_port()}"
    with SearchR1Client(url, timeout=2.0) as client:
        with pytest.raises(SearchUnavailable, match="cannot reach the retrieval server") as info:
            client.search("anything")
        assert isinstance(info.value, GenMemError) and info.value.url == f"{url}/retrieve"
        text = create_search_tool(client).invoke({"query": "anything"})
    assert text.startswith("Error: search is unavailable right now (cannot reach")


@pytest.mark.parametrize(
    ("reply", "delay", "message"),
    [
        (lambda body: (500, {"detail": "boom"}), 0.0, "answered HTTP 500"),
        (lambda body: (200, b"<html>"), 0.0, "not JSON"),
        (lambda body: (200, {"results": []}), 0.0, "unexpected shape"),
        (lambda body: (200, {"result": [[{"document": {"contents": "x"}}]]}), 0.0, "unexpected"),
        (_retrieval_reply, 0.6, "did not answer within 0.2s"),
    ],
)
def test_server_failures_are_search_unavailable(
    fake_server: Any, reply: Any, delay: float, message: str
) -> None:
    url, _ = fake_server(reply, delay=delay)
    with (
        SearchR1Client(url, timeout=0.2) as client,
        pytest.raises(SearchUnavailable, match=message),
    ):
        client.search("q")
