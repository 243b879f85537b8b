"""Stage-1 examples from a real bank: the five mappings, weights, held-out queries, provenance."""

from __future__ import annotations

from collections import Counter

import pytest

from genmem.memory.build import ExperienceRecord, build_bank
from genmem.memory.sid import SIDSpec
from genmem.memory.sqlite_store import SQLiteBankStore
from genmem.policies.sid_decoding import ADDRESS_PROMPT
from genmem.training.align_data import (
    MAPPINGS,
    AlignDataConfig,
    alignment_data,
    describe_payload,
    entry_sources,
    model_describer,
)
from tests.conftest import TEST_HASH

SPEC = SIDSpec((4, 2, 2, 2))


@pytest.fixture(scope="module")
def tokenizer():
    from transformers import AutoTokenizer

    from genmem.policies.local import _default_dir

    return AutoTokenizer.from_pretrained(_default_dir())


@pytest.fixture
def bank(tmp_path):
    b = SQLiteBankStore(tmp_path / "b.db").create_bank("t", spec=SPEC, codebook_hash=TEST_HASH)
    records = [
        ExperienceRecord(
            text="Problem type: percentage discounts\nProcedure: subtract the discount.",
            metadata={
                "source": "gsm8k",
                "query_id": "q0",
                "query": "What is 20% off $50?",
                "trajectory": "step 1: 50 * 0.2 = 10",
            },
        ),
        ExperienceRecord(
            text="Problem type: unit rates\nProcedure: divide total by count.",
            metadata={"source": "gsm8k", "query_id": "q1", "query": "Rate of 60 km in 2 h?"},
        ),
        ExperienceRecord(
            text="Problem: Natalia sold clips. Procedure that solved it: add.",
            metadata={"source": "gsm8k-train", "index": 0},  # the seed bank's provenance
        ),
    ]
    sids = [SPEC.make((0, 0, 0, 0)), SPEC.make((1, 0, 0, 0)), SPEC.make((2, 1, 1, 1))]
    build_bank(b, records, sids, progress=False)
    return b


def test_describe_payload() -> None:
    assert describe_payload("Problem type: unit rates\nmore") == "unit rates"
    assert describe_payload("Problem: A farmer has 3 cows. He buys 2.") == "A farmer has 3 cows."
    long = "word " * 40
    assert describe_payload(long, max_words=5) == "word word word word word..."


def test_model_describer_keeps_one_clipped_line_and_falls_back() -> None:
    from langchain_core.language_models.fake_chat_models import FakeListChatModel

    chat = FakeListChatModel(responses=["\n  Unit rates and totals \nsecond line", "   "])
    describe = model_describer(chat, max_words=3)
    assert describe("Problem type: rates\nsteps") == "Unit rates and..."
    assert describe("Problem type: rates\nsteps") == "rates"  # empty reply: the record's type

    class Down(FakeListChatModel):
        def invoke(self, *args, **kwargs):
            raise ConnectionError("server down")

    assert model_describer(Down(responses=["x"]))("Problem type: ages") == "ages"


@pytest.mark.slow
def test_model_describer_on_the_default_model() -> None:
    from genmem.policies.backends import capped_chat_model

    describe = model_describer(capped_chat_model("local", 32, temperature=0.0))
    text = describe("Procedure: add the apples bought to those owned, then check the sum.")
    assert text and "\n" not in text and len(text.split()) <= 25


def test_sources_read_queries_and_trajectories_from_metadata(bank) -> None:
    sources = {s.sid: s for s in entry_sources(bank)}
    first = sources[str(SPEC.make((0, 0, 0, 0)))]
    assert first.queries == ["What is 20% off $50?"]
    assert first.trajectories == ["step 1: 50 * 0.2 = 10"]
    assert first.description == "percentage discounts"
    seed = sources[str(SPEC.make((2, 1, 1, 1)))]
    assert seed.queries and seed.queries[0].startswith("Natalia sold clips")  # GSM8K train #0
    assert seed.trajectories and "####" not in seed.trajectories[0]


def test_all_five_mappings_with_inference_prompts(bank, tokenizer) -> None:
    data = alignment_data(entry_sources(bank), tokenizer, AlignDataConfig(heldout=0.0))
    counts = Counter(x.mapping for x in data.train)
    assert set(counts) == set(MAPPINGS) and data.heldout == []
    assert counts["experience_sid"] == counts["sid_experience"] == 3 == data.entries
    for x in data.train:
        if x.mapping.endswith("_sid"):
            assert x.completion == x.sid and ADDRESS_PROMPT in x.prompt
            assert x.prompt.rstrip().endswith("assistant")  # ends where the SID starts
        else:
            assert x.sid in x.prompt and x.completion and x.completion != x.sid


def test_weights_and_heldout_queries(bank, tokenizer) -> None:
    cfg = AlignDataConfig(
        weights={"query_sid": 2.0, "experience_sid": 1.0, "sid_description": 0.0}, heldout=0.34
    )
    data = alignment_data(entry_sources(bank), tokenizer, cfg)
    counts = Counter(x.mapping for x in data.train)
    assert counts["sid_description"] == 0 and counts["trajectory_sid"] == 0
    assert len(data.heldout) == 1 and len(data.trained_queries) == 2
    held = data.heldout[0]["query"]
    assert counts["query_sid"] == 2 * 2  # two trained queries, twice each
    assert not any(held in x.prompt for x in data.train if x.mapping == "query_sid")
    again = alignment_data(entry_sources(bank), tokenizer, cfg)
    assert [x.prompt for x in again.train] == [x.prompt for x in data.train]  # seeded


@pytest.mark.parametrize(
    ("weights", "message"),
    [({"query_sid": -1.0}, ">= 0"), (dict.fromkeys(MAPPINGS, 0.0), "at least one")],
)
def test_bad_weights(weights, message) -> None:
    with pytest.raises(ValueError, match=message):
        AlignDataConfig(weights=weights)


def test_empty_bank_is_refused(tmp_path, tokenizer) -> None:
    empty = SQLiteBankStore(tmp_path / "e.db").create_bank("e", spec=SPEC, codebook_hash=TEST_HASH)
    with pytest.raises(ValueError, match="no entries"):
        alignment_data(entry_sources(empty), tokenizer)
