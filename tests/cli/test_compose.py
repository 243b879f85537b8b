"""`genmem sid fuse` / `genmem sid decompose`: bad input, and both on the real default model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from genmem.cli import main
from genmem.memory.location import open_bank
from genmem.memory.sid import DEFAULT_SPEC, SID
from genmem.memory.sqlite_store import SQLiteBankStore
from tests.conftest import TEST_HASH

A, B = SID((3, 0, 7, 1)), SID((3, 0, 7, 2))


@pytest.fixture
def small(tmp_path: Path) -> str:
    bank = SQLiteBankStore(tmp_path / "b.db").create_bank(
        "b", spec=DEFAULT_SPEC, codebook_hash=TEST_HASH
    )
    bank.insert(A, "Count the eggs left after breakfast, then sell them at the market.")
    bank.insert(B, "Subtract the milk the family drinks, then price the litres left.")
    bank.snapshot("t0")
    return f"sqlite:///{tmp_path}/b.db?bank=b"


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["fuse", "--sid", str(A)], 2, "exactly two SIDs"),
        (["fuse", "--sid", str(A), "--sid", "<SID_L1_3>"], 2, "not an SID of this bank"),
        (["fuse", "--sid", str(A), "--sid", str(A)], 2, "both SIDs are"),
        (["fuse", "--sid", str(A), "--sid", str(SID((1, 1, 1, 1)))], 1, "is empty"),
        (["decompose", "--sid", str(A)], 1, "no pair"),
        (["decompose", "--sid", str(A), "--neighbours", "9"], 2, "use 2 to 8"),
    ],
)
def test_bad_input_gets_one_line_and_changes_nothing(small, capsys, args, code, message) -> None:
    bank = open_bank(small)
    before = len(bank.events())
    assert main(["sid", *args, "--bank", small]) == code
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1
    assert len(bank.events()) == before


def test_a_read_only_bank_is_refused(small, capsys) -> None:
    args = ["sid", "fuse", "--sid", str(A), "--sid", str(B), "--bank", f"{small}@t0"]
    assert main(args) == 1
    assert "read-only" in capsys.readouterr().err


def _siblings(bank) -> tuple[SID, SID]:
    """Two entries of the bank under the longest shared prefix."""
    entries = [bank.sid(e.sid) for e in bank.entries()]
    pairs = [(a, b) for i, a in enumerate(entries) for b in entries[i + 1 :]]
    return max(pairs, key=lambda p: p[0].common_prefix_len(p[1]))


@pytest.mark.slow
def test_fuse_and_decompose_on_the_real_model(seed_bank_url: str, capsys) -> None:
    bank = open_bank(seed_bank_url)
    a, b = _siblings(bank)
    before = {str(e.sid): e.payload for e in bank.entries()}
    args = ["sid", "fuse", "--bank", seed_bank_url, "--sid", str(a), "--sid", str(b)]
    assert main([*args, "--max-new-tokens", "96", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    # the default policy is not aligned: the quantizer addresses the fused entry
    assert out["addresser"] == "quantizer" and bank.spec.is_valid(out["sid"])
    assert out["outcome"] in ("inserted", "revised", "retained", "rejected")
    assert [s["sid"] for s in out["sources"]] == [str(a), str(b)]
    written = bank.get(out["sid"])
    if out["outcome"] in ("inserted", "revised"):
        assert written.payload == out["payload"] and written.metadata["composed"]["by"] == "fuse"
    else:  # refused or unchanged: the slot holds what it held, and the log says why
        assert (written.payload if written else None) == before.get(out["sid"])
        assert out["outcome"] == "retained" or out["reason"]
    assert all(bank.get(s) is not None for s in before)  # nothing lost

    args = ["sid", "decompose", "--bank", seed_bank_url, "--sid", str(a), "--neighbours", "2"]
    code = main([*args, "--max-new-tokens", "48", "--json"])
    captured = capsys.readouterr()
    if code == 0:
        out = json.loads(captured.out)
        assert len(out["pairs"]) == 1 and out["chosen"] == out["pairs"][0]["sids"]
        assert out["sid"] == str(a) and out["outcome"] in ("revised", "retained", "rejected")
    else:  # the small judge may give no score: one line, nothing written
        assert code == 1 and "judge gave no score" in captured.err
    assert all(bank.get(s) is not None for s in before)
