"""`genmem codebook fit|stats|search`, run in-process through ``genmem.cli.main``."""

from __future__ import annotations

import csv
import json
import shutil

import numpy as np
import pytest

from genmem.cli import main
from genmem.memory.encoders import DEFAULT_ENCODER_ID, EXPERIENCE_PREFIX
from genmem.memory.rqkmeans import Codebooks
from tests.fakes import clustered_embeddings, gsm8k_texts

STATS_KEYS = {
    "capacity",
    "vocab_size",
    "utilization",
    "prefix_utilization",
    "used_leaves",
    "ucr",
    "entropy_norm",
    "effective_codes",
    "dui",
    "icr",
    "recon_mse",
    "n",
}


@pytest.fixture(scope="module")
def npy(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("emb") / "emb.npy"
    np.save(path, clustered_embeddings(300, 16, clusters=10, skew=1.0))
    return str(path)


@pytest.fixture(scope="module")
def codebook(npy, tmp_path_factory) -> str:
    out = tmp_path_factory.mktemp("cb") / "codebook"
    assert main(["codebook", "fit", "--input", npy, "--sizes", "8,4,2", "--out", str(out)]) == 0
    return str(out)


def run_json(capsys, argv: list[str]) -> dict:
    assert main([*argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_fit_npy_json(npy, tmp_path, capsys):
    out = tmp_path / "cb"
    argv = ["codebook", "fit", "--input", npy, "--sizes", "8,4,2", "--distance", "euclidean"]
    res = run_json(capsys, [*argv, "--seed", "3", "--out", str(out)])
    cb = Codebooks.load(out)
    assert res["hash"] == cb.hash and res["sizes"] == [8, 4, 2] and res["n"] == 300
    assert (res["distance"], res["weight"], res["encoder_id"]) == ("euclidean", None, None)
    assert cb.metadata.seed == 3 and cb.metadata.encoder_prefix is None
    assert res["metrics"]["capacity"] == 64 and res["metrics"]["recon_mse"] > 0


def test_fit_defaults_to_weighted(codebook):
    cb = Codebooks.load(codebook)
    assert (cb.distance, cb.weight, cb.spec.sizes) == ("weighted", 0.5, (8, 4, 2))


def test_fit_npy_records_named_encoder(npy, tmp_path, capsys):
    argv = ["codebook", "fit", "--input", npy, "--sizes", "4,2", "--encoder", "default"]
    assert main([*argv, "--out", str(tmp_path / "cb")]) == 0
    out = capsys.readouterr().out
    assert "hash " in out and "used leaves" in out and "reconstruction" in out
    meta = Codebooks.load(tmp_path / "cb").metadata
    assert (meta.encoder_id, meta.encoder_prefix) == (DEFAULT_ENCODER_ID, EXPERIENCE_PREFIX)


def test_stats_json_keys(codebook, npy, capsys):
    res = run_json(capsys, ["codebook", "stats", codebook, "--input", npy])
    assert STATS_KEYS <= set(res)
    assert (res["n"], res["capacity"], res["vocab_size"]) == (300, 64, 14)
    assert len(res["utilization"]) == len(res["entropy_norm"]) == 3
    assert res["hash"] == Codebooks.load(codebook).hash


def test_stats_table(codebook, npy, capsys):
    assert main(["codebook", "stats", codebook, "--input", npy]) == 0
    out = capsys.readouterr().out
    assert "level" in out and "U_1:l" in out and "DUI" in out


def test_search_writes_csv_and_json(npy, tmp_path, capsys):
    out = tmp_path / "res" / "search.csv"
    argv = ["codebook", "search", "--input", npy, "--configs", "8,4,2;6,6"]
    res = run_json(capsys, [*argv, "--distances", "euclidean,weighted", "--out", str(out)])
    with out.open() as fh:
        rows = list(csv.DictReader(fh))
    assert [(r["sizes"], r["distance"]) for r in rows] == [
        ("8x4x2", "euclidean"),
        ("8x4x2", "weighted"),
        ("6x6", "euclidean"),
        ("6x6", "weighted"),
    ]
    assert len(json.loads(out.with_suffix(".json").read_text())) == 4 == len(res["rows"])


@pytest.mark.parametrize("command", ["fit", "stats", "search"])
def test_help(command, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["codebook", command, "--help"])
    assert exc.value.code == 0 and "--input" in capsys.readouterr().out


# --- bad input: one line on stderr, the right exit code, nothing written ------------------------


def _fit_args(npy: str, out: str, *extra: str) -> list[str]:
    return ["codebook", "fit", "--input", npy, "--sizes", "8,4,2", "--out", out, *extra]


@pytest.mark.parametrize(
    ("make_argv", "code", "match"),
    [
        (lambda d, n: _fit_args(str(d / "missing.npy"), str(d / "o")), 2, "does not exist"),
        (lambda d, n: _fit_args(n, str(d / "o"), "--sizes", "8,a"), 2, "not integers"),
        (lambda d, n: _fit_args(n, str(d / "o"), "--sizes", "8,0"), 2, "level 2"),
        (lambda d, n: _fit_args(n, str(d / "o"), "--sizes", "400,2"), 1, "at least 400"),
        (
            lambda d, n: _fit_args(n, str(d / "o"), "--distance", "euclidean", "--weight", "1"),
            2,
            "only applies",
        ),
        (lambda d, n: _fit_args(str(d / "bad.txt"), str(d / "o")), 2, ".npy matrix or"),
        (lambda d, n: _fit_args(str(d / "bad.npy"), str(d / "o")), 1, "NaN or inf"),
        (lambda d, n: _fit_args(str(d / "bad.jsonl"), str(d / "o")), 2, "non-empty string"),
        (lambda d, n: _fit_args(n, str(d / "full")), 2, "not empty"),
    ],
)
def test_fit_bad_input(tmp_path, npy, capsys, make_argv, code, match):
    (tmp_path / "bad.txt").write_text("x")
    bad = np.ones((20, 4))
    bad[3, 1] = np.nan
    np.save(tmp_path / "bad.npy", bad)
    (tmp_path / "bad.jsonl").write_text('{"text": "fine"}\n{"text": ""}\n')
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "keep").write_text("")
    assert main(make_argv(tmp_path, npy)) == code
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("genmem: error:") and match in err[0], err
    assert not (tmp_path / "o").exists()


def test_unknown_distance_is_a_usage_error(npy, tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        main(_fit_args(npy, str(tmp_path / "o"), "--distance", "cosine"))
    assert exc.value.code == 2 and "invalid choice" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_stats_bad_input(codebook, tmp_path, capsys):
    np.save(tmp_path / "d8.npy", np.zeros((5, 8), dtype=np.float32))
    assert main(["codebook", "stats", codebook, "--input", str(tmp_path / "d8.npy")]) == 1
    assert "dimension 8" in capsys.readouterr().err
    assert main(["codebook", "stats", str(tmp_path), "--input", str(tmp_path / "d8.npy")]) == 1
    assert "not a codebook directory" in capsys.readouterr().err
    edited = tmp_path / "edited"
    shutil.copytree(codebook, edited)
    meta = json.loads((edited / "metadata.json").read_text())
    meta["weight"] = 0.9
    (edited / "metadata.json").write_text(json.dumps(meta))
    assert main(["codebook", "stats", str(edited), "--input", str(tmp_path / "d8.npy")]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "hash mismatch" in err[0]


@pytest.mark.parametrize(
    ("extra", "match"),
    [
        (["--configs", "8,4;", "--distances", "euclidean,cosine"], "unknown"),
        (["--configs", "8,a", "--distances", "euclidean"], "--configs"),
        (["--configs", "8,4", "--distances", "euclidean", "--out", "x.txt"], ".csv"),
        (["--configs", "8,4", "--heldout", "1"], "--heldout"),
    ],
)
def test_search_bad_input(npy, tmp_path, capsys, extra, match):
    out = tmp_path / "s.csv"
    argv = ["codebook", "search", "--input", npy, "--out", str(out), *extra]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and match in err[0]
    assert not out.exists() and not (tmp_path / "x.txt").exists()


# --- real texts through the default encoder -----------------------------------------------------


@pytest.mark.slow
def test_fit_and_stats_on_real_texts(tmp_path, capsys):
    jsonl = tmp_path / "exp.jsonl"
    jsonl.write_text("".join(json.dumps({"text": t}) + "\n" for t in gsm8k_texts(20)))
    out = tmp_path / "cb"
    res = run_json(
        capsys, ["codebook", "fit", "--input", str(jsonl), "--sizes", "4,3", "--out", str(out)]
    )
    assert (res["n"], res["dim"], res["encoder_id"]) == (20, 384, DEFAULT_ENCODER_ID)
    meta = Codebooks.load(out).metadata
    assert meta.encoder_prefix == EXPERIENCE_PREFIX
    stats = run_json(capsys, ["codebook", "stats", str(out), "--input", str(jsonl)])
    assert STATS_KEYS <= set(stats)
    # the recorded encoder and prefix reproduce the fit-time vectors, hence the same metrics
    assert stats["used_leaves"] == res["metrics"]["used_leaves"]
    assert stats["recon_mse"] == pytest.approx(res["metrics"]["recon_mse"], rel=1e-4)
