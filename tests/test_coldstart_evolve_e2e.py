"""End to end on the embedded model: a cold-start bank (interrupted and resumed), then evolution."""

from __future__ import annotations

import json

import pytest

from genmem.cli import main
from genmem.envs import coldstart
from genmem.memory.location import open_bank

pytestmark = pytest.mark.slow

PNG = b"\x89PNG"


def _lines(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_coldstart_bank_then_online_evolution(tmp_path, monkeypatch, capsys) -> None:
    out = tmp_path / "cold"
    bank = f"sqlite:///{tmp_path}/bank.db?bank=cold"
    args = [
        "bank", "coldstart", "--dataset", "gsm8k", "--limit", "2", "--attempts", "2",
        "--sizes", "2,2,2,2", "--merge", "concat", "--max-steps", "1",
        "--max-new-tokens", "16", "--max-field-chars", "12", "--max-records", "1",
        "--bank", bank, "--out", str(out), "--json",
    ]  # fmt: skip

    # A Ctrl-C after three attempts: what was done stays, the rerun does only the last one.
    real = coldstart._Stages._attempt
    calls: list[int] = []

    def interrupted(self, planner, task, k):
        if len(calls) == 3:
            raise KeyboardInterrupt
        calls.append(k)
        return real(self, planner, task, k)

    monkeypatch.setattr(coldstart._Stages, "_attempt", interrupted)
    assert main(args) == 130
    before = _lines(out / "attempts.jsonl")
    assert len(before) == 3
    monkeypatch.setattr(coldstart._Stages, "_attempt", real)
    capsys.readouterr()
    assert main(args) == 0
    report = json.loads(capsys.readouterr().out)
    attempts = _lines(out / "attempts.jsonl")
    assert attempts[:3] == before and len(attempts) == 4
    assert {(a["query_id"], a["k"]) for a in attempts} == {
        (f"train-{i}", k) for i in range(2) for k in range(2)
    }
    assert all(a["verdict"] in ("success", "failure") for a in attempts)  # references exist
    experiences = _lines(out / "experiences.jsonl")
    failures = _lines(out / "failures.jsonl") if (out / "failures.jsonl").exists() else []
    extracted = {x["query_id"] for x in experiences}
    failed = {f["query_id"] for f in failures if f["stage"] == "extract"}
    assert extracted | failed == {"train-0", "train-1"}  # none dropped silently
    assert report["records"] == len(experiences) and report["attempts"] == 4
    live = open_bank(bank)
    assert report["entries"] == live.stats().entries >= 1
    sources = [s["query_id"] for e in live.entries() for s in e.metadata["sources"]]
    assert sorted(sources) == sorted(x["query_id"] for x in experiences)
    stats = json.loads((out / "stats.json").read_text())
    assert stats["records"] == len(experiences) and stats["entries"] == report["entries"]
    assert len(stats["utilisation"]) == 4
    assert (out / "utilisation.png").read_bytes()[:4] == PNG

    # Online evolution on a copy of that bank: probes, snapshots, logs and plots.
    input_events = [e.model_dump() for e in live.events()]
    input_entries = [e.model_dump() for e in live.entries()]
    ev = tmp_path / "evolve"
    code = main([
        "evolve", "--bank", bank, "--dataset", "gsm8k", "--blocks", "2", "--block-size", "1",
        "--probe-size", "1", "--methods", "sid,frozen", "--max-steps", "1",
        "--max-new-tokens", "16", "--candidates", "2", "--memory-k", "2",
        "--out", str(ev), "--json",
    ])  # fmt: skip
    assert code == 0
    summary = json.loads(capsys.readouterr().out)
    assert [(c["checkpoint"], c["method"]) for c in summary["checkpoints"]] == [
        (t, m) for t in range(3) for m in ("sid", "frozen")
    ]
    assert all(c["n"] == 1 and c["errors"] == 0 for c in summary["checkpoints"])
    assert len(summary["blocks"]) == 2 and len(_lines(ev / "stream.jsonl")) == 2
    for t in range(3):
        assert (ev / "snapshots" / f"t{t}.jsonl").exists()
    for b in (1, 2):
        assert (ev / "logs" / f"block{b}.jsonl").exists()
    for name in summary["files"]:
        if name.endswith(("curves", "lineage", "concentration", "mix", "distance")):
            assert open(summary["files"][name], "rb").read(4) == PNG
    # The input bank was never written; the frozen control read the bank as it was at t0.
    assert [e.model_dump() for e in open_bank(bank).events()] == input_events
    t0 = open_bank(summary["snapshots"][0])
    assert [(e.sid, e.payload) for e in t0.entries()] == [
        (e["sid"], e["payload"]) for e in input_entries
    ]
    frozen = [p for p in _lines(ev / "probes.jsonl") if p["method"] == "frozen"]
    assert len(frozen) == 3 and len({p["sid"] for p in frozen}) == 1
    # Addressing invariance: the policy's own addresses did not move; the run's "occupied"
    # setting may follow inserts, and is reported too.
    assert summary["invariance"]["sid_all"]["identical_fraction"] == 1.0
    assert summary["invariance"]["sid_occupied"]["identical_fraction"] is not None
