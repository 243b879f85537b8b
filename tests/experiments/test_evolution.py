"""Online evolution pieces without a model: methods, the probe/stream split, the bank copy, CLI."""

from __future__ import annotations

import json
from typing import Any

import pytest
import torch
from langchain_core.messages import BaseMessage

from genmem.cli import main
from genmem.envs.base import Environment, Outcome, Task
from genmem.experiments.evolution import (
    EvolveConfig,
    EvolveSummary,
    PooledEvolveSummary,
    ProbeRecord,
    _ProbeReuse,
    _repeatable,
    _split,
    check_evolve_methods,
    run_evolution,
)
from genmem.experiments.evolution_stats import HIT_KEYS
from genmem.memory.bank_copy import working_copy
from genmem.memory.location import open_bank
from tests.experiments.test_evaluate import failing_generator
from tests.fakes import FakeChat, FixedGenerator, by_role, finish_reply
from tests.graph._banks import A, one_entry_bank, revise_reply


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


def test_evolve_cli_rejects_bad_input(tmp_path, capsys) -> None:
    src = tmp_path / "src"
    src.mkdir()
    url = one_entry_bank(src, "x")
    base = ["evolve", "--bank", url, "--blocks", "2", "--block-size", "2", "--probe-size", "2"]
    out = ["--out", str(tmp_path / "o")]
    assert main([*base, "--bench", "gsm8k-test", "--methods", "sid,bm25", *out]) == 2
    assert "choose from" in capsys.readouterr().err
    for flag, value in (("--temperature", "-0.5"), ("--seeds", "0")):
        with pytest.raises(SystemExit) as exit_info:
            main([*base, "--bench", "gsm8k-test", flag, value, *out])
        assert exit_info.value.code == 2 and value in capsys.readouterr().err
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
    assert main(["evolve", "--bank", missing, *base[3:], "--bench", "gsm8k-test", *out]) == 1
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


# -- the whole protocol with fakes: errored probes, intervals, pairs, seeds -----------------------


class _Say(Environment):
    """Ten tasks that ask for one word; the answer "yes" succeeds."""

    name = "say"
    metric_names = ("accuracy",)

    def tasks(self, limit: int | None = None) -> list[Task]:
        return [Task(id=f"s{i}", query=f"Task {i}: say yes.", reference="yes") for i in range(10)]

    def score(self, task: Task, answer: str | None) -> Outcome:
        ok = (answer or "").strip() == "yes"
        return Outcome(score=float(ok), success=ok, metrics={"accuracy": float(ok)})


def coin_chat(temperature: float | None = None) -> FakeChat:
    """Every role in turn; the coordinator says "yes", or with ``temperature`` > 0 flips torch's
    coin (so only a seeded sampler makes a run repeatable)."""

    def say(messages: list[BaseMessage]) -> str:
        word = "yes"
        if temperature:
            word = "yes" if float(torch.rand(1)) < 0.5 else "no"
        return finish_reply(word)

    replies = by_role(
        evolver=revise_reply("Answer with the single word asked for."),
        team=say,
        other="<answer>Say the word.</answer>",
    )
    return FakeChat(reply=replies, temperature=temperature)


def _evolve(tmp_path, **config: Any):
    src = tmp_path / "src"
    src.mkdir(exist_ok=True)
    bank = one_entry_bank(src, "Say what the task asks for.")
    cfg = EvolveConfig(
        blocks=1, block_size=1, probe_size=4, methods=["sid", "frozen"], max_steps=2,
        candidates=1, rerank=False, **config,
    )  # fmt: skip
    probe, _ = _split(_Say().tasks(), cfg, _fresh(tmp_path / "split"))
    return cfg, bank, probe


def _fresh(path):
    path.mkdir(parents=True, exist_ok=True)
    return path


def test_an_errored_probe_is_a_failure_with_intervals_and_pairs(tmp_path) -> None:
    cfg, bank, probe = _evolve(tmp_path)
    crash = probe[0]
    out = tmp_path / "run"
    summary = run_evolution(
        _Say(), cfg, bank_url=bank, out=out, chat=coin_chat(),
        sid_generator=failing_generator(crash.query), progress=False,
        reference_sids={t.id: str(A) for t in probe},
    )  # fmt: skip
    assert isinstance(summary, EvolveSummary)
    rows = [json.loads(x) for x in (out / "probes.jsonl").read_text().splitlines()]
    crashed = [r for r in rows if r["error"]]
    assert {(r["checkpoint"], r["method"], r["id"]) for r in crashed} == {
        (c, m, crash.id) for c in (0, 1) for m in ("sid", "frozen")
    }
    assert all(r["hits"] == dict.fromkeys(HIT_KEYS, False) for r in crashed)
    assert all(r["prefix_depth"] == {"at_1": 0, "at_5": 0} for r in crashed)
    for s in summary.checkpoints:
        # 3 of 4 probe tasks succeed; the crash is a failure, not a task left out.
        assert (s.n, s.errors, s.score, s.success_rate, s.hit_at_1) == (4, 1, 0.75, 0.75, 0.75)
        assert s.ci["score"][0] <= 0.75 <= s.ci["score"][1] and set(s.ci) >= {"hit_at_5"}
        assert s.prefix_hits is not None
        assert [e.mean for e in s.prefix_hits["at_1"]] == [0.75] * 4  # every level of A
    assert [p.checkpoint for p in summary.paired] == [0, 1]
    for pair in summary.paired:
        score = pair.paired["score"]
        assert (score.diff, score.ci, score.ties, score.n) == (0.0, (0.0, 0.0), 4, 4)
    assert summary.stream_score_per_block == [1.0]
    saved = json.loads((out / "summary.json").read_text())
    assert saved["intervals"]["resamples"] >= 1000 and saved["paired"][0]["method"] == "sid"
    md = (out / "summary.md").read_text()
    assert "| sid | task score | 75.0 [" in md and "sid minus frozen" in md
    assert "| sid | errors (as failures) | 1 | 1 |" in md
    for name in ("probe_curves", "sid_minus_frozen"):
        assert open(summary.files[name], "rb").read(4) == b"\x89PNG"


def _probe_rows(folder) -> list[tuple]:
    rows = [json.loads(x) for x in (folder / "probes.jsonl").read_text().splitlines()]
    return [(r["checkpoint"], r["method"], r["id"], r["score"]) for r in rows]


def test_seeds_repeat_a_sampling_run_and_pool_it_by_task(tmp_path) -> None:
    cfg, bank, _ = _evolve(tmp_path, seeds=2)
    out = tmp_path / "run"
    chat = coin_chat(temperature=0.7)
    summary = run_evolution(
        _Say(), cfg, bank_url=bank, out=out, chat=chat, sid_generator=FixedGenerator([A]),
        progress=False,
    )  # fmt: skip
    assert isinstance(summary, PooledEvolveSummary) and summary.decode_seeds == [0, 1]
    seed0, seed1 = _probe_rows(out / "seed0"), _probe_rows(out / "seed1")
    assert seed0 != seed1  # another seed, other samples
    # The same seed draws the same samples again (each run seeds its own sampler).
    again = tmp_path / "again"
    run_evolution(
        _Say(), cfg.model_copy(update={"seeds": 1}), bank_url=bank, out=again, chat=chat,
        sid_generator=FixedGenerator([A]), progress=False,
    )  # fmt: skip
    assert _probe_rows(again) == seed0
    for s in summary.checkpoints:
        scores = [r[3] for r in seed0 + seed1 if r[:2] == (s.checkpoint, s.method)]
        assert (s.n, s.seeds) == (8, 2) and s.score == pytest.approx(sum(scores) / 8)
    assert {p.paired["score"].n for p in summary.paired} == {4}  # pairs by task, not by run
    # At t0 sid and frozen read the same snapshot and share each task's random stream, so
    # they sample alike: the paired difference has no luck of its own.
    assert summary.paired[0].paired["score"].ties == 4
    assert json.loads((out / "summary.json").read_text())["decode_seeds"] == [0, 1]
    assert "x 2 seeds" in (out / "summary.md").read_text()


def test_seeds_with_a_greedy_model_run_once_and_say_so(tmp_path) -> None:
    cfg, bank, _ = _evolve(tmp_path, seeds=3)
    out = tmp_path / "run"
    summary = run_evolution(
        _Say(), cfg, bank_url=bank, out=out, chat=coin_chat(temperature=0.0),
        sid_generator=FixedGenerator([A]), progress=False,
    )  # fmt: skip
    assert isinstance(summary, EvolveSummary) and not (out / "seed0").exists()
    assert summary.note is not None and "greedily" in summary.note
    assert "ran once" in (out / "summary.md").read_text()


def test_a_stream_update_without_its_record_is_undone_before_the_rerun(
    tmp_path, monkeypatch
) -> None:
    """A run stopped after a stream query's update reached the working bank but before its line
    reached stream.jsonl: the rerun runs that query again on the bank as it was before it, so
    the update is applied once, as in a run that was never stopped."""
    from genmem.experiments import evolution

    src = _fresh(tmp_path / "src")
    bank = one_entry_bank(src, "Say what the task asks for.")
    cfg = EvolveConfig(
        blocks=1, block_size=2, probe_size=1, methods=["sid"], max_steps=2, candidates=1,
        rerank=False,
    )  # fmt: skip

    def run(out) -> list[tuple]:
        run_evolution(
            _Say(), cfg, bank_url=bank, out=out, chat=coin_chat(),
            sid_generator=FixedGenerator([A]), progress=False,
        )  # fmt: skip
        work = open_bank(working_copy(bank, out))
        return [(e.op, e.outcome, e.sid, e.version_before, e.version_after) for e in work.events()]

    expected = run(tmp_path / "whole")
    assert [e[1] for e in expected] == ["inserted", "revised", "retained"]

    real = evolution.append_jsonl

    def stopped(path, obj) -> None:  # the first stream record is never written
        if path.name == "stream.jsonl":
            raise KeyboardInterrupt
        real(path, obj)

    out = tmp_path / "stopped"
    monkeypatch.setattr(evolution, "append_jsonl", stopped)
    with pytest.raises(KeyboardInterrupt):
        run(out)
    monkeypatch.setattr(evolution, "append_jsonl", real)
    written = open_bank(working_copy(bank, out)).events()
    assert [e.outcome for e in written] == ["inserted", "revised"]  # the update landed
    assert not (out / "stream.jsonl").exists()

    assert run(out) == expected
    assert not list(out.glob("bank.before-*"))
    rows = [json.loads(x) for x in (out / "stream.jsonl").read_text().splitlines()]
    whole = [json.loads(x) for x in (tmp_path / "whole" / "stream.jsonl").read_text().splitlines()]
    assert [r | {"seconds": 0} for r in rows] == [r | {"seconds": 0} for r in whole]
