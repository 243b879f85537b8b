"""The SID-symbol experiment: level-first inputs, controls, records, summary, resume."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pytest
from langchain_core.messages import BaseMessage

from genmem.envs.gsm8k import GSM8KEnvironment
from genmem.experiments.plots import plot_symbols
from genmem.experiments.symbols import (
    CONDITIONS,
    SYMBOLIC_HEADER,
    SymbolsConfig,
    conditions_for,
    level_first,
    random_sids,
    run_symbols,
    shuffled_order,
)
from genmem.memory.sid import DEFAULT_SPEC, SID, SIDSpec
from genmem.memory.sqlite_store import SQLiteBankStore
from tests.conftest import TEST_HASH
from tests.fakes import FakeChat, FixedGenerator, by_role, finish_reply

DUCKS = [SID((3, 0, 7, 1)), SID((3, 1, 2, 0))]
"""The SIDs the fake addresser gives the ducks problem (GSM8K test 0), best first."""
OTHER = [SID((9, 4, 0, 5)), SID((3, 0, 7, 2))]
"""... and every other problem."""


def test_level_first_lists_every_first_level_token_before_any_second() -> None:
    sids = [SID((3, 0, 7, 1)), SID((5, 2, 1, 0))]
    assert level_first(sids, 1) == "<SID_L1_3><SID_L1_5>"
    assert level_first(sids, 2) == "<SID_L1_3><SID_L1_5><SID_L2_0><SID_L2_2>"
    assert level_first(sids, 4).endswith("<SID_L3_7><SID_L3_1><SID_L4_1><SID_L4_0>")


def test_conditions_and_controls() -> None:
    assert conditions_for(SymbolsConfig(), 4) == list(CONDITIONS)
    assert "l1_l3" not in conditions_for(SymbolsConfig(), 3)  # it would equal full
    assert conditions_for(SymbolsConfig(conditions=("full",)), 4) == ["raw", "full"]
    ids = [f"t{i}" for i in range(7)]
    order = shuffled_order(ids, seed=0)
    assert sorted(order.values()) == ids and all(order[i] != i for i in ids)
    assert order == shuffled_order(ids, seed=0) != shuffled_order(ids, seed=1)
    assert shuffled_order(["only"], seed=0) == {}
    spec = SIDSpec((4, 2, 2))
    drawn = random_sids(spec, 5, "t0", seed=0)
    assert len(set(drawn)) == 5 and all(s.spec == spec for s in drawn)
    assert drawn == random_sids(spec, 5, "t0", seed=0) != random_sids(spec, 5, "t1", seed=0)
    assert len(random_sids(SIDSpec((2, 1)), 10, "t0", seed=0)) == 2  # the whole space


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"beams": (0,)}, "1 to 50"),
        ({"beams": (5, 5)}, "each k once"),
        ({"conditions": ("full", "l5")}, "unknown conditions"),
        ({"max_steps": 0}, ">= 1"),
    ],
)
def test_bad_settings_are_refused(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        SymbolsConfig(**kwargs)


def by_task() -> FixedGenerator:
    """Two SIDs per problem: :data:`DUCKS` for the ducks problem, :data:`OTHER` otherwise."""
    return FixedGenerator(
        lambda context: DUCKS if "Janet" in context else OTHER, addresser="quantizer"
    )


def _solve(messages: list[BaseMessage]) -> str:
    """As the coordinator, answers the ducks problem (18) only when its support holds the
    problem's own level-4 tokens or the retrieved entry, else 0."""
    text = "\n".join(str(m.content) for m in messages)
    own = "<SID_L4_1>" in text or "Sell the eggs left" in text
    return finish_reply("18" if "Janet" in text and own else "0")


SOLVER = by_role(
    team=_solve, other="<answer>Count the eggs left after breakfast and baking, then sell.</answer>"
)
"""Rewrites as MemRetriever; answers as the coordinator with :func:`_solve`."""


@pytest.fixture
def bank_url(tmp_path) -> str:
    bank = SQLiteBankStore(tmp_path / "bank.db").create_bank(
        "gsm", spec=DEFAULT_SPEC, codebook_hash=TEST_HASH
    )
    bank.insert(DUCKS[0], "Sell the eggs left after what the household uses each day.")
    bank.insert(OTHER[0], "Add the parts, then check the total against the question.")
    return f"sqlite:///{tmp_path}/bank.db?bank=gsm"


def test_every_condition_runs_on_the_same_solver_and_is_paired_with_raw(
    tmp_path, bank_url, errorbars
) -> None:
    env = GSM8KEnvironment(calculator=False)
    out = tmp_path / "symbols"
    gen, chat = by_task(), FakeChat(reply=SOLVER)
    config = SymbolsConfig(beams=(1, 2), max_steps=1)
    report = run_symbols(
        env, bank_url, config, out=out, chat=chat, generator=gen, limit=3, progress=False
    )
    records = [json.loads(x) for x in (out / "records.jsonl").read_text().splitlines()]
    # raw once per task, every other condition once per task and k
    assert Counter((r["condition"], r["k"]) for r in records) == {
        ("raw", 0): 3,
        **{(c, k): 3 for c in CONDITIONS if c != "raw" for k in (1, 2)},
    }
    assert all(r["error"] is None for r in records)
    ducks = {(r["condition"], r["k"]): r for r in records if r["id"] == "test-0"}
    assert ducks[("raw", 0)]["support"] is None and ducks[("raw", 0)]["sids"] == []
    assert ducks[("l1", 2)]["support"] == f"{SYMBOLIC_HEADER}\n<SID_L1_3><SID_L1_3>"
    assert ducks[("l1_l2", 2)]["support"].endswith("<SID_L1_3><SID_L1_3><SID_L2_0><SID_L2_1>")
    assert ducks[("full", 1)]["support"].endswith("<SID_L3_7><SID_L4_1>")
    assert ducks[("full", 2)]["sids"] == [str(s) for s in DUCKS]
    # shuffled: another task's SIDs (every other task has OTHER); random: valid, not its own
    assert ducks[("shuffled", 2)]["sids"] == [str(s) for s in OTHER]
    assert ducks[("random", 2)]["sids"] != ducks[("full", 2)]["sids"]
    assert all(DEFAULT_SPEC.is_valid(s) for s in ducks[("random", 2)]["sids"])
    # the text conditions: the entries of the k SIDs, as they are or rewritten
    assert ducks[("retrieved", 1)]["support"] == (
        "Entry 1:\nSell the eggs left after what the household uses each day."
    )
    assert "<SID_" not in ducks[("retrieved", 2)]["support"]  # text only, no addresses
    assert ducks[("rewrite", 1)]["support_source"] == "rewrite"
    assert ducks[("rewrite", 1)]["support"].startswith("Count the eggs left")

    # the fake solves the ducks problem only with its own full SIDs or its entry
    right = {(r["condition"], r["k"]) for r in records if r["score"] == 1.0}
    assert {c for c, _ in right} == {"full", "retrieved"} and all(
        r["id"] == "test-0" for r in records if r["score"] == 1.0
    )
    assert report.addresser == "quantizer" and report.sid_tokens == "text"
    assert report.tasks == 3 and report.levels == 4 and report.skipped == {}
    full = report.conditions["full"]["2"]
    assert full.score.mean == pytest.approx(1 / 3) and full.vs_raw.wins == 1
    assert report.conditions["raw"]["1"] == report.conditions["raw"]["2"].model_copy(
        update={"k": 1}
    )
    assert report.conditions["raw"]["1"].vs_raw is None
    assert report.conditions["l1"]["1"].vs_raw.diff == 0.0
    saved = json.loads((out / "summary.json").read_text())
    assert list(saved["conditions"]) == list(CONDITIONS)
    assert saved["conditions"]["full"]["1"]["vs_raw"]["wins"] == 1

    plot_symbols(report, out / "symbols.png")
    assert (out / "symbols.png").stat().st_size > 0
    assert len(errorbars) == 2  # one line per k, each with its intervals

    # a rerun into the same folder solves nothing again
    calls = len(gen.calls)
    again = run_symbols(
        env, bank_url, config, out=out, chat=chat, generator=gen, limit=3, progress=False
    )
    assert len((out / "records.jsonl").read_text().splitlines()) == len(records)
    assert (
        again.conditions == report.conditions and len(gen.calls) == calls
    )  # the SIDs come from addresses.jsonl


def test_one_task_cannot_be_shuffled_and_a_crash_scores_zero(tmp_path, bank_url) -> None:
    def crashing(messages: list[BaseMessage]) -> str:
        if "<SID_L4_1>" in "\n".join(str(m.content) for m in messages):
            raise RuntimeError("solver crashed")
        return SOLVER(messages)

    config = SymbolsConfig(beams=(1,), conditions=("full", "shuffled"), max_steps=1)
    env = GSM8KEnvironment(calculator=False)
    report = run_symbols(
        env, bank_url, config, out=tmp_path, chat=FakeChat(reply=crashing), generator=by_task(),
        limit=1, progress=False,
    )  # fmt: skip
    assert list(report.conditions) == ["raw", "full"]
    assert "2 tasks" in report.skipped["shuffled"]
    full = report.conditions["full"]["1"]
    assert (full.errors, full.n, full.score.mean) == (1, 1, 0.0)
