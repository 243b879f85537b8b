"""Addressing invariance: revising payloads never changes the SIDs a frozen policy generates."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from genmem.memory.sid import DEFAULT_SPEC, SID
from genmem.memory.sqlite_store import SQLiteBankStore
from genmem.policies.local import LocalPolicy
from genmem.policies.sid_decoding import SIDDecodingConfig, TransformersSIDGenerator
from tests.conftest import TEST_HASH

SLOTS = [SID((3, 0, 7, 1)), SID((3, 1, 2, 0)), SID((12, 4, 0, 5)), SID((40, 15, 7, 7))]
CONTEXTS = [
    "Task:\nA farmer has 12 cows and buys 5 more. How many cows?",
    "Task:\nWho directed the film that won the 1998 Palme d'Or?",
    "Task:\nPut the apple in the fridge.",
]
revisions = st.lists(
    st.tuples(
        st.integers(0, len(SLOTS) - 1),
        st.one_of(
            # NUL is refused by every bank (tests/memory cover that), so it is no revision here
            st.text(st.characters(exclude_characters="\x00"), min_size=1, max_size=60).filter(
                str.strip
            ),
            st.just("KEEP"),
        ),
    ),
    min_size=1,
    max_size=6,
)


@pytest.mark.slow
@settings(
    max_examples=4, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(revisions)
def test_revisions_never_move_generated_addresses(
    default_policy: LocalPolicy, tmp_path_factory, edits: list[tuple[int, str]]
) -> None:
    """With frozen weights and codebooks, top-k generated SIDs are the same after any revisions."""
    store = SQLiteBankStore(tmp_path_factory.mktemp("inv") / "bank.db")
    bank = store.create_bank("inv", spec=DEFAULT_SPEC, codebook_hash=TEST_HASH)
    for i, sid in enumerate(SLOTS):
        bank.insert(sid, f"experience number {i}")
    gen = TransformersSIDGenerator(
        default_policy, DEFAULT_SPEC, bank=bank, config=SIDDecodingConfig(allowed="occupied")
    )
    before = [[c.sid for c in cands] for cands in gen.generate_batch(CONTEXTS, k=3)]
    for slot, text in edits:
        current = bank.get(SLOTS[slot])
        assert current is not None
        bank.revise(SLOTS[slot], current.payload if text == "KEEP" else text)
    after = [[c.sid for c in cands] for cands in gen.generate_batch(CONTEXTS, k=3)]
    assert after == before
    assert len(bank.events()) == len(SLOTS) + len(edits)  # the edits did happen
    assert {e.sid for e in bank.entries()} == {str(s) for s in SLOTS}  # and moved nothing
