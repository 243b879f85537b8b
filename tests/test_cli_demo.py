"""`genmem demo` end to end on the real encoder, codebooks, SQLite bank and bundled data."""

from __future__ import annotations

import json

import pytest

from genmem.cli import main
from genmem.memory.location import open_bank
from genmem.memory.rqkmeans import Codebooks

pytestmark = pytest.mark.slow


def test_demo_runs_end_to_end(tmp_path, capsys) -> None:
    out = tmp_path / "demo"
    code = main(
        [
            "demo",
            "--out",
            str(out),
            "--limit",
            "200",
            "--sizes",
            "8,4,2",
            "--queries",
            "2",
            "--json",
        ]
    )
    assert code == 0
    s = json.loads(capsys.readouterr().out)
    assert s["experiences"] == 200
    assert s["metrics"]["n"] == 200 and 0 < s["metrics"]["used_leaves"] <= 64
    cb = Codebooks.load(out / "codebook")
    assert cb.hash == s["codebook"]["hash"] and cb.spec.sizes == (8, 4, 2)
    bank = open_bank(s["bank"]["url"], codebooks=cb)
    assert bank.stats().entries == s["bank"]["entries"] == s["metrics"]["used_leaves"]
    assert bank.check() == []
    assert len(s["lookups"]) == 2
    for q in s["lookups"]:
        [result] = q["results"]
        assert result["query"] == q["sid"] and result["hits"]
        for h in result["hits"]:
            assert bank.get(h["sid"]).payload == h["payload"]
    assert (out / "code_usage.png").read_bytes()[:4] == b"\x89PNG"
    # the held-out questions are not in the bank's experiences
    texts = (out / "experiences.jsonl").read_text()
    assert all(q["question"][:60] not in texts for q in s["lookups"])


def test_demo_rejects_bad_sizes(tmp_path, capsys) -> None:
    assert main(["demo", "--out", str(tmp_path / "d"), "--sizes", "8,a"]) == 2
    assert "sizes" in capsys.readouterr().err
