"""`genmem sid generate`: the real default policy, real codebooks and a real SQLite bank."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from genmem.cli import main
from genmem.envs.bundled import gsm8k_seed_experiences
from genmem.memory.location import open_bank
from genmem.memory.sid import SIDSpec

pytestmark = pytest.mark.slow
N = 40
QUERY = "A baker sells 12 muffins a day for 3 dollars each. How much does she earn in a week?"


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> dict[str, str]:
    """Codebooks fitted on 40 real experiences and a bank built from them (built once)."""
    d = tmp_path_factory.mktemp("cli-sid")
    exp = d / "exp.jsonl"
    exp.write_text("".join(json.dumps(r) + "\n" for r in gsm8k_seed_experiences(limit=N)))
    cb = d / "cb"
    fit = ["codebook", "fit", "--input", str(exp), "--sizes", "6,3,2", "--out", str(cb)]
    assert main([*fit, "--json"]) == 0
    url = f"sqlite:///{d}/bank.db?bank=gsm"
    build = ["bank", "build", "--experiences", str(exp), "--codebook", str(cb), "--bank", url]
    assert main([*build, "--json"]) == 0
    return {"url": url, "codebook": str(cb)}


def _run(capsys, *args: str) -> list[dict]:
    assert main(["sid", "generate", *args, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_beam_prints_k_distinct_valid_sids_best_first(built, capsys) -> None:
    generate = ("--addresser", "generative")  # the policy's own beam (never aligned: it warns)
    rows = _run(capsys, "--bank", built["url"], "--query", QUERY, "--beam", "5", *generate)
    spec = SIDSpec((6, 3, 2))
    assert len(rows) == 5 == len({r["sid"] for r in rows})
    assert all(set(r) == {"sid", "score", "addresser"} for r in rows)
    assert {r["addresser"] for r in rows} == {"generative"}
    assert [r["score"] for r in rows] == sorted((r["score"] for r in rows), reverse=True)
    for r in rows:
        spec.parse(r["sid"])
    greedy = _run(capsys, "--bank", built["url"], "--query", QUERY, *generate)
    assert len(greedy) == 1


def test_auto_quantises_with_the_banks_own_codebooks(built, capsys) -> None:
    """The default policy was never aligned: auto uses the codebooks the bank was built with
    (found by hash, no --codebook), and gives exactly what the quantizer gives."""
    rows = _run(capsys, "--bank", built["url"], "--query", QUERY, "--beam", "3")
    assert {r["addresser"] for r in rows} == {"quantizer"}
    explicit = _run(
        capsys, "--bank", built["url"], "--query", QUERY, "--beam", "3",
        "--model", "quantizer", "--codebook", built["codebook"],
    )  # fmt: skip
    assert rows == explicit


def test_occupied_and_rerank(built, capsys) -> None:
    occupied = {str(s) for s in open_bank(built["url"]).occupied()}
    rows = _run(
        capsys, "--bank", built["url"], "--query", QUERY, "--beam", "8", "--allowed", "occupied"
    )
    assert rows and {r["sid"] for r in rows} <= occupied
    assert len(rows) == min(8, len(occupied))
    ranked = _run(capsys, "--bank", built["url"], "--query", QUERY, "--rerank", "--beam", "20")
    assert 1 <= len(ranked) <= 5
    assert {r["sid"] for r in ranked} <= occupied
    assert all(r["payload"] and r["candidate_rank"] >= 1 for r in ranked)


def test_quantizer_baseline(built, capsys) -> None:
    rows = _run(
        capsys,
        "--bank",
        built["url"],
        "--query",
        QUERY,
        "--model",
        "quantizer",
        "--codebook",
        built["codebook"],
        "--beam",
        "3",
    )
    assert len(rows) == 3 and rows[0]["score"] >= rows[1]["score"] >= rows[2]["score"]


@pytest.mark.parametrize(
    ("extra", "code", "message"),
    [
        (["--beam", "51"], 2, "at most 50"),
        (["--model", "vllm:http://x:1/v1#m"], 2, "needs --tokenizer"),
        (["--model", "vllm:http://x:1/v1#m", "--allowed", "occupied"], 2, "local policy"),
    ],
)
def test_bad_input_is_refused(built, capsys, extra, code, message) -> None:
    assert main(["sid", "generate", "--bank", built["url"], "--query", QUERY, *extra]) == code
    assert message in capsys.readouterr().err


def test_empty_query_and_missing_bank(tmp_path: Path, built, capsys) -> None:
    assert main(["sid", "generate", "--bank", built["url"], "--query", "  "]) == 2
    assert "empty" in capsys.readouterr().err
    missing = f"sqlite:///{tmp_path}/none.db"
    assert main(["sid", "generate", "--bank", missing, "--query", QUERY]) == 1
    assert capsys.readouterr().err.startswith("genmem: error:")


def test_bench_runs_and_reports_validity(capsys) -> None:
    assert main(["sid", "bench", "--contexts", "1", "--beams", "1,2", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    rows = {(t["decoder"], t["beam"]): t for t in report["timings"]}
    assert set(rows) == {(d, b) for d in ("tree", "trie", "generate", "free") for b in (1, 2)}
    for beam in (1, 2):
        for decoder in ("tree", "trie", "generate"):
            assert rows[decoder, beam]["valid_rate"] == 1.0
        assert (
            rows["tree", beam]["mean_candidates"] == beam == rows["trie", beam]["mean_candidates"]
        )
        assert rows["tree", beam]["p50_ms"] > 0
    assert main(["sid", "bench", "--beams", "0"]) == 2


def test_a_bank_whose_codebooks_this_machine_never_saw(tmp_path, capsys, monkeypatch) -> None:
    from genmem.memory.sid import DEFAULT_SPEC
    from genmem.memory.sqlite_store import SQLiteBankStore
    from tests.conftest import TEST_HASH

    monkeypatch.setenv("GENMEM_CACHE", str(tmp_path / "empty-cache"))
    bank = SQLiteBankStore(tmp_path / "b.db").create_bank(
        "b", spec=DEFAULT_SPEC, codebook_hash=TEST_HASH
    )
    bank.insert(DEFAULT_SPEC.make((1, 1, 1, 1)), "Multiply the price by the count.")
    url = f"sqlite:///{tmp_path}/b.db?bank=b"
    assert (
        main(["sid", "generate", "--bank", url, "--query", QUERY, "--addresser", "quantizer"]) == 1
    )
    err = capsys.readouterr().err
    assert "has not seen" in err and "--codebook DIR" in err
