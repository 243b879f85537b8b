"""Stage-1 examples from a real bank: the five mappings, weights, held-out queries, provenance."""

from __future__ import annotations

from collections import Counter

import pytest

from genmem.envs.bundled import GSM8K_TRAIN, read_gsm8k
from genmem.experiments.seed_bank import reference_experience
from genmem.memory.build import ExperienceRecord, build_bank
from genmem.memory.sid import SIDSpec
from genmem.memory.sqlite_store import SQLiteBankStore
from genmem.policies.prompts import evolver_user_message
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
from tests.fakes import FakeChat

SPEC = SIDSpec((4, 2, 2, 2))


@pytest.fixture(scope="module")
def tokenizer():
    from transformers import AutoTokenizer

    from genmem.policies.local import model_directory

    return AutoTokenizer.from_pretrained(model_directory(None))


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
                "trajectory": "step 1: the discount is 50 * 0.2 = 10",
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

    chat = FakeChat(responses=["\n  Unit rates and totals \nsecond line", "   "])
    describe = model_describer(chat, max_words=3)
    assert describe("Problem type: rates\nsteps") == "Unit rates and..."
    assert describe("Problem type: rates\nsteps") == "rates"  # empty reply: the record's type

    down = FakeChat(responses=[ConnectionError("server down")])
    assert model_describer(down)("Problem type: ages") == "ages"


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
    assert [p.trajectory for p in first.sources] == ["step 1: the discount is 50 * 0.2 = 10"]
    assert first.description == "percentage discounts"
    seed = sources[str(SPEC.make((2, 1, 1, 1)))]
    assert seed.queries and seed.queries[0].startswith("Natalia sold clips")  # GSM8K train #0
    assert seed.sources[0].trajectory and "####" not in seed.sources[0].trajectory


def test_a_qa_seed_source_names_its_question_and_a_bank_without_queries_is_refused(
    tmp_path, tokenizer
) -> None:
    store = SQLiteBankStore(tmp_path / "qa.db")
    qa = store.create_bank("qa", spec=SPEC, codebook_hash=TEST_HASH)
    asked = ["Who directed film A?", "Where was the author of B born?"]
    records = [
        ExperienceRecord(
            text=f"Question form: {q}\nPlan: find each entity in turn.",
            metadata={"source": "qa-train", "index": i, "question": q},  # as the QA seed writes
        )
        for i, q in enumerate(asked)
    ]
    build_bank(qa, records, [SPEC.make((0, 0, 0, 0)), SPEC.make((1, 0, 0, 0))], progress=False)
    assert sorted(q for s in entry_sources(qa) for q in s.queries) == sorted(asked)
    data = alignment_data(entry_sources(qa), tokenizer, AlignDataConfig(heldout=0.5))
    assert len(data.heldout) == 1 and Counter(x.mapping for x in data.train)["query_sid"] == 1

    bare = store.create_bank("bare", spec=SPEC, codebook_hash=TEST_HASH)
    plain = [ExperienceRecord(text=r.text, metadata={"source": "file"}) for r in records]
    build_bank(bare, plain, [SPEC.make((0, 0, 0, 0)), SPEC.make((1, 0, 0, 0))], progress=False)
    with pytest.raises(ValueError, match="name the query they came from"):
        alignment_data(entry_sources(bare), tokenizer, AlignDataConfig(heldout=0.1))
    assert alignment_data(entry_sources(bare), tokenizer, AlignDataConfig(heldout=0.0)).train


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


# Several sources per entry, as a seed or cold-start build leaves them when experiences share an
# SID. Payloads quote their problems the way GSM8K seed digests do ("Problem: <question>"), except
# one abstract lesson; one entry comes from GSM8K training problems (index provenance), whose
# trajectory is the worked reference solution.
_QUOTED = {
    (0, 0, 0, 0): [
        ("A shop sells pens at $3 each. How much do 7 pens cost?", "7 * 3 = 21, so $21."),
        ("Tom reads 12 pages a day. How many pages does he read in a week?", "12 * 7 = 84."),
        ("A tank holds 40 litres and is a quarter full. How much water is in it?", "40/4 = 10."),
    ],
    (1, 0, 0, 0): [
        ("Ann has 5 apples and buys 9 more. How many apples does she have?", "5 + 9 = 14."),
        ("A train travels 60 km in 2 hours. What is its speed?", "60 / 2 = 30 km/h."),
    ],
}
_ABSTRACT = (
    "Sara splits 18 sweets among 3 friends. How many does each get?",
    "Share the total equally: 18 / 3 = 6.",
)


def _norm(text: str) -> str:
    return " ".join(text.split()).casefold()


@pytest.fixture
def merged_bank(tmp_path):
    b = SQLiteBankStore(tmp_path / "m.db").create_bank("m", spec=SPEC, codebook_hash=TEST_HASH)
    records, sids = [], []
    for codes, sources in _QUOTED.items():
        for query, trajectory in sources:
            text = f"Problem: {query}\nProcedure: {trajectory}"
            records.append(
                ExperienceRecord(text=text, metadata={"query": query, "trajectory": trajectory})
            )
            sids.append(SPEC.make(codes))
    records.append(
        ExperienceRecord(
            text="Problem type: equal sharing\nProcedure: divide the total by the head count.",
            metadata={"query": _ABSTRACT[0], "trajectory": _ABSTRACT[1]},
        )
    )
    sids.append(SPEC.make((2, 0, 0, 0)))
    for index, row in enumerate(read_gsm8k(GSM8K_TRAIN, limit=2)):  # as the seed bank builds
        text = reference_experience(row["question"], row["answer"])
        records.append(
            ExperienceRecord(text=text, metadata={"source": "gsm8k-train", "index": index})
        )
        sids.append(SPEC.make((3, 1, 1, 1)))
    build_bank(b, records, sids, progress=False)
    return b


def _recorded() -> list[tuple[str, str, str]]:
    """(sid, query, trajectory) of every source ``merged_bank`` records, in entry order."""
    out = [(str(SPEC.make(c)), q, t) for c, pairs in _QUOTED.items() for q, t in pairs]
    out.append((str(SPEC.make((2, 0, 0, 0))), *_ABSTRACT))
    for row in read_gsm8k(GSM8K_TRAIN, limit=2):
        solution = row["answer"].split("####")[0].strip()
        out.append((str(SPEC.make((3, 1, 1, 1))), row["question"], solution))
    return out


def test_sources_keep_each_query_with_its_own_trajectory(merged_bank) -> None:
    sources = {s.sid: s for s in entry_sources(merged_bank)}
    first = sources[str(SPEC.make((0, 0, 0, 0)))]
    assert [(p.query, p.trajectory) for p in first.sources] == _QUOTED[(0, 0, 0, 0)]
    assert first.queries == [q for q, _ in _QUOTED[(0, 0, 0, 0)]]
    seed = sources[str(SPEC.make((3, 1, 1, 1)))]
    assert seed.sources[0].query.startswith("Natalia sold clips")
    assert seed.sources[1].query.startswith("Weng earns $12")
    assert "48" in seed.sources[0].trajectory and "12" in seed.sources[1].trajectory


def test_no_heldout_query_or_its_trajectory_enters_the_mix(merged_bank, tokenizer) -> None:
    sources = entry_sources(merged_bank)
    pairs = _recorded()
    by_sid: dict[str, list[str]] = {}
    for sid, query, _ in pairs:
        by_sid.setdefault(sid, []).append(query)

    def every_kind(held: set[str]) -> bool:
        return (
            any(qs[0] in held and len(qs) > 1 for qs in by_sid.values())  # a merged entry's first
            and any(q in held for qs in by_sid.values() for q in qs[1:])  # a later source
            and any(q in held for q in by_sid[str(SPEC.make((3, 1, 1, 1)))])  # a GSM8K problem
            and _ABSTRACT[0] in held  # the abstract lesson's query
        )

    # the first seed that holds out every kind of query, so the test keeps its teeth whatever
    # the sampling order
    for seed in range(200):
        data = alignment_data(sources, tokenizer, AlignDataConfig(heldout=0.5, seed=seed))
        held = {p["query"] for p in data.heldout}
        if every_kind(held):
            break
    else:
        pytest.fail("no seed below 200 holds out every kind of query")
    assert len(held) == 4

    leaked = [_norm(q) for q in held] + [_norm(t) for _, q, t in pairs if q in held]
    for x in data.train:
        text = _norm(x.prompt + "\n" + x.completion)
        assert not any(bit in text for bit in leaked), (x.mapping, x.prompt, x.completion)

    # Every trajectory example carries its own query, and every trained source gives one.
    seen = set()
    for x in data.train:
        if x.mapping == "trajectory_sid":
            match = [(q, t) for sid, q, t in pairs if t in x.prompt and sid == x.sid]
            assert len(match) == 1, x.prompt
            query, trajectory = match[0]
            assert evolver_user_message(query, trajectory) in x.prompt
            seen.add((query, trajectory))
    assert seen == {(q, t) for _, q, t in pairs if q not in held}

    # The abstract lesson does not quote its held-out query: the entry is still trained.
    abstract = str(SPEC.make((2, 0, 0, 0)))
    kept = Counter(x.mapping for x in data.train if x.sid == abstract)
    assert kept == Counter(["experience_sid", "sid_experience", "sid_description"])
    # Entries whose payload quotes a held-out query give no payload example.
    quoting = sum(1 for x in sources if any(_norm(q) in _norm(x.payload) for q in held))
    assert quoting >= 2
    assert data.withheld["experience_sid"] == data.withheld["sid_experience"] == quoting
    assert data.withheld["sid_description"] == quoting
    assert data.withheld["trajectory_sid"] == 4 and data.withheld["query_sid"] == 4
    assert {p["query"] for p in data.trained_queries} == {q for _, q, _ in pairs} - held


def test_a_trained_text_that_quotes_a_heldout_query_is_left_out(tmp_path, tokenizer) -> None:
    b = SQLiteBankStore(tmp_path / "q.db").create_bank("q", spec=SPEC, codebook_hash=TEST_HASH)
    quoted = "A farmer has 17 cows and sells 5 of them. How many cows are left on his farm?"
    trained = "How many legs do 4 spiders have?"
    records = [
        ExperienceRecord(
            text="Problem type: counting legs\nProcedure: multiply.",
            metadata={"query": trained, "trajectory": f"Like '{quoted}', multiply: 4 * 8 = 32."},
        ),
        ExperienceRecord(
            text="Problem type: take away\nProcedure: subtract.",
            metadata={"query": quoted, "trajectory": "Take away the 5 sold: 17 - 5 = 12."},
        ),
    ]
    build_bank(b, records, [SPEC.make((0, 0, 0, 0)), SPEC.make((1, 0, 0, 0))], progress=False)
    sources = entry_sources(b)
    seeds = [
        s for s in range(20)
        if alignment_data(sources, tokenizer, AlignDataConfig(heldout=0.5, seed=s)).heldout[0][
            "query"] == quoted
    ]  # fmt: skip
    assert seeds
    data = alignment_data(sources, tokenizer, AlignDataConfig(heldout=0.5, seed=seeds[0]))
    assert not any("17 cows" in x.prompt + x.completion for x in data.train)
    assert Counter(x.mapping for x in data.train)["query_sid"] == 1  # the trained query stays
    assert data.withheld["trajectory_sid"] == 2


LESSONS = [
    "To split a bill evenly, add the tip to the total first, then divide by the number of people.",
    "For distance, multiply speed by time and keep the units the same throughout.",
    "When items come in packs, divide the count needed by the pack size and round up.",
    "For an average, add the values and divide by how many values there are.",
]


@pytest.fixture
def text_bank(tmp_path, monkeypatch):
    """A bank built from plain texts: its entries name no query."""
    from genmem.memory.from_texts import bank_from_texts

    monkeypatch.setenv("GENMEM_CACHE", str(tmp_path / "cache"))
    return bank_from_texts(LESSONS, f"sqlite:///{tmp_path}/t.db?bank=t", sizes=(2, 2, 2, 2)).bank


def test_queries_from_a_file_reach_the_entries_they_name(text_bank, tokenizer) -> None:
    from genmem.training.align_data import QueryPair, with_queries

    sources = entry_sources(text_bank)
    assert not any(s.queries for s in sources)
    some = sources[0].sid
    queries = [
        QueryPair(query="Three friends split a $30 bill. Each pays?", text=LESSONS[0]),
        QueryPair(query="A car drives 2 h at 50 km/h. How far?", text=LESSONS[1]),
        QueryPair(query="What do I look up first?", sid=some),
    ]
    added = with_queries(sources, queries, text_bank)
    by_sid = {s.sid: s for s in added}
    assert "What do I look up first?" in by_sid[some].queries
    # a text names the entry its words were stored in
    holder = next(s for s in added if LESSONS[0] in s.payload)
    assert "Three friends split a $30 bill. Each pays?" in holder.queries
    assert not any(s.queries for s in entry_sources(text_bank))  # the bank is untouched
    data = alignment_data(added, tokenizer, AlignDataConfig(heldout=0.5))
    assert len(data.heldout) == 2 and len(data.trained_queries) == 1  # round(3 * 0.5)
    # --heldout 0: every query is trained, none is measured
    whole = alignment_data(added, tokenizer, AlignDataConfig(heldout=0.0))
    assert whole.heldout == [] and len(whole.trained_queries) == 3


def test_bad_queries_are_refused_by_line(text_bank) -> None:
    from pydantic import ValidationError

    from genmem.training.align_data import QueryPair, with_queries

    with pytest.raises(ValidationError, match="exactly one of 'sid' and 'text'"):
        QueryPair(query="q")
    with pytest.raises(ValidationError, match="exactly one"):
        QueryPair(query="q", sid="<SID_L1_0>", text="t")
    with pytest.raises(ValidationError, match="blank"):
        QueryPair(query="  ", sid="<SID_L1_0>")
    sources = entry_sources(text_bank)
    occupied = {s.sid for s in sources}
    empty = next(
        str(text_bank.spec.make(c))
        for c in [(a, b, x, y) for a in (0, 1) for b in (0, 1) for x in (0, 1) for y in (0, 1)]
        if str(text_bank.spec.make(c)) not in occupied
    )
    with pytest.raises(ValueError, match="query 2 names an empty slot"):
        with_queries(
            sources,
            [QueryPair(query="a", text=LESSONS[0]), QueryPair(query="b", sid=empty)],
            text_bank,
        )
    with pytest.raises(ValueError, match="query 1"):
        with_queries(sources, [QueryPair(query="a", sid="<SID_L1_9>")], text_bank)
