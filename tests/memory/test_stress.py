"""The bank under load from several processes: nothing lost, versions whole, the log replays.

A scaled-down version of ``bench/stress.py`` (16 processes x 1,000 operations there), on SQLite
and on the test PostgreSQL server, and proof that the check finds what it looks for.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from genmem.memory.location import open_store
from tests import _postgres
from tests.conftest import TEST_HASH
from tests.memory._stress import (
    STRESS_SPEC,
    StressConfig,
    lookup_throughput,
    run_stress,
    verify,
)

ZERO = ("lost_updates", "version_errors", "replay_errors", "integrity_problems",
        "unexpected_errors")  # fmt: skip


def _bank(url: str) -> str:
    """``url`` (a bank URL) with its bank created, empty, in the stress address space."""
    from genmem.memory.bank_url import parse_bank_url

    bank_id = parse_bank_url(url).bank_id
    open_store(url).create_bank(bank_id, spec=STRESS_SPEC, codebook_hash=TEST_HASH)
    return url


def _sqlite(tmp_path: Path, bank_id: str = "load") -> str:
    return f"sqlite:///{tmp_path / 'stress.db'}?bank={bank_id}"


def _postgresql(tmp_path: Path, bank_id: str = "load") -> str:
    return _postgres.as_url(_postgres.fresh_schema(), bank=bank_id)


@pytest.mark.parametrize("store", [_sqlite, _postgresql], ids=["sqlite", "postgresql"])
def test_mixed_load_from_four_processes_loses_nothing(tmp_path: Path, store) -> None:
    url = _bank(store(tmp_path))
    result = run_stress(url, StressConfig(processes=4, ops=150, sids=4))
    assert result.ops == 600
    assert {k: getattr(result, k) for k in ZERO} == dict.fromkeys(ZERO, 0), result.examples
    # the workers raced: inserts lost to other inserts, each loser refused with SlotOccupied
    assert result.contested_inserts > 0 and result.insert_winners > 0
    assert set(result.outcomes) >= {"inserted", "revised", "retained", "deleted"}
    assert set(result.refusals) <= {
        "insert:SlotOccupied", "revise:SlotEmpty", "revise:VersionConflict",
        "retain:SlotEmpty", "retain:VersionConflict", "delete:SlotEmpty",
        "delete:VersionConflict",
    }  # fmt: skip
    assert result.ops_per_s > 0 and result.p50_ms <= result.p99_ms


def test_the_check_finds_a_lost_write_a_phantom_and_a_torn_history(tmp_path: Path) -> None:
    url = _bank(_sqlite(tmp_path))
    from genmem.memory.location import open_bank

    bank = open_bank(url)
    sid = str(STRESS_SPEC.make((0, 0, 0)))
    done = [bank.insert(sid, "first", actor="w0"), bank.revise(sid, "second", actor="w0")]
    records = [
        {"op": op, "sid": sid, "worker": 0, "payload": text, "ms": 1.0,
         **r.model_dump(include={"outcome", "version_before", "version_after", "seq"})}
        for op, text, r in zip(("insert", "revise"), ("first", "second"), done, strict=True)
    ]  # fmt: skip
    clean = verify(url, records, backend="sqlite", seconds=1.0, processes=1)
    assert (clean.lost_updates, clean.version_errors, clean.replay_errors) == (0, 0, 0)

    # a worker told its revision went through, which the bank does not hold
    claimed = {**records[1], "version_before": 2, "version_after": 3, "payload": "third"}
    lost = verify(url, [*records, claimed], backend="sqlite", seconds=1.0, processes=1)
    assert lost.lost_updates == 1 and "v3 by w0 is not stored" in lost.examples[0]
    # a version no reported write made
    phantom = verify(url, records[:1], backend="sqlite", seconds=1.0, processes=1)
    assert phantom.version_errors == 1

    # a history with a hole: version 1 removed behind the bank's back
    with sqlite3.connect(tmp_path / "stress.db") as db:
        tables = [r[0] for r in db.execute("select name from sqlite_master where type='table'")]
        versions = next(t for t in tables if "version" in t)
        db.execute(f"delete from {versions} where version = 1")
    torn = verify(url, records, backend="sqlite", seconds=1.0, processes=1)
    assert torn.lost_updates == 1 and torn.version_errors >= 1 and torn.integrity_problems >= 1


def test_lookups_go_on_while_writers_write(tmp_path: Path) -> None:
    url = _bank(_sqlite(tmp_path, "reads"))
    out = lookup_throughput(url, readers=2, writers=1, seconds=1.0, sids=4)
    assert out["lookups_per_s_alone"] > 0 and out["lookups_per_s_with_writers"] > 0
    assert out["writes_per_s"] > 0 and out["ratio"] > 0


def test_bad_settings_are_refused() -> None:
    for kwargs in ({"processes": 0}, {"sids": 0}, {"sids": 10_000}, {"mix": (1.0,)}):
        with pytest.raises(ValueError):
            StressConfig(**kwargs)


@pytest.mark.parametrize("store", [_sqlite, _postgresql], ids=["sqlite", "postgresql"])
def test_a_writer_killed_at_random_moments_leaves_exactly_what_it_committed(
    tmp_path: Path, store
) -> None:
    from tests.memory._faults import kill_trials

    url = _bank(store(tmp_path, "kills"))
    result = kill_trials(url, trials=4, seed=1, max_after=0.6)
    assert (result.lost, result.phantoms, result.problems) == (0, 0, 0), result.examples
    assert result.committed > 0
    assert result.in_flight_kept + result.in_flight_dropped <= result.trials


def test_the_kill_check_counts_a_write_that_is_not_there(tmp_path: Path) -> None:
    from genmem.memory.location import open_bank
    from tests.memory._faults import FaultResult, _compare

    bank = open_bank(_bank(_sqlite(tmp_path, "kills")))
    sid = str(STRESS_SPEC.make((0, 0, 0)))
    bank.insert(sid, "seed 7 write 0", actor="k7")
    bank.revise(sid, "seed 7 write 9", actor="k7")  # never announced: a phantom
    lines = [f"intent 0 {sid} seed 7 write 0", "done 0 1", f"intent 1 {sid} seed 7 write 1",
             "done 1 3"]  # fmt: skip
    result = FaultResult("sqlite", 1)
    _compare(bank, 7, lines, result)
    assert (result.committed, result.lost, result.phantoms) == (2, 1, 1)
