"""MemEvolver with a code writer: the model only chooses among the writer's candidates (insert on
an empty slot; retain, replace or merge on an occupied one), every write still passes the gate,
the bank's log names the writer, and a run the writer cannot read goes to the model as before."""

from __future__ import annotations

import json
from typing import Any

import pytest

from genmem.graph.evolver import EvolverConfig, build_evolver_graph
from genmem.graph.trajectory import StepRecord, Trajectory
from genmem.memory.location import open_bank
from genmem.memory.records import Update
from genmem.memory.sid import SID
from genmem.policies.experience_writer import (
    ExperienceWriter,
    WriteCandidate,
    choose_candidate,
)
from tests.fakes import FakeChat, FixedGenerator, ScoringChat
from tests.graph._banks import A, one_entry_bank

FAR = SID((40, 2, 2, 2))
OLD = "For rate problems, find the amount per unit first, then scale it."
LESSON = "Rate problems: divide 3 by 2 for the unit price, then multiply by 10 pens."
TRAJECTORY = Trajectory(
    query="Pens cost $3 for 2. How much do 10 cost?",
    steps=[StepRecord(step=0, agent="solver", action="tool", observation="3 / 2 * 10 = 15")],
    answer="15",
    status="finished",
)


def _writer(lesson: str | None = LESSON) -> ExperienceWriter:
    return ExperienceWriter(
        name="test",
        distil=lambda query, trajectory, outcome: lesson,
        merge=lambda stored, new: f"{stored}\n{new}",
    )


def _run(
    chat: Any,
    sid: SID,
    url: str,
    writer: ExperienceWriter | None,
    gen: Any = None,
    rule: str = "mean",  # the model's choice (the default, writer, asks no model)
) -> dict[str, Any]:
    config = EvolverConfig(writer=writer, choice_rule=rule)  # type: ignore[arg-type]
    graph = build_evolver_graph(chat, sid_generator=gen or FixedGenerator([sid]), config=config)
    state = {"query": TRAJECTORY.query, "trajectory": TRAJECTORY.model_dump()}
    return graph.compile().invoke({**state, "outcome": "success"}, context={"bank_url": url})


@pytest.fixture
def bank_url(tmp_path) -> str:
    return one_entry_bank(tmp_path, OLD)


def test_an_empty_slot_gets_the_writers_text_without_asking_the_model(bank_url) -> None:
    chat = FakeChat(responses=[])  # any call would fail: nothing is asked
    gen = FixedGenerator([FAR])
    out = _run(chat, FAR, bank_url, _writer(), gen)
    assert gen.calls == [LESSON]  # addressed by the experience, as a seed bank places entries
    assert out["update"]["outcome"] == "inserted" and out["writer"] == "test"
    assert out["write_choice"] == {
        "chosen": "insert",
        "chooser": "only",
        "candidates": ["insert"],
        "scores": {},
    }
    bank = open_bank(bank_url)
    assert bank.get(FAR).payload == LESSON
    assert bank.events()[-1].actor == "mem_evolver/test"
    assert "by mem_evolver/test" in out["events"][-1]["message"] and chat.prompts == []


@pytest.mark.parametrize(
    ("prefer", "outcome", "stored"),
    [
        (["merge"], "revised", f"{OLD}\n{LESSON}"),
        (["replace"], "revised", LESSON),
        (["retain"], "retained", OLD),
    ],
)
def test_an_occupied_slot_gets_the_candidate_the_model_scores_highest(
    bank_url, prefer, outcome, stored
) -> None:
    chat = ScoringChat(prefer=prefer)
    out = _run(chat, A, bank_url, _writer())
    assert out["update"]["outcome"] == outcome and open_bank(bank_url).get(A).payload == stored
    choice = out["write_choice"]
    assert choice["chooser"] == "likelihood" and choice["chosen"] == prefer[0]
    assert choice["candidates"] == ["retain", "replace", "merge"]
    assert max(choice["scores"], key=choice["scores"].get) == prefer[0]
    # The candidates reach the model as data blocks, and only their labels are scored.
    request = chat.scored[0][-1].content
    assert "<merge>" in request and "Answer with one word: retain, replace, merge" in request
    assert f"{prefer[0]}, the model's choice by likelihood" in out["decision"]["analysis"]


class _LabelBias(ScoringChat):
    """Likes ``retain`` whatever it is shown (its score with nothing shown is higher still)."""

    def choice_logprobs(self, messages: Any, choices: Any) -> list[Any]:
        from genmem.policies.choice_scoring import ChoiceLogProb

        self.scored.append(list(messages))
        nothing_shown = "<retain>" not in str(messages[-1].content)
        table = (
            {"retain": -0.5, "replace": -3.0, "merge": -4.0}
            if nothing_shown
            else {"retain": -1.0, "replace": -3.0, "merge": -2.0}
        )
        return [ChoiceLogProb(table[c], 1) for c in choices]


@pytest.mark.parametrize(("rule", "chosen"), [("mean", "retain"), ("calibrated", "merge")])
def test_a_calibrated_choice_subtracts_each_labels_score_with_nothing_shown(
    bank_url, rule, chosen
) -> None:
    """``calibrated``: retain -1 - (-0.5), replace -3 - (-3), merge -2 - (-4): merge."""
    chat = _LabelBias()
    out = _run(chat, A, bank_url, _writer(), rule=rule)
    assert out["write_choice"]["chosen"] == chosen
    assert len(chat.scored) == (2 if rule == "calibrated" else 1)
    if rule == "calibrated":
        assert out["write_choice"]["scores"] == {"retain": -0.5, "replace": 0.0, "merge": 2.0}
        stateless = chat.scored[0]  # the system prompt, then the request with nothing shown
        assert len(stateless) == 2 and OLD not in str(stateless[-1].content)
        assert "Answer with one word: retain, replace, merge" in str(stateless[-1].content)


def test_a_model_that_cannot_score_gets_merge_by_rule(bank_url) -> None:
    out = _run(FakeChat(responses=[]), A, bank_url, _writer())
    assert out["write_choice"]["chooser"] == "rule" and out["write_choice"]["chosen"] == "merge"
    assert open_bank(bank_url).get(A).payload == f"{OLD}\n{LESSON}"


def test_the_writer_rule_merges_without_asking_the_model_and_else_retains(bank_url) -> None:
    chat = ScoringChat(prefer=["replace"])
    out = _run(chat, A, bank_url, _writer(), rule="writer")
    assert out["write_choice"]["chooser"] == "rule" and out["write_choice"]["chosen"] == "merge"
    assert chat.scored == [] and "the writer's rule" in out["decision"]["analysis"]
    no_merge = ExperienceWriter(name="x", distil=lambda *a: LESSON, merge=lambda s, n: None)
    out = _run(FakeChat(responses=[]), A, bank_url, no_merge)  # cannot score: the same rule
    assert out["write_choice"]["chosen"] == "retain" and out["update"]["outcome"] == "retained"
    assert open_bank(bank_url).get(A).payload == f"{OLD}\n{LESSON}"  # the merge above


def test_the_gate_still_refuses_junk_a_writer_produces(bank_url) -> None:
    out = _run(FakeChat(responses=[]), FAR, bank_url, _writer("1234567890"))
    assert out["update"] is None and out["error"]["kind"] == "gated"
    assert open_bank(bank_url).get(FAR) is None


def test_a_run_the_writer_finds_nothing_in_is_not_written(bank_url) -> None:
    """The model does not write instead: a writer is chosen where its payloads are junk."""
    chat = FakeChat(responses=[json.dumps({"op": "insert", "sid": str(FAR), "payload": LESSON})])
    out = _run(chat, FAR, bank_url, _writer(None))
    assert out["update"] is None and out["error"]["kind"] == "nothing_to_write"
    assert out["sid"] is None and out["retrieved"] == []  # not even addressed
    assert out["events"][-1]["reason"] == "nothing_to_write" and chat.prompts == []
    assert open_bank(bank_url).get(FAR) is None
    out = _run(chat, FAR, bank_url, None)  # no writer: the model decides, as in the paper
    assert out["writer"] is None and out["update"]["outcome"] == "inserted"
    assert open_bank(bank_url).events()[-1].actor == "mem_evolver"


def test_candidates_and_choice_on_bad_input() -> None:
    writer = _writer()
    assert [c.label for c in writer.candidates(LESSON, LESSON)] == ["retain"]
    same_merge = ExperienceWriter(name="x", distil=lambda *a: LESSON, merge=lambda s, n: s)
    assert [c.label for c in same_merge.candidates(LESSON, OLD)] == ["retain", "replace"]
    assert writer.candidates(LESSON, None) == [WriteCandidate("insert", LESSON)]
    with pytest.raises(ValueError, match="non-empty payload"):
        writer.candidates("  ", OLD)
    with pytest.raises(ValueError, match="at least one candidate"):
        choose_candidate(FakeChat(responses=[]), [], [])
    with pytest.raises(ValueError, match="stateless conversation"):
        choose_candidate(ScoringChat(), [], writer.candidates(LESSON, OLD), "calibrated")
    with pytest.raises(ValueError, match="choice_rule='best'"):
        EvolverConfig(choice_rule="best")  # type: ignore[arg-type]


def test_with_a_writer_the_address_is_among_occupied_slots_once_there_are_any(tmp_path) -> None:
    """The run's experience meets the nearest entry like it; an empty bank is addressed anywhere."""
    asked: list[str] = []

    def factory(bank, config):
        asked.append(config.allowed)
        return FixedGenerator([A if config.allowed == "occupied" else FAR])

    for url, allowed in ((one_entry_bank(tmp_path / "one", OLD), "occupied"), (None, "all")):
        if url is None:  # an empty bank of the same spec
            url = one_entry_bank(tmp_path / "empty", OLD)
            bank = open_bank(url)
            bank.apply(Update(op="revise", sid=str(A), payload=""))  # delete: no entries left
        graph = build_evolver_graph(
            ScoringChat(prefer=["merge"]), sid_generator=factory,
            config=EvolverConfig(writer=_writer()),
        )  # fmt: skip
        state = {"query": TRAJECTORY.query, "trajectory": TRAJECTORY.model_dump()}
        out = graph.compile().invoke(state, context={"bank_url": url})
        assert asked[-1] == allowed
        assert out["update"]["outcome"] == ("revised" if allowed == "occupied" else "inserted")
