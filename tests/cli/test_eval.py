"""`genmem eval`: bad input, retrieval-only scores, every method end to end on the real model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from genmem.cli import main
from genmem.experiments.seed_bank import seed_pairs
from genmem.memory.location import open_bank
from genmem.memory.sid import DEFAULT_SPEC


def _json(capsys) -> dict:
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize(
    ("extra", "code", "message"),
    [
        (["--bench", "gsm8k-test", "--methods", "none,bm25"], 2, "choose from none, tfidf"),
        (["--bench", "gsm8k-test", "--methods", "none,none"], 2, "each method once"),
        (["--bench", "gsm8k-test", "--format", "qa"], 2, "--format describes --data"),
        (["--data", "/no/such.jsonl"], 2, "does not exist"),
        (["--bench", "nq", "--corpus", "c.jsonl", "--search-url", "http://x"], 2, "not both"),
        (["--bench", "nq", "--corpus", "/no/corpus.jsonl", "--methods", "none"], 1, "corpus"),
        (["--pairs", "p.jsonl", "--methods", "tfidf"], 2, "--pairs needs --bank"),
        (["--bench", "webshop", "--methods", "none"], 1, "WEBSHOP_URL"),
        (["--bench", "alfworld", "--methods", "none"], 1, "alfworld"),
        (
            ["--bench", "textworld-test", "--interactor", "rank", "--model", "vllm:http://x#m"],
            2,
            "--interactor rank scores commands with a local model",
        ),
    ],
)
def test_bad_input_is_refused_before_anything_runs(
    tmp_path: Path, capsys, extra: list[str], code: int, message: str, monkeypatch
) -> None:
    monkeypatch.delenv("WEBSHOP_URL", raising=False)
    out = tmp_path / "out"
    assert main(["eval", *extra, "--out", str(out)]) == code
    assert message in capsys.readouterr().err
    assert not (out / "records.jsonl").exists()


@pytest.mark.parametrize("model", ["local", "default", "local:/some/dir", " local "])
def test_the_ranking_interactor_takes_every_spelling_of_a_local_model(model: str) -> None:
    import argparse

    from genmem.cli.common import check_interactor

    check_interactor(argparse.Namespace(interactor="rank", model=model))  # no CLIError


def test_a_file_of_unknown_format_is_named(tmp_path: Path, capsys) -> None:
    data = tmp_path / "odd.jsonl"
    data.write_text('{"prompt": "2+2?", "target": "4"}\n')
    assert main(["eval", "--data", str(data), "--methods", "none", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "odd.jsonl:1" in err and "['prompt', 'target']" in err
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"question": "2+2?", "answer": "4 #### 4"}\n{"question": 3}\n')
    assert main(["eval", "--data", str(bad), "--methods", "none", "--out", str(tmp_path)]) == 2
    assert "bad.jsonl:2" in capsys.readouterr().err


def test_pairs_refuse_none_and_bad_sids(tmp_path: Path, seed_bank_url: str, capsys) -> None:
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text('{"query": "q", "reference_sid": "<SID_L1_99>"}\n')
    args = ["eval", "--pairs", str(pairs), "--bank", seed_bank_url, "--out", str(tmp_path / "o")]
    assert main([*args, "--methods", "none,sid"]) == 2
    assert "'none' has no addresses" in capsys.readouterr().err
    assert main([*args, "--methods", "tfidf"]) == 2
    assert "pairs.jsonl:1" in capsys.readouterr().err


def test_retrieval_only_reports_intervals_in_json_file_and_table(tmp_path: Path, capsys) -> None:
    from genmem.memory.sqlite_store import SQLiteBankStore
    from tests.conftest import TEST_HASH
    from tests.experiments.test_retrieval_eval import SPEC, TEXTS

    bank = SQLiteBankStore(tmp_path / "b.db").create_bank("b", spec=SPEC, codebook_hash=TEST_HASH)
    for sid, text in TEXTS.items():
        bank.insert(sid, text)
    pairs = tmp_path / "pairs.jsonl"
    queries = ["count the apples and oranges", "money left after the pen", "rows of chairs"]
    pairs.write_text(
        "".join(
            json.dumps({"query": q, "reference_sid": s}) + "\n"
            for q, s in zip(queries, TEXTS, strict=False)
        )
    )
    out = tmp_path / "r"
    args = ["eval", "--pairs", str(pairs), "--bank", f"sqlite:///{tmp_path}/b.db?bank=b"]
    args += ["--methods", "tfidf", "--no-rerank", "--candidates", "2", "--out", str(out)]
    assert main([*args, "--json"]) == 0
    result = _json(capsys)
    assert result["intervals"]["resamples"] >= 1000 and result["intervals"]["confidence"] == 0.95
    ci = result["methods"]["tfidf"]["intervals"]
    rates = result["methods"]["tfidf"]["rates"]
    for key in ("candidate_hit", "hit_at_1", "hit_at_5"):
        assert ci[key][0] <= rates[key] <= ci[key][1]
    assert len(ci["prefix_at_1"]) == len(ci["prefix_at_5"]) == SPEC.levels
    assert json.loads((out / "retrieval.json").read_text()) == result
    assert (out / "retrieval.png").read_bytes()[:4] == b"\x89PNG"
    assert main(args) == 0
    table = capsys.readouterr().out
    hit = rates["hit_at_1"]
    assert f"{100 * hit:.1f} [" in table and "Intervals: 95% percentile bootstrap" in table


@pytest.mark.slow
def test_retrieval_only_scores_the_baselines_on_seed_pairs(
    tmp_path: Path, seed_bank_url: str, capsys
) -> None:
    pairs = seed_pairs(open_bank(seed_bank_url), limit=20)
    assert len(pairs) == 20
    path = tmp_path / "pairs.jsonl"
    path.write_text("".join(json.dumps(p) + "\n" for p in pairs))
    out = tmp_path / "retrieval"
    methods = "tfidf,dense,quantizer"
    args = ["eval", "--pairs", str(path), "--bank", seed_bank_url, "--methods", methods]
    assert main([*args, "--candidates", "10", "--out", str(out), "--json"]) == 0
    result = _json(capsys)
    assert result["n"] == 20 and result["k"] == 10 and result["reranked"]
    # The seed digests restate their problems: the lexical contest the issue warns about, and
    # the output says so.
    overlap = result["query_payload_overlap"]
    assert overlap["n"] == 20 and overlap["verbatim"] == 20 and overlap["mean"] == 1.0
    quantizer = result["methods"]["quantizer"]
    assert quantizer["addresser"] == "quantizer"
    for key in ("candidate_hit", "hit_at_1", "hit_at_5"):  # each rate with its interval beside it
        lo, hi = quantizer[f"{key}_ci"]
        assert lo <= quantizer[key] <= hi and quantizer[key] == quantizer["rates"][key]
    for method in ("tfidf", "dense"):
        rates = result["methods"][method]["rates"]
        # The query is the problem its entry's payload restates: lexical and dense search find
        # it among 10 candidates nearly always.
        assert rates["candidate_hit"] >= 0.9, (method, rates)
        assert rates["hit_at_1"] <= rates["hit_at_5"] <= rates["candidate_hit"]
        prefix = rates["prefix_at_1"]
        assert len(prefix) == DEFAULT_SPEC.levels and prefix == sorted(prefix, reverse=True)
        assert prefix[-1] == rates["hit_at_1"]
    # Every two methods, paired by query, each rate with its interval and tally.
    assert list(result["paired"]) == ["tfidf - dense", "tfidf - quantizer", "dense - quantizer"]
    for diffs in result["paired"].values():
        for rate in ("candidate_hit", "hit_at_1", "hit_at_5"):
            d = diffs[rate]
            assert d["ci"][0] <= d["diff"] <= d["ci"][1] and d["n"] == 20
            assert d["wins"] + d["losses"] + d["ties"] == 20
    a, b = result["methods"]["tfidf"]["rates"], result["methods"]["dense"]["rates"]
    assert result["paired"]["tfidf - dense"]["hit_at_1"]["diff"] == pytest.approx(
        a["hit_at_1"] - b["hit_at_1"]
    )
    written = json.loads((out / "retrieval.json").read_text())
    assert written["methods"].keys() == {"tfidf", "dense", "quantizer"}
    assert written["paired"] == result["paired"]
    assert (out / "retrieval.png").read_bytes()[:4] == b"\x89PNG"


@pytest.mark.slow
@pytest.mark.parametrize(
    ("bench", "metrics", "methods"),
    [
        # QA's metrics and the content-coupled retrievers; SID memory runs the same code on any
        # bench (the GSM8K case runs it).
        ("hotpotqa-distractor", ("f1", "em"), ("none", "tfidf", "dense")),
        # GSM8K's own metric and SID memory on it; tfidf and dense run the same code on any bench.
        ("gsm8k-test", ("accuracy",), ("none", "sid")),
    ],
)
def test_every_method_end_to_end_on_the_default_model(
    tmp_path: Path,
    seed_bank_url: str,
    capsys,
    bench: str,
    metrics: tuple[str, ...],
    methods: tuple[str, ...],
) -> None:
    out = tmp_path / bench
    events = open_bank(seed_bank_url).stats().events
    args = ["eval", "--bench", bench, "--limit", "2", "--bank", seed_bank_url, "--out", str(out)]
    # The smallest budgets that still run every node: one coordinator step, short replies.
    args += ["--max-steps", "1", "--max-new-tokens", "32", "--candidates", "2", "--memory-k", "2"]
    args += ["--methods", ",".join(methods), "--json"]
    assert main(args) == 0
    result = _json(capsys)
    assert [s["method"] for s in result["summaries"]] == list(methods)
    records = [json.loads(x) for x in (out / "records.jsonl").read_text().splitlines()]
    assert len(records) == 2 * len(methods) and all(r["error"] is None for r in records), records
    assert open_bank(seed_bank_url).stats().events == events  # read_only: the bank is untouched
    for r in records:
        assert 0.0 <= r["score"] <= 1.0 and set(r["metrics"]) == set(metrics)
        if r["method"] == "none":
            assert r["sid"] is None and not r["retrieved"] and r["contrastive"] is None
        else:
            DEFAULT_SPEC.parse(r["sid"])
            assert r["retrieved"] and r["contrastive"] is not None
    for s in result["summaries"]:
        assert s["n"] == 2 and s["errors"] == 0 and set(s["metrics"]) == set(metrics)
        # a 95% bootstrap interval over the two tasks around every mean
        lo, hi = s["metrics_ci"]["success_rate"]
        assert lo <= s["success_rate"] <= hi and set(s["metrics_ci"]) >= set(metrics)
        if s["method"] == "none":
            assert s["paired"] == {}
        else:  # each memory method minus none, task by task
            pair = s["paired"]["success_rate"]
            assert pair["n"] == 2 and pair["wins"] + pair["losses"] + pair["ties"] == 2
            assert "contrastive" in s["metrics_ci"]
    assert result["intervals"]["resamples"] >= 1000
    summary = (out / "summary.md").read_text()
    assert all(f"| {m} | 2 |" in summary for m in methods)
    assert (out / "summary.png").read_bytes()[:4] == b"\x89PNG"
    # A rerun into the same folder finds every run recorded and adds nothing.
    assert main(args) == 0
    assert _json(capsys)["summaries"] == result["summaries"]
    assert len((out / "records.jsonl").read_text().splitlines()) == 2 * len(methods)
