"""Evaluation methods: parsing, and the TF-IDF baseline as an addressing policy."""

from __future__ import annotations

import pytest

from genmem.experiments.methods import PayloadAddresser, check_methods, method_generator
from genmem.memory.location import open_bank
from genmem.memory.sid import SID
from genmem.policies.prompts import retriever_user_message
from tests.graph._banks import A, one_entry_bank

B = SID((5, 1, 2, 3))


def test_check_methods() -> None:
    assert check_methods("none, sid") == ["none", "sid"]
    assert check_methods(["tfidf", "dense"]) == ["tfidf", "dense"]
    for bad in ("", "bm25", "sid,sid"):
        with pytest.raises(ValueError, match="method"):
            check_methods(bad)


def test_sid_and_none_use_the_retrievers_own_decoding() -> None:
    assert method_generator("sid") is None and method_generator("none") is None
    with pytest.raises(ValueError, match="unknown method"):
        method_generator("bm25")  # type: ignore[arg-type]


def test_tfidf_addresser_ranks_by_payload_and_follows_the_bank(tmp_path) -> None:
    bank = open_bank(one_entry_bank(tmp_path, "Divide the distance by the speed to get time."))
    factory = method_generator("tfidf")
    assert factory is not None
    addresser = factory(bank, None)  # type: ignore[arg-type]
    assert isinstance(addresser, PayloadAddresser) and addresser.spec == bank.spec
    # the retriever's user turn, as the graph hands it over: the baselines rank the query alone
    task = retriever_user_message
    assert [c.sid for c in addresser.generate(task("speed and distance"), k=5)] == [str(A)]
    bank.insert(B, "Add the prices of the items, then subtract the discount.")
    found = addresser.generate(task("prices with a discount"), k=5)
    assert found[0].sid == str(B) and addresser.rebuilds == 1  # rebuilt after the write
    assert addresser.generate_batch(["prices", "speed"], k=1)[1][0].sid == str(A)
    assert addresser.rebuilds == 1  # no write since: no rebuild
