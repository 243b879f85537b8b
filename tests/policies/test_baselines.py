"""Baseline retrievers: TF-IDF and dense (Chroma) over current payloads, rebuilt on demand;
one end-to-end run of both on real GSM8K text with the real MiniLM."""

from __future__ import annotations

import chromadb
import pytest
from chromadb.config import Settings

from genmem.memory.sid import SIDSpec
from genmem.memory.sqlite_store import SQLiteBankStore
from genmem.policies.baselines import DEFAULT_K, DenseRetriever, TfidfRetriever
from genmem.policies.types import SIDCandidate
from tests.conftest import TEST_HASH
from tests.fakes import HashEncoder, gsm8k_texts

SPEC = SIDSpec((4, 4, 4))
TEXTS = [
    "add the apples and the oranges to count the fruit",
    "subtract the cost of the pen from the money in the wallet",
    "multiply the rows by the columns to count the chairs",
    "divide the cake evenly between the children",
    "check the units before comparing two distances",
    "draw a table of the states and try each transition",
]


def sid(*codes: int) -> str:
    return str(SPEC.make(codes))


SIDS = [sid(i % 4, i // 4, 2) for i in range(len(TEXTS))]


def _bank(texts=TEXTS, sids=SIDS, name="b"):
    b = SQLiteBankStore(":memory:").create_bank(name, spec=SPEC, codebook_hash=TEST_HASH)
    for s, t in zip(sids, texts, strict=True):
        b.insert(s, t)
    return b


def _dense(bank, **kw) -> DenseRetriever:
    return DenseRetriever.from_bank(bank, encoder=HashEncoder(16), **kw)


# --- TF-IDF -------------------------------------------------------------------------------------


def test_tfidf_finds_the_entry_of_a_text():
    r = TfidfRetriever.from_bank(_bank())
    assert r.size == len(TEXTS) and r.sids == sorted(SIDS, key=lambda s: SPEC.parse(s).codes)
    for s, t in zip(SIDS, TEXTS, strict=True):
        out = r.retrieve(t)
        assert out[0].sid == s and out[0].score == pytest.approx(1.0)
        assert all(isinstance(c, SIDCandidate) for c in out)
        scores = [c.score for c in out]
        assert scores == sorted(scores, reverse=True) and all(0 < x <= 1 + 1e-9 for x in scores)
    # "count" ties two entries; the one whose other words match ranks above
    out = r.retrieve("count the chairs")
    assert [c.sid for c in out[:2]] == [SIDS[2], SIDS[0]]


def test_tfidf_k_and_no_shared_terms():
    r = TfidfRetriever.from_bank(_bank())
    assert len(r.retrieve("the", k=2)) == 2
    assert len(r.retrieve("the")) == len(TEXTS) <= DEFAULT_K
    assert r.retrieve("zebra quantum") == []
    assert r.retrieve_batch(["apples", "zebra"], k=3)[1] == []
    assert r.retrieve_batch([]) == []


def test_tfidf_rebuild_follows_revisions_and_deletions():
    b = _bank()
    r = TfidfRetriever.from_bank(b)
    b.revise(SIDS[1], "estimate the travel time from speed and distance")
    assert r.retrieve("travel time speed") == []  # a snapshot until rebuilt
    r.rebuild()
    assert r.retrieve("travel time speed")[0].sid == SIDS[1]
    assert r.retrieve("wallet pen money") == []
    b.revise(SIDS[0], "")
    b.insert(sid(3, 3, 3), "weigh the parcels and sum the weights")
    r.rebuild()
    assert r.size == len(TEXTS) and SIDS[0] not in r.sids and sid(3, 3, 3) in r.sids
    assert SIDS[0] not in [c.sid for c in r.retrieve("apples oranges fruit")]


def test_tfidf_empty_bank_and_unindexable_payloads():
    empty = SQLiteBankStore(":memory:").create_bank("e", spec=SPEC, codebook_hash=TEST_HASH)
    r = TfidfRetriever.from_bank(empty)
    assert r.size == 0 and r.retrieve("apples") == []
    punct = TfidfRetriever.from_bank(_bank(["?!", "..."], SIDS[:2]))
    assert punct.size == 2 and punct.retrieve("?!") == []


def test_bad_input_is_refused():
    r = TfidfRetriever(_bank())
    with pytest.raises(RuntimeError, match="rebuild"):
        r.retrieve("apples")
    r.rebuild()
    for k in (0, -3, 2.5, True):
        with pytest.raises(ValueError, match="k="):
            r.retrieve("apples", k=k)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        r.retrieve_batch("apples")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        r.retrieve(3)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="norm"):
        TfidfRetriever(_bank(), norm="l1")
    with pytest.raises(ValueError, match="batch_size"):
        DenseRetriever(_bank(), encoder=HashEncoder(16), batch_size=0)


# --- dense --------------------------------------------------------------------------------------


def test_dense_finds_the_entry_of_a_text():
    with _dense(_bank()) as r:
        assert r.size == len(TEXTS)
        out = r.retrieve_batch(TEXTS, k=3)
        for s, row in zip(SIDS, out, strict=True):
            assert len(row) == 3 and row[0].sid == s
            assert row[0].score == pytest.approx(1.0, abs=1e-5)
            assert [c.score for c in row] == sorted((c.score for c in row), reverse=True)
        assert len(r.retrieve("anything")) == len(TEXTS)  # k above the size is capped


def test_dense_instances_do_not_share_collections(tmp_path):
    other_texts = ["one thing", "another thing"]
    other_sids = [sid(3, 3, 0), sid(3, 3, 1)]
    a, b = _dense(_bank()), _dense(_bank(other_texts, other_sids, name="o"))
    assert a.collection_name != b.collection_name
    assert {c.sid for c in a.retrieve("one thing")} == set(SIDS)
    assert {c.sid for c in b.retrieve("one thing")} == set(other_sids)
    name = a.collection_name
    a.close()
    listed = [
        c.name
        for c in chromadb.EphemeralClient(
            settings=Settings(anonymized_telemetry=False)
        ).list_collections()
    ]
    assert name not in listed and b.collection_name in listed
    with pytest.raises(RuntimeError, match="rebuild"):
        a.retrieve("one thing")
    b.close()
    with _dense(_bank(), path=tmp_path / "chroma") as p:
        assert p.retrieve(TEXTS[4])[0].sid == SIDS[4]
    assert (tmp_path / "chroma").is_dir()


def test_dense_rebuild_and_empty_bank():
    b = _bank()
    with _dense(b) as r:
        b.revise(SIDS[2], "a brand new strategy")
        assert r.retrieve("a brand new strategy")[0].score < 0.99  # still the old index
        r.rebuild(progress=False)
        top = r.retrieve("a brand new strategy")[0]
        assert top.sid == SIDS[2] and top.score == pytest.approx(1.0, abs=1e-5)
        for s in SIDS:
            b.revise(s, "")
        r.rebuild()
        assert r.size == 0 and r.retrieve("a brand new strategy") == []


# --- real encoder -------------------------------------------------------------------------------


@pytest.mark.slow
def test_real_gsm8k_retrieval_and_rebuild():
    texts = gsm8k_texts(9)
    b = _bank(texts[:8], [sid(i % 4, i // 4, 0) for i in range(8)])
    sids = [sid(i % 4, i // 4, 0) for i in range(8)]
    with TfidfRetriever.from_bank(b) as tfidf, DenseRetriever.from_bank(b) as dense:
        assert dense.encoder.prefix is None and dense.encoder.dim == 384
        for retriever in (tfidf, dense):
            tops = [row[0].sid for row in retriever.retrieve_batch(texts[:8])]
            assert tops == sids
            assert len(retriever.retrieve(texts[0], k=3)) == 3
        b.revise(sids[3], texts[8])
        question = texts[8].split("\n")[0]
        for retriever in (tfidf, dense):
            retriever.rebuild()
            assert retriever.retrieve(question)[0].sid == sids[3]
            assert retriever.retrieve(texts[8])[0].score == pytest.approx(1.0, abs=1e-4)
