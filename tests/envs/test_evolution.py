"""Online evolution pieces without a model: methods, the probe/stream split, the bank copy, CLI."""

from __future__ import annotations

import json

import pytest

from genmem.cli import main
from genmem.envs.base import Task
from genmem.envs.evolution import (
    EvolveConfig,
    ProbeRecord,
    _ProbeReuse,
    _repeatable,
    _split,
    check_evolve_methods,
    working_copy,
)
from genmem.memory.location import open_bank
from tests.graph._banks import one_entry_bank


def test_methods_are_checked() -> None:
    assert check_evolve_methods("sid, frozen,none") == ["sid", "frozen", "none"]
    with pytest.raises(ValueError, match="choose from"):
        check_evolve_methods("sid,bm25")
    with pytest.raises(ValueError, match="once"):
        check_evolve_methods(["sid", "sid"])
    with pytest.raises(ValueError):
        EvolveConfig(blocks=1, block_size=1, probe_size=1, methods=["fresh"])


def _tasks(n: int) -> list[Task]:
    return [Task(id=f"q{i}", query=f"question {i}") for i in range(n)]


def test_split_is_disjoint_fixed_and_reused(tmp_path) -> None:
    cfg = EvolveConfig(blocks=2, block_size=3, probe_size=4, seed=7)
    probe, stream = _split(_tasks(20), cfg, tmp_path)
    assert len(probe) == 4 and len(stream) == 6
    assert not {t.id for t in probe} & {t.id for t in stream}
    ids = [int(t.id[1:]) for t in stream]
    assert ids == sorted(ids)  # the stream keeps file order
    again = _split(_tasks(20), cfg.model_copy(update={"seed": 8}), tmp_path)
    assert again == (probe, stream)  # a resumed run keeps its split, whatever the seed
    other = tmp_path / "other"
    other.mkdir()
    assert _split(_tasks(20), cfg, other) == (probe, stream)  # same seed, same split
    with pytest.raises(ValueError, match="need 10"):
        _split(_tasks(9), cfg, tmp_path / "x")


def test_work_copy_leaves_the_input_bank_alone(tmp_path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    url = one_entry_bank(src, "keep me")
    out = tmp_path / "run"
    out.mkdir()
    work_url = working_copy(url, out)
    work = open_bank(work_url)
    work.revise(work.entries()[0].sid, "changed")
    assert open_bank(url).entries()[0].payload == "keep me"
    assert (
        working_copy(url, out) == work_url and open_bank(work_url).entries()[0].payload == "changed"
    )


def test_evolve_cli_rejects_bad_input(tmp_path, capsys) -> None:
    src = tmp_path / "src"
    src.mkdir()
    url = one_entry_bank(src, "x")
    base = ["evolve", "--bank", url, "--blocks", "2", "--block-size", "2", "--probe-size", "2"]
    out = ["--out", str(tmp_path / "o")]
    assert main([*base, "--dataset", "gsm8k", "--methods", "sid,bm25", *out]) == 2
    assert "choose from" in capsys.readouterr().err
    data = tmp_path / "five.jsonl"
    data.write_text(
        "".join(
            json.dumps({"question": f"{i} + 1?", "answer": f"#### {i + 1}"}) + "\n"
            for i in range(5)
        )
    )
    assert main([*base, "--data", str(data), *out]) == 2
    assert "need 6" in capsys.readouterr().err
    missing = f"sqlite:///{tmp_path}/none.db?bank=nope"
    assert main(["evolve", "--bank", missing, *base[3:], "--dataset", "gsm8k", *out]) == 1
    assert open_bank(url).stats().events == 1  # nothing was written to the input


def test_probe_reuse_repeats_only_runs_with_the_same_inputs() -> None:
    done = ProbeRecord(checkpoint=0, method="none", id="q", score=1.0, seconds=3.0)
    reuse = _ProbeReuse([done])  # a resumed run: rows already written count
    again = reuse.repeat(2, "none", "q")
    assert again is not None and again.reused_from == "t0/none"
    assert (again.checkpoint, again.method, again.score, again.seconds) == (2, "none", 1.0, 0.0)
    assert reuse.repeat(2, "none", "other") is None

    sid0 = ProbeRecord(checkpoint=0, method="sid", id="q", sid="<SID_L1_0>", seconds=2.0)
    reuse.add(sid0)
    for c in (0, 1, 3):  # frozen reads t0 through the sid graph at every checkpoint
        row = reuse.repeat(c, "frozen", "q")
        assert row is not None and row.sid == "<SID_L1_0>" and row.reused_from == "t0/sid"
    assert reuse.repeat(1, "sid", "q") is None  # another snapshot: runs again
    assert reuse.repeat(0, "greedy", "q") is None  # another graph
    assert reuse.repeat(0, "tfidf", "q") is None

    reuse.add(ProbeRecord(checkpoint=0, method="sid", id="f", error="boom"))
    assert reuse.repeat(1, "frozen", "f") is None  # a failed run is never repeated
    reuse.add(again.model_copy(update={"id": "r"}))  # nor is a repeat the source of another
    assert reuse.repeat(3, "none", "r") is None


def test_controls_are_reused_only_for_a_greedy_model() -> None:
    config = EvolveConfig(blocks=1, block_size=1, probe_size=1)

    class Model:
        def __init__(self, temperature: float | None) -> None:
            self.temperature = temperature

    assert _repeatable(Model(0.0), config)
    assert not _repeatable(Model(0.7), config)
    assert not _repeatable(Model(None), config)  # unknown sampling: run everything
    assert not _repeatable(object(), config)
    assert not _repeatable(Model(0.0), config.model_copy(update={"rerun_controls": True}))
