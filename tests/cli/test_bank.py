"""`genmem bank ...` end to end: real encoder, real codebooks, real SQLite bank, bundled data."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from genmem.cli import main
from genmem.envs.bundled import gsm8k_seed_experiences

pytestmark = pytest.mark.slow
N = 120


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> dict[str, Path | str]:
    """Codebooks fitted on 120 real experiences and a bank built from them (built once)."""
    d = tmp_path_factory.mktemp("cli-bank")
    exp = d / "exp.jsonl"
    with exp.open("w") as fh:
        for row in gsm8k_seed_experiences(limit=N):
            fh.write(json.dumps(row) + "\n")
    cb = d / "cb"
    assert (
        main(
            [
                "codebook",
                "fit",
                "--input",
                str(exp),
                "--sizes",
                "8,4,2",
                "--distance",
                "weighted",
                "--out",
                str(cb),
                "--json",
            ]
        )
        == 0
    )
    url = f"sqlite:///{d}/bank.db?bank=gsm"
    assert (
        main(
            [
                "bank",
                "build",
                "--experiences",
                str(exp),
                "--codebook",
                str(cb),
                "--bank",
                url,
                "--json",
            ]
        )
        == 0
    )
    return {"dir": d, "exp": exp, "cb": cb, "url": url}


def _run(capsys, *argv: str) -> tuple[int, str, str]:
    try:
        code = main(list(argv))
    except SystemExit as exc:  # argparse usage errors
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def _copy(capsys, src: str, dst: str, tmp_path: Path) -> None:
    """Copy a bank through export and import (cheaper than encoding again)."""
    dump = tmp_path / "copy.jsonl"
    assert _run(capsys, "bank", "export", "--bank", src, "--out", str(dump))[0] == 0
    assert _run(capsys, "bank", "import", str(dump), "--bank", dst)[0] == 0


def _stats(capsys, url: str) -> dict:
    code, out, _ = _run(capsys, "bank", "stats", "--bank", url, "--json")
    assert code == 0
    return json.loads(out)


def test_build_lookup_stats_and_rebuild(built, capsys) -> None:
    stats = _stats(capsys, built["url"])
    assert 1 < stats["entries"] <= 64
    assert stats["entries"] == stats["versions"] == stats["events"]

    # every record is in the provenance of exactly one entry
    code, out, _ = _run(capsys, "bank", "show", "--bank", built["url"], "--limit", "100", "--json")
    entries = json.loads(out)
    assert sum(e["metadata"]["n_records"] for e in entries) == N
    indices = sorted(s["index"] for e in entries for s in e["metadata"]["sources"])
    assert indices == list(range(N))

    sid = entries[0]["sid"]
    code, out, _ = _run(capsys, "bank", "lookup", "--bank", built["url"], "--sid", sid, "--json")
    hits = json.loads(out)
    assert code == 0 and len(hits) == 1
    assert set(hits[0]) >= {"sid", "match_depth", "version", "payload"}
    assert hits[0]["match_depth"] == 3 and hits[0]["payload"] == entries[0]["payload"]

    # a rerun continues: nothing new, nothing changed
    code, out, _ = _run(
        capsys,
        "bank",
        "build",
        "--experiences",
        str(built["exp"]),
        "--codebook",
        str(built["cb"]),
        "--bank",
        built["url"],
        "--json",
    )
    again = json.loads(out)
    assert again["records"] == N and again["slots"] == stats["entries"]
    assert again["inserted"] == 0 and again["skipped_occupied"] == stats["entries"]
    assert _stats(capsys, built["url"]) == stats


def test_write_history_export_import_snapshot_check(built, capsys, tmp_path) -> None:
    url = f"sqlite:///{tmp_path}/w.db?bank=w"
    _copy(capsys, built["url"], url, tmp_path)
    code, out, _ = _run(capsys, "bank", "show", "--bank", url, "--limit", "1", "--json")
    sid = json.loads(out)[0]["sid"]
    code, out, _ = _run(
        capsys,
        "bank",
        "apply",
        "--bank",
        url,
        "--op",
        "revise",
        "--sid",
        sid,
        "--payload",
        "a better procedure: find the unit rate first",
        "--json",
    )
    assert code == 0 and json.loads(out)["outcome"] == "revised"
    junk = ("bank", "apply", "--bank", url, "--op", "revise", "--sid", sid, "--payload")
    code, out, _ = _run(capsys, *junk, "skill_name: skill_name\nsteps: steps")
    assert code == 1 and "rejected by the write gate (field_names" in out and "unchanged" in out
    code, out, _ = _run(capsys, "bank", "history", "--bank", url, "--sid", sid, "--json")
    assert [v["version"] for v in json.loads(out)] == [1, 2]
    code, out, _ = _run(capsys, "bank", "events", "--bank", url, "--json")
    assert [(e["outcome"], e["reason"]) for e in json.loads(out)[-2:]] == [
        ("revised", None),
        ("rejected", "field_names"),
    ]
    code, out, _ = _run(capsys, "bank", "events", "--bank", url)
    assert out.splitlines()[-1].endswith("(gate: field_names)")
    assert _stats(capsys, url)["rejections"] == {"field_names": 1}
    code, out, _ = _run(capsys, *junk, "1234567890", "--no-gate", "--json")  # the user insists
    assert code == 0 and json.loads(out)["outcome"] == "revised"
    assert _run(capsys, *junk, "a better procedure: find the unit rate first")[0] == 0
    assert _run(capsys, "bank", "snapshot", "--bank", url, "--name", "p1", "--json")[0] == 0
    code, out, _ = _run(capsys, "bank", "list", "--bank", url, "--json")
    assert [b["bank_id"] for b in json.loads(out)] == ["w", "w@p1"]
    dump = tmp_path / "w.jsonl"
    assert _run(capsys, "bank", "export", "--bank", url, "--out", str(dump))[0] == 0
    copy_url = f"sqlite:///{tmp_path}/copy.db"
    code, out, _ = _run(capsys, "bank", "import", str(dump), "--bank", copy_url, "--json")
    assert code == 0 and json.loads(out)["bank_id"] == "w"
    src, dst = _stats(capsys, url), _stats(capsys, copy_url + "?bank=w")
    assert {k: v for k, v in src.items()} == {k: v for k, v in dst.items()}
    code, out, _ = _run(capsys, "bank", "check", "--bank", url, "--json")
    assert code == 0 and json.loads(out)["ok"] is True


BAD = "<SID_L1_9><SID_L2_0><SID_L3_0>"


@pytest.mark.parametrize(
    ("argv", "code", "needle"),
    [
        (["bank", "lookup", "--sid", BAD], 1, "allows codes 0-7"),
        (["bank", "lookup", "--sid", "<SID_L1_1><SID_L2_1>"], 1, "missing"),
        (
            [
                "bank",
                "apply",
                "--op",
                "insert",
                "--sid",
                "<SID_L1_1><SID_L2_1><SID_L3_1>",
                "--payload",
                "",
            ],
            1,
            "non-empty",
        ),
        (["bank", "apply", "--op", "delete", "--sid", "x", "--payload", "y"], 2, "invalid choice"),
        (["bank", "history", "--sid", "nonsense"], 1, "unexpected text"),
        (["bank", "lookup", "-k", "0", "--sid", "<SID_L1_1><SID_L2_1><SID_L3_1>"], 2, "-k"),
    ],
)
def test_bad_input_exits_cleanly_and_changes_nothing(built, capsys, argv, code, needle) -> None:
    url = built["url"]  # a failed command changes nothing, so the shared bank serves
    before = _stats(capsys, url)
    got, out, err = _run(capsys, *argv[:2], "--bank", url, *argv[2:])
    assert got == code and needle in err and out == ""
    if code == 1:  # our own errors: exactly one line
        assert err.count("\n") == 1 and err.startswith("genmem: error:")
    assert _stats(capsys, url) == before


@pytest.mark.parametrize(
    ("argv", "code", "needle"),
    [
        (["bank", "stats", "--bank", "nope.db"], 1, "no scheme"),
        (["bank", "stats", "--bank", "mysql://x/y"], 1, "unknown bank URL scheme"),
        (
            [
                "bank",
                "build",
                "--experiences",
                "/no/such.jsonl",
                "--codebook",
                "x",
                "--bank",
                "sqlite://",
            ],
            2,
            "does not exist",
        ),
        (["bank", "import", "/no/such.jsonl", "--bank", "sqlite://"], 2, "does not exist"),
    ],
)
def test_bad_locations(capsys, argv, code, needle) -> None:
    got, out, err = _run(capsys, *argv)
    assert got == code and needle in err and out == ""


@pytest.mark.parametrize(
    ("edit", "target", "needle"),
    [
        (lambda rows: [*rows, rows[1]], "sqlite:///{d}/t.db?bank=t", "are not 1..2"),
        (lambda rows: rows, "sqlite:///{d}/t.db?bank=t@t0", "reserved for snapshots"),
        (lambda rows: [{**rows[0], "codebook_hash": "x"}, *rows[1:]], "sqlite:///{d}/t.db", "hash"),
    ],
)
def test_bad_import_exits_2_and_writes_nothing(capsys, tmp_path, edit, target, needle) -> None:
    from genmem.memory.sid import DEFAULT_SPEC
    from genmem.memory.sqlite_store import SQLiteBankStore

    with SQLiteBankStore(tmp_path / "src.db") as store:
        bank = store.create_bank("src", spec=DEFAULT_SPEC, codebook_hash="0" * 64)
        bank.insert("<SID_L1_1><SID_L2_2><SID_L3_3><SID_L4_4>", "an experience")
        dump = tmp_path / "src.jsonl"
        bank.export_jsonl(dump)
    rows = [json.loads(x) for x in dump.read_text().splitlines()]
    dump.write_text("".join(json.dumps(r) + "\n" for r in edit(rows)))
    url = target.format(d=tmp_path)
    code, out, err = _run(capsys, "bank", "import", str(dump), "--bank", url)
    assert code == 2 and needle in err and out == ""
    assert err.count("\n") == 1 and "Traceback" not in err
    with SQLiteBankStore(tmp_path / "t.db") as store:
        assert store.list_banks() == []


def test_unknown_bank_and_codebook_mismatch(built, capsys, tmp_path) -> None:
    url = f"sqlite:///{tmp_path}/m.db?bank=m"
    code, _, err = _run(capsys, "bank", "stats", "--bank", url)
    assert code == 1 and "no bank 'm'" in err
    _copy(capsys, built["url"], url, tmp_path)
    before = _stats(capsys, url)
    other = tmp_path / "cb2"
    assert (
        main(
            [
                "codebook",
                "fit",
                "--input",
                str(built["exp"]),
                "--sizes",
                "8,4,2",
                "--distance",
                "euclidean",
                "--out",
                str(other),
                "--json",
            ]
        )
        == 0
    )
    capsys.readouterr()
    code, _, err = _run(
        capsys,
        "bank",
        "build",
        "--experiences",
        str(built["exp"]),
        "--codebook",
        str(other),
        "--bank",
        url,
    )
    assert code == 1 and "codebooks are frozen" in err
    assert _stats(capsys, url) == before


def test_seed_builds_a_bank_and_writes_its_retrieval_pairs(tmp_path, capsys) -> None:
    from genmem.memory.location import open_bank

    pairs = tmp_path / "pairs.jsonl"
    argv = ["bank", "seed", "--distill", "abstract", "--size", "48", "--pairs", str(pairs)]
    assert main([*argv, "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["experiences"] == 48 and info["pairs"] == 48 and 0 < info["entries"] <= 48
    # no payload holds its problem, yet the things counted are shared: the overlap says how much
    assert info["overlap"]["verbatim"] == 0 and 0 < info["overlap"]["mean"] < 1
    bank = open_bank(info["url"])
    rows = [json.loads(line) for line in pairs.read_text().splitlines()]
    assert len(rows) == 48 and all(bank.get(r["reference_sid"]) for r in rows)
    assert all("Result:" not in bank.get(r["reference_sid"]).payload for r in rows)
    assert main(argv) == 0  # cached: the same bank again, in one line for people
    assert "(abstract; cached)" in capsys.readouterr().out
    with pytest.raises(SystemExit) as exc:
        main(["bank", "seed", "--size", "0"])
    assert exc.value.code == 2


def test_seed_a_qa_bank(tmp_path, capsys) -> None:
    argv = ["bank", "seed", "--source", "qa", "--size", "48", "--json"]
    assert main([*argv, "--distill", "procedure"]) == 2
    assert "abstract experiences only" in capsys.readouterr().err
    assert main([*argv, "--distill", "abstract", "--size", "301"]) == 2
    assert "has 300 questions" in capsys.readouterr().err
    assert main([*argv, "--distill", "abstract"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["bank_id"].startswith("qa-seed-") and info["pairs"] == 48
    assert info["overlap"]["verbatim"] == 0


@pytest.mark.slow
def test_seed_a_textworld_bank_from_training_games(capsys) -> None:
    """48 textworld-train games (generated here, about 35 s) become 48 won-game experiences."""
    pytest.importorskip("textworld")
    from genmem.envs.benches import BenchOptions, open_bench
    from genmem.experiments.contamination import tasks_in_bank
    from genmem.memory.location import open_bank

    argv = ["bank", "seed", "--source", "textworld", "--size", "48", "--json"]
    assert main([*argv, "--distill", "procedure"]) == 2
    assert "--distill abstract" in capsys.readouterr().err
    assert main([*argv, "--distill", "abstract"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["bank_id"].startswith("textworld-seed-") and info["pairs"] == 48
    assert info["rejected"] == {} and info["overlap"]["verbatim"] == 0
    bank = open_bank(info["url"])
    payloads = [e.payload for e in bank.entries()]
    assert all("Plan that won:" in p and "winning commands were" in p for p in payloads)
    train = open_bench("textworld-train", BenchOptions(games=48)).tasks()
    test = open_bench("textworld-test", BenchOptions(games=3)).tasks()
    # built from the training games' openings, never from a test game's
    assert len(tasks_in_bank(bank, train)) == 48 and tasks_in_bank(bank, test) == []
