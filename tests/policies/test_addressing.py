"""Honest default addressing: the codebook registry, the auto rule, the graphs that follow it."""

from __future__ import annotations

import time
from types import SimpleNamespace

import pytest

from genmem.errors import CodebookError
from genmem.graph.retriever import RetrieverConfig, build_retriever_graph
from genmem.memory.codebook_registry import registry_root
from genmem.memory.encoders import DEFAULT_ENCODER_ID, EXPERIENCE_PREFIX, default_encoder
from genmem.memory.rqkmeans import Codebooks, RQKMeans, RQKMeansConfig
from genmem.memory.sqlite_store import SQLiteBankStore
from genmem.policies.addressing import (
    UnalignedPolicyWarning,
    addresser_name,
    check_addresser,
    is_aligned,
    resolve_addresser,
)
from genmem.policies.local import Alignment, PolicyInfo
from tests.conftest import TEST_HASH
from tests.fakes import FakeChat

TEXTS = [
    "Multiply the unit price by the number of items bought.",
    "Convert hours to minutes before adding durations.",
    "Share a total equally by dividing by the number of people.",
    "Work out a percentage discount, then subtract it from the price.",
    "Add the amounts earned on each day to get the weekly total.",
    "Find the age difference first; it stays the same every year.",
]


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("GENMEM_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


@pytest.fixture(scope="module")
def codebooks() -> Codebooks:
    """Codebooks fitted on real MiniLM embeddings of a few lessons (nothing saved)."""
    encoder = default_encoder(prefix=EXPERIENCE_PREFIX)
    cfg = RQKMeansConfig(
        sizes=(3, 2), encoder_id=DEFAULT_ENCODER_ID, encoder_prefix=EXPERIENCE_PREFIX
    )
    return RQKMeans(cfg).fit(encoder.encode(TEXTS), progress=False).codebooks_


def _bank(tmp_path, codebooks: Codebooks, codebook_hash: str | None = None) -> str:
    """A bank of the lessons at their quantised SIDs; returns its URL."""
    store = SQLiteBankStore(tmp_path / "bank.db")
    bank = store.create_bank(
        "b", spec=codebooks.spec, codebook_hash=codebook_hash or codebooks.hash
    )
    encoder = default_encoder(prefix=EXPERIENCE_PREFIX)
    for sid, text in zip(codebooks.sids(encoder.encode(TEXTS)), TEXTS, strict=True):
        if bank.get(sid) is None:
            bank.insert(sid, text)
    return f"sqlite:///{tmp_path}/bank.db?bank=b"


def _policy(codebook_hash: str | None) -> SimpleNamespace:
    alignment = None
    if codebook_hash is not None:
        alignment = Alignment(
            bank_id="b", codebook_hash=codebook_hash, steps=10, examples=40, at=time.time()
        )
    return SimpleNamespace(info=PolicyInfo(base_model="m", alignment=alignment))


def test_saved_or_loaded_codebooks_are_found_again_by_hash(
    cache, tmp_path, codebooks, monkeypatch
) -> None:
    assert Codebooks.recall(codebooks.hash) is None
    codebooks.save(tmp_path / "cb")
    found = Codebooks.recall(codebooks.hash)
    assert found is not None and found.hash == codebooks.hash
    assert (registry_root() / codebooks.hash / "metadata.json").is_file()
    codebooks.save(tmp_path / "cb2")  # a second copy of the same hash is a no-op
    other = tmp_path / "other-cache"
    monkeypatch.setenv("GENMEM_CACHE", str(other))
    Codebooks.load(tmp_path / "cb")  # loading remembers too
    assert (other / "codebooks" / codebooks.hash / "metadata.json").is_file()


def test_auto_generates_only_with_a_policy_aligned_to_these_codebooks(tmp_path, codebooks) -> None:
    bank = SimpleNamespace(codebook_hash=codebooks.hash, bank_id="b")
    assert resolve_addresser("auto", _policy(codebooks.hash), bank) == "generative"
    assert resolve_addresser("auto", _policy("f" * 64), bank) == "quantizer"  # other codebooks
    assert resolve_addresser("auto", _policy(None), bank) == "quantizer"  # never aligned
    assert resolve_addresser("auto", None, bank) == "quantizer"  # no local policy at all
    assert resolve_addresser("quantizer", _policy(codebooks.hash), bank) == "quantizer"
    with pytest.warns(UnalignedPolicyWarning, match="never aligned"):
        assert resolve_addresser("generative", _policy(None), bank) == "generative"
    assert is_aligned(_policy(codebooks.hash), bank) and not is_aligned(None, bank)
    with pytest.raises(ValueError, match="auto, generative, quantizer"):
        check_addresser("beam")
    with pytest.raises(ValueError, match="addresser"):
        RetrieverConfig(addresser="guess")  # type: ignore[arg-type]
    assert addresser_name(object()) == "custom"


def test_the_retriever_quantises_by_default_and_says_so(cache, tmp_path, codebooks) -> None:
    codebooks.save(tmp_path / "cb")  # as a build leaves them: remembered by hash
    url = _bank(tmp_path, codebooks)
    chat = FakeChat(responses=["<answer>use the unit price</answer>"] * 3)
    graph = build_retriever_graph(chat).compile()  # a chat model with no local weights
    query = "Pens cost $2 each. How much do 6 pens cost?"
    out = graph.invoke({"query": query}, context={"bank_url": url})
    assert out["addresser"] == "quantizer"
    encoder = default_encoder(prefix=EXPERIENCE_PREFIX)
    expected = codebooks.sids(encoder.encode([query]))[0]
    assert out["sid"] == str(expected)  # the plain RQ assignment of the query
    with pytest.raises(TypeError, match="non-local chat model"):  # a run may ask to generate
        graph.invoke({"query": query}, context={"bank_url": url, "addresser": "generative"})


def test_unknown_codebooks_are_a_clear_error(cache, tmp_path, codebooks) -> None:
    url = _bank(tmp_path, codebooks, codebook_hash=TEST_HASH)
    graph = build_retriever_graph(FakeChat(responses=["x"])).compile()
    with pytest.raises(CodebookError, match="has not seen"):
        graph.invoke({"query": "How many pens?"}, context={"bank_url": url})
