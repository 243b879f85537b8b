"""The bank explorer through Starlette's TestClient, on a real SQLite bank."""

from __future__ import annotations

import socket
import struct
import zlib
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from genmem.cli.main import main
from genmem.explorer import ExplorerConfig, create_app
from genmem.memory.bank import Bank
from tests.explorer._sample import (
    DELETED,
    HOSTILE,
    HOSTILE_AT,
    REVISED,
    populate,
    sample_bank,
    sid,
)

BASE = "http://127.0.0.1:8765"


@pytest.fixture
def sample(tmp_path: Path) -> Bank:
    return sample_bank(str(tmp_path / "bank.db"))[1]


def client(bank: Bank, **config: object) -> TestClient:
    return TestClient(create_app(bank, ExplorerConfig(**config)), base_url=BASE)  # type: ignore[arg-type]


def test_tree_counts_and_occupancy_level_by_level(sample: Bank) -> None:
    c = client(sample)
    root = c.get("/api/tree/").json()
    assert root["count"] == 32 and root["total"] == 48
    by_code = {ch["code"]: ch for ch in root["children"] if ch["entries"]}
    assert {k: v["entries"] for k, v in by_code.items()} == {3: 15, 4: 8, 5: 9}
    assert by_code[3]["occupancy"] == pytest.approx(15 / (16 * 8 * 8))
    level2 = c.get("/api/tree/3").json()
    assert [ch["entries"] for ch in level2["children"][:2]] == [7, 8]
    html = c.get("/tree/3-0").text
    assert 'href="/tree/3-0-6"' in html and 'href="/tree/3-0-1"' not in html  # empty: no link
    leaves = c.get("/api/tree/3-0-6").json()["leaves"]
    assert [e["path"] for e in leaves] == ["3-0-6-1", "3-0-6-5"]
    assert c.get("/tree/3-0-6-1", follow_redirects=False).headers["location"] == "/entry/3-0-6-1"


def test_every_backend_serves_the_same_pages(bank: Bank) -> None:
    c = client(populate(bank))
    root = c.get("/api/tree/?occupied=1").json()
    assert {ch["code"]: ch["entries"] for ch in root["children"]} == {3: 15, 4: 8, 5: 9}
    assert [e["path"] for e in c.get("/api/tree/3-0-2").json()["leaves"]] == ["3-0-2-1"]
    assert c.get(f"/api/entry/{REVISED}").json()["version_count"] == 3
    assert c.get("/api/events").json()["matching"] == 37
    assert c.get("/api/events?actor=evolver").json()["matching"] == 4
    hits = c.get("/api/search", params={"q": "round money to cents"}).json()["results"]
    assert hits[0]["path"] == REVISED


def test_tree_pages_and_occupied_filter(sample: Bank) -> None:
    c = client(sample)
    page2 = c.get("/api/tree/?limit=10&page=2").json()
    assert [ch["code"] for ch in page2["children"]] == list(range(10, 20))
    assert page2["pages"] == 5
    occupied = c.get("/api/tree/?occupied=1").json()
    assert [ch["code"] for ch in occupied["children"]] == [3, 4, 5] and occupied["total"] == 3
    one = c.get("/api/tree/3-0-6?limit=1&page=2").json()
    assert [e["path"] for e in one["leaves"]] == ["3-0-6-5"] and one["pages"] == 2
    assert 'rel="next"' in c.get("/tree/3-0-6?limit=1").text


def test_entry_history_with_word_diffs(sample: Bank) -> None:
    c = client(sample)
    data = c.get(f"/api/entry/{REVISED}").json()
    assert data["version_count"] == 3 and data["live"]
    assert [v["version"] for v in data["versions"]] == [3, 2, 1]
    newest = data["versions"][0]
    kinds = {s["kind"] for s in newest["diff"]}
    assert kinds == {"same", "added", "removed"}
    assert any("cents" in s["text"] for s in newest["diff"] if s["kind"] == "added")
    assert data["versions"][-1]["diff"] is None  # the first version has nothing before it
    html = c.get(f"/entry/{REVISED}").text
    assert "<ins>" in html and "<del>" in html and "events of this slot" in html
    cmp = c.get(f"/api/entry/{REVISED}?a=1&b=3").json()["compare"]
    assert cmp["unified"].startswith("--- v1\n+++ v3\n")
    assert c.get(f"/api/entry/{REVISED}?a=1").status_code == 400


def test_deleted_entry_keeps_its_history(sample: Bank) -> None:
    data = client(sample).get(f"/api/entry/{DELETED}").json()
    assert not data["live"] and data["current"]["deleted"]
    assert [v["deleted"] for v in data["versions"]] == [True, False]


def test_log_filters_and_cursor_pages(sample: Bank) -> None:
    c = client(sample)
    assert c.get("/api/events").json()["matching"] == 37
    assert c.get("/api/events?op=revise").json()["matching"] == 4
    assert c.get("/api/events?outcome=rejected").json()["events"][0]["reason"]
    evolver = c.get("/api/events?actor=evolver&op=revise&outcome=revised").json()
    assert evolver["matching"] == 2
    assert {e["sid"] for e in evolver["events"]} == {sid(sample, REVISED)}
    assert c.get("/api/events?since=2099-01-01T00:00").json()["matching"] == 0
    assert c.get("/api/events?until=2000-01-01").json()["matching"] == 0
    assert c.get("/api/events?since=2000-01-01&until=2099-01-01").json()["matching"] == 37
    assert c.get(f"/api/events?sid={REVISED}").json()["matching"] == 3
    seen, before = [], ""
    while True:
        page = c.get(f"/api/events?limit=10{before}").json()
        seen += [e["seq"] for e in page["events"]]
        if page["next_before"] is None:
            break
        before = f"&before={page['next_before']}"
    assert seen == sorted(seen, reverse=True) and len(set(seen)) == 37
    html = c.get("/log?outcome=deleted").text
    assert "1 matching events" in html and 'id="older"' not in html


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("op=erase", "op='erase' is not one of insert, revise"),
        ("outcome=gone", "is not one of inserted"),
        ("since=yesterday", "is not a time"),
        ("since=2030-01-01&until=2020-01-01", "is after until"),
        ("limit=0", "limit=0 must be in 1..500"),
        ("before=x", "before='x' is not an integer"),
        ("sid=3-0", "has 2 of 4 levels"),
    ],
)
def test_bad_log_filters_are_named(sample: Bank, query: str, message: str) -> None:
    r = client(sample).get(f"/api/events?{query}")
    assert r.status_code == 400 and message in r.json()["error"]


def test_search_by_prefix_and_by_text(sample: Bank) -> None:
    c = client(sample)
    assert c.get("/search?q=3-0", follow_redirects=False).headers["location"] == "/tree/3-0"
    token_sid = sid(sample, REVISED)
    r = c.get("/search", params={"q": token_sid}, follow_redirects=False)
    assert r.headers["location"] == f"/entry/{REVISED}"
    hits = c.get("/api/search", params={"q": "unit prices: round money to cents"}).json()
    assert hits["kind"] == "text" and hits["results"][0]["path"] == REVISED
    scores = [r["score"] for r in hits["results"]]
    assert scores == sorted(scores, reverse=True) and scores[0] > scores[-1]
    html = c.get("/search", params={"q": "round money to cents"}).text
    assert f'href="/entry/{REVISED}"' in html
    none = c.get("/api/search", params={"q": "zebra", "mode": "text"}).json()
    assert none["results"] == []
    assert c.get("/search", params={"q": "99-1", "mode": "sid"}).status_code == 400


def test_utilisation_of_live_sids(sample: Bank) -> None:
    data = client(sample).get("/api/utilisation").json()
    assert data["metrics"]["n"] == 32 and data["metrics"]["used_leaves"] == 32
    level1 = data["levels"][0]
    assert level1["used"] == 3 and level1["counts"][3] == 15 and len(level1["counts"]) == 48
    assert "Codebook utilisation" in client(sample).get("/utilisation").text


def test_read_only_by_default_refuses_every_write(sample: Bank) -> None:
    c = client(sample)
    before = (sample.history(sid(sample, REVISED)), len(sample.events()))
    r = c.post(f"/api/entry/{REVISED}/revise", json={"payload": "A new text for the entry."})
    assert r.status_code == 403 and "--allow-writes" in r.json()["error"]
    r = c.post(f"/entry/{REVISED}/delete", data={"token": "x", "expected_version": "3"})
    assert r.status_code == 403 and "read-only" in r.text
    assert "revise-form" not in c.get(f"/entry/{REVISED}").text
    assert (sample.history(sid(sample, REVISED)), len(sample.events())) == before


def test_allow_writes_revises_through_the_validated_api(sample: Bank) -> None:
    config = ExplorerConfig(allow_writes=True)
    c = TestClient(create_app(sample, config), base_url=BASE)
    target = sid(sample, REVISED)
    text = "List each quantity with its unit price, multiply, add, and round money at the end."
    ok = c.post(f"/api/entry/{REVISED}/revise", json={"payload": text, "expected_version": 3})
    assert ok.status_code == 200 and ok.json()["result"]["version_after"] == 4
    assert sample.get(target).payload == text and sample.get(target).actor == "explorer"
    events = len(sample.events())
    stale = c.post(
        f"/api/entry/{REVISED}/revise", json={"payload": text + " x", "expected_version": 3}
    )
    assert stale.status_code == 409 and "version 4" in stale.json()["error"]
    assert c.post(f"/api/entry/{REVISED}/revise", json={"payload": " "}).status_code == 400
    assert c.post(f"/api/entry/{REVISED}/revise", json={"payload": 3}).status_code == 400
    assert c.post(f"/api/entry/{REVISED}/revise", json={"text": text}).status_code == 400
    assert c.post(f"/api/entry/{REVISED}/revise", content=b"[1]",
                  headers={"content-type": "application/json"}).status_code == 400  # fmt: skip
    assert c.post(f"/api/entry/{REVISED}/revise", content=b"payload=x").status_code == 400
    assert c.post(f"/api/entry/{REVISED}/rename", json={}).status_code == 404
    assert c.post("/api/entry/3-0-6/revise", json={"payload": text}).status_code == 400
    assert c.post("/api/entry/9-9-7-7/revise", json={"payload": text}).status_code == 409
    assert sample.get(target).version == 4 and len(sample.events()) == events
    junk = c.post(f"/api/entry/{REVISED}/revise", json={"payload": "!!! ??? ..."})
    assert junk.status_code == 422 and "write gate refused" in junk.json()["error"]
    assert sample.get(target).version == 4  # refused: logged as a rejection, nothing written
    assert sample.events()[-1].outcome == "rejected"
    # The page's forms: the token is required, then a revision and a deletion go through.
    page = c.get(f"/entry/{REVISED}").text
    assert config.token in page
    no_token = c.post(f"/entry/{REVISED}/revise", data={"payload": text + " Also."})
    assert no_token.status_code == 403 and sample.get(target).version == 4
    form = {"token": config.token, "expected_version": "4", "payload": text + " Check it."}
    done = c.post(f"/entry/{REVISED}/revise", data=form, follow_redirects=False)
    assert done.status_code == 303 and sample.get(target).version == 5
    gone = c.post(
        f"/entry/{REVISED}/delete",
        data={"token": config.token, "expected_version": "5"},
        follow_redirects=False,
    )
    assert gone.status_code == 303 and sample.get(target) is None
    assert c.get("/api/tree/3-0-6").json()["count"] == 1


@pytest.mark.parametrize(
    ("path", "status", "message"),
    [
        ("/entry/99-0-0-0", 400, "code 99 is out of range at level 1"),
        ("/entry/3-0-6", 400, "has 3 of 4 levels"),
        ("/entry/3-0-6-1-2", 400, "has 5 levels"),
        ("/tree/abc", 400, "is neither SID tokens"),
        ("/tree/3-x", 400, "is neither SID tokens"),
        ("/entry/9-9-7-7", 404, "has never held an entry"),
        ("/nowhere", 404, "no page '/nowhere'"),
        ("/runs", 404, "--runs DIR"),
        ("/tree/?page=0", 400, "page=0 must be in"),
    ],
)
def test_bad_input_gets_a_clear_error(sample: Bank, path: str, status: int, message: str) -> None:
    c = client(sample)
    page = c.get(path)
    assert page.status_code == status and 'id="error"' in page.text
    api = c.get("/api" + path if not path.startswith("/runs") else "/api/runs")
    if path != "/nowhere":
        assert api.status_code == status and message in api.json()["error"]
    assert message.replace("'", "&#39;") in page.text


def test_stored_text_is_escaped_everywhere(tmp_path: Path) -> None:
    _, bank = sample_bank(str(tmp_path / "bank.db"))
    bank.insert(
        sid(bank, "5-1-2-3"), "Plain text by a hostile actor.", actor="<script>x()</script>"
    )
    c = client(bank, allow_writes=True)
    pages = [
        c.get(f"/entry/{HOSTILE_AT}").text,
        c.get("/tree/5-1-0").text,
        c.get("/search", params={"q": "owned alert bold"}).text,
        c.get("/log").text,
        c.get("/search", params={"q": HOSTILE}).text,
    ]
    for html in pages:
        assert "<script>" not in html and "onerror=" not in html.replace("onerror=&#34;", "")
        assert "<b>bold</b>" not in html
    entry = pages[0]
    # Only the page's own closing tags: as many as it opens.
    assert entry.count("</textarea>") == entry.count("<textarea") == 1
    assert entry.count("</pre>") == entry.count("<pre") == 2
    assert "&lt;/textarea&gt;&lt;/pre&gt;&lt;script&gt;alert(&#34;owned&#34;)" in entry
    assert "{{ 7*7 }}" in entry and "]]&gt;" in entry  # printed as text, never evaluated
    assert "&lt;script&gt;x()&lt;/script&gt;" in pages[3]
    assert c.get(f"/api/entry/{HOSTILE_AT}").json()["current"]["payload"] == HOSTILE


def test_the_view_follows_other_writers(sample: Bank) -> None:
    c = client(sample)
    assert c.get("/api/tree/3-0-2").json()["count"] == 1
    sample.insert(sid(sample, "3-0-2-7"), "A new entry written by another process meanwhile.")
    sample.revise(sid(sample, "3-0-2-1"), "")
    sample.insert(sid(sample, DELETED), "The freed slot is filled again with a new entry.")
    data = c.get("/api/tree/3-0-2").json()
    assert data["count"] == 2 and [e["path"] for e in data["leaves"]] == ["3-0-2-5", "3-0-2-7"]
    assert c.get("/api/events?outcome=inserted").json()["matching"] == 35


def test_other_host_names_are_refused_on_loopback(sample: Bank) -> None:
    c = client(sample)
    assert c.get("/", headers={"host": "evil.example:8765"}).status_code == 400
    for host in ("localhost:8765", "[::1]:8765", "127.0.0.1"):
        assert c.get("/", headers={"host": host}).status_code == 200
    anywhere = TestClient(create_app(sample, ExplorerConfig(host="0.0.0.0")), base_url=BASE)
    assert anywhere.get("/", headers={"host": "bank.lan"}).status_code == 200


def _png(path: Path) -> None:
    """A 1x1 PNG."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    ihdr = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)
    raw = chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(b"\x00\xff\x00\x00"))
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + raw + chunk(b"IEND", b""))


def test_runs_show_plots_and_summary_and_nothing_else(sample: Bank, tmp_path: Path) -> None:
    run = tmp_path / "runs" / "seed0"
    run.mkdir(parents=True)
    _png(run / "probe_curves.png")
    (run / "summary.md").write_text("## online evolution\n<script>x()</script>\n")
    (run / "summary.json").write_text('{"seconds": 12.5}')
    (tmp_path / "runs" / "secret.txt").write_text("not a plot")
    c = client(sample, runs=tmp_path / "runs")
    html = c.get("/runs").text
    assert "/runs/plot?run=seed0&amp;file=probe_curves.png" in html
    assert "&lt;script&gt;x()&lt;/script&gt;" in html and "<script>" not in html
    png = c.get("/runs/plot", params={"run": "seed0", "file": "probe_curves.png"})
    assert png.status_code == 200 and png.headers["content-type"] == "image/png"
    for bad in ({"run": "seed0", "file": "../secret.txt"}, {"run": "..", "file": "secret.txt"}):
        assert c.get("/runs/plot", params=bad).status_code == 404
    api = c.get("/api/runs").json()["runs"]
    assert api[0]["name"] == "seed0" and api[0]["summary"] == {"seconds": 12.5}


def test_cli_refuses_a_missing_bank_a_busy_port_and_a_missing_runs_folder(
    sample: Bank, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = f"sqlite:///{tmp_path}/none.db"
    assert main(["bank", "serve", "--bank", missing]) == 1
    assert "does not exist" in capsys.readouterr().err and not (tmp_path / "none.db").exists()
    url = f"sqlite:///{tmp_path}/bank.db?bank=sample"
    assert main(["bank", "serve", "--bank", url, "--runs", str(tmp_path / "no")]) == 1
    assert "is not a folder" in capsys.readouterr().err
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        assert main(["bank", "serve", "--bank", url, "--port", str(port)]) == 1
    err = capsys.readouterr().err
    assert f"cannot listen on 127.0.0.1:{port}" in err and len(err.strip().splitlines()) == 1


def test_text_index_is_rebuilt_after_changes_at_most_once_per_max_age(sample: Bank) -> None:
    new_text = "Zebra crossings: count the stripes before estimating the distance."
    lazy = client(sample, index_max_age=3600.0)
    eager = client(sample, index_max_age=0.0)
    for c in (lazy, eager):
        assert c.get("/api/search", params={"q": "zebra"}).json()["results"] == []
    sample.insert(sid(sample, "7-0-0-0"), new_text)
    stale = lazy.get("/api/search", params={"q": "zebra"}).json()
    assert stale["results"] == [] and stale["index"]["events_behind"] == 1
    assert "1 events behind" in lazy.get("/search", params={"q": "zebra"}).text
    fresh = eager.get("/api/search", params={"q": "zebra"}).json()
    assert [r["path"] for r in fresh["results"]] == ["7-0-0-0"]
    assert fresh["index"]["events_behind"] == 0 and fresh["index"]["entries"] == 33


def test_a_snapshot_is_browsed_and_never_written(sample: Bank) -> None:
    snap = sample.snapshot("t0")
    c = client(snap, allow_writes=True)
    assert c.get("/api/tree/").json()["count"] == 32
    assert c.get(f"/api/entry/{REVISED}").json()["version_count"] == 3
    assert c.get("/api/events").json()["matching"] == 0  # a snapshot has no log of its own
    assert "revise-form" not in c.get(f"/entry/{REVISED}").text
    r = c.post(f"/api/entry/{REVISED}/revise", json={"payload": "A new text for a snapshot."})
    assert r.status_code == 403 and "read-only snapshot" in r.json()["error"]
    assert len(snap.history(sid(snap, REVISED))) == 3


def test_flags_mean_what_they_mean_in_genmem_serve() -> None:
    from genmem.cli.main import build_parser

    def flags(p) -> dict[str, object]:
        return {a.dest: (a.help, a.default) for a in p._actions}

    sub = next(a for a in build_parser()._actions if a.dest == "command").choices
    bank = next(a for a in sub["bank"]._actions if a.dest == "bank_command").choices
    model, explorer = flags(sub["serve"]), flags(bank["serve"])
    assert explorer["host"] == model["host"] == ("interface (default 127.0.0.1)", "127.0.0.1")
    assert explorer["json"] == model["json"]
    assert explorer["port"] == ("port (default 8765)", 8765)
    assert model["port"] == ("port (default 8000)", 8000)
    assert explorer["bank"][0] == flags(bank["stats"])["bank"][0]
    assert explorer["allow_writes"][1] is False
