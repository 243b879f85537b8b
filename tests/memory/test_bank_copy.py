"""Copies of a bank: a run's working copy never touches the bank it was made from."""

from __future__ import annotations

from genmem.memory.bank_copy import working_copy
from genmem.memory.location import open_bank
from tests.graph._banks import one_entry_bank


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
