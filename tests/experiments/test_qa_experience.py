"""QA seed experiences: the question's form without its names, a plan by kind, and the QA bank."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from pydantic import ValidationError

from genmem.envs.qa_experience import qa_abstract_experience, qa_form, qa_seed_rows
from genmem.experiments.seed_bank import SeedBankConfig, build_seed_bank, seed_pairs
from genmem.memory.location import open_bank


@pytest.mark.parametrize(
    ("question", "form", "kind"),
    [
        (
            "Who is the mother of the director of film Polish-Russian War (Film)?",
            "Who is the mother of the director of film A?",
            "chain",
        ),
        (
            "Which film came out first, Blind Shaft or The Mask Of Fu Manchu?",
            "Which film came out first, A or B?",
            "comparison",
        ),
        (
            "Are North Marion High School (Oregon) and Seoul High School both located in the "
            "same country?",
            "Are A and B both located in the same country?",
            "yes_no",
        ),
        (
            "Where was the father of Ștefan I. Nenițescu born?",
            "Where was the father of A born?",
            "chain",
        ),
        (
            "Who is Charles Bretagne Marie De La Trémoille's paternal grandfather?",
            "Who is A's paternal grandfather?",
            "chain",
        ),
        (
            'The director of the romantic comedy "Big Stone Gap" is based in what New York city?',
            "The director of the romantic comedy A is based in what B city?",
            "chain",
        ),
        (
            "In 1995, did Ed Wood and Tim Burton both make films in 1995?",
            "In n1, did A and B both make films in n1?",
            "yes_no",
        ),
    ],
)
def test_question_forms_hide_names_and_numbers(question: str, form: str, kind: str) -> None:
    got = qa_form(question)
    assert (got.form, got.kind) == (form, kind)


def test_the_answer_kind_comes_from_the_question() -> None:
    assert qa_form("Where was the director of film X born?").answer_type == "a place"
    assert qa_form("Who is older, Annie Morton or Terry Richardson?").kind == "comparison"
    assert (
        qa_form("Are Local H and For Against both from the United States?", ["yes"]).answer_type
        == "yes or no"
    )
    assert (
        qa_form("Which airplane was this Major test-flying?").answer_type
        == "the airplane asked for"
    )
    assert qa_form("When did John V, Prince Of Anhalt-Zerbst's father die?").hops == 2


def test_every_qa_seed_experience_passes_the_gate_without_its_names() -> None:
    from genmem.memory.gate import check_payload

    rows = qa_seed_rows()
    assert len(rows) == 300 and rows[0]["id"] == "hotpotqa-100" and rows[-1]["id"] == "2wiki-199"
    for row in rows:
        text = qa_abstract_experience(row["question"], [row["answer"]])
        assert check_payload(text, sources=[row["question"]]).passed, text
        assert row["question"] not in text, text
        if row["answer"] not in ("yes", "no"):
            assert not re.search(rf"\b{re.escape(row['answer'])}\b", text), text


def test_qa_banks_are_abstract_and_sized_to_their_source() -> None:
    with pytest.raises(ValidationError, match="abstract experiences only"):
        SeedBankConfig(source="qa", distill="procedure", size=10, fit_size=48)
    with pytest.raises(ValidationError, match="has 300 questions"):
        SeedBankConfig(source="qa", distill="abstract", size=301, fit_size=48)
    gsm = SeedBankConfig(distill="abstract", size=10, fit_size=48)
    qa = SeedBankConfig(source="qa", distill="abstract", size=10, fit_size=48)
    assert gsm.key().startswith("abstract-10-") and qa.key().startswith("qa-abstract-10-")


@pytest.mark.slow
def test_a_qa_bank_and_its_pairs(tmp_path: Path) -> None:
    from genmem.experiments.retrieval_eval import RetrievalPair, query_payload_overlap

    cfg = SeedBankConfig(source="qa", distill="abstract", size=60, fit_size=60, sizes=(8, 4))
    built = build_seed_bank(cfg, root=tmp_path, progress=False)
    bank = open_bank(built.url)
    assert built.bank_id.startswith("qa-seed-") and built.rejected == {}
    pairs = seed_pairs(bank)
    assert len(pairs) == 60  # one per question, also where questions share an entry
    questions = {r["question"] for r in qa_seed_rows()[:60]}
    assert {p["query"] for p in pairs} == questions
    for pair in pairs:
        payload = bank.get(pair["reference_sid"]).payload
        assert pair["query"] not in payload and "Question form: " in payload
    overlap = query_payload_overlap([RetrievalPair(**p) for p in pairs], bank)
    assert overlap["verbatim"] == 0


def test_an_evaluation_refuses_a_bank_built_from_its_tasks(tmp_path: Path) -> None:
    from genmem.envs.base import Task
    from genmem.errors import BankHoldsTasks
    from genmem.experiments.contamination import check_bank_is_clean, tasks_in_bank
    from genmem.memory.sid import DEFAULT_SPEC
    from genmem.memory.sqlite_store import SQLiteBankStore
    from tests.conftest import TEST_HASH

    store = SQLiteBankStore(tmp_path / "b.db")
    bank = store.create_bank("qa", spec=DEFAULT_SPEC, codebook_hash=TEST_HASH)
    row = qa_seed_rows()[0]
    source = {"source": "qa-train", "index": 0, "question": row["question"]}
    text = qa_abstract_experience(row["question"])
    bank.insert((1, 2, 0, 0), text, metadata={"sources": [source]})
    inside = Task(id=row["id"], query="  " + row["question"].upper())  # case and spacing aside
    outside = Task(id="hotpotqa-0", query="Were Scott Derrickson and Ed Wood of one nationality?")
    assert tasks_in_bank(bank, [inside, outside]) == [row["id"]]
    check_bank_is_clean(bank, [outside])
    before = bank.stats().events
    with pytest.raises(BankHoldsTasks, match=r"built from 1 of the 2 tasks \(hotpotqa-100\)"):
        check_bank_is_clean(bank, [inside, outside])
    assert bank.stats().events == before
