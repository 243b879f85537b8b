"""Property test: any sequence of writes leaves the bank equal to a plain-dict model of it."""

from __future__ import annotations

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from genmem.errors import SlotEmpty, SlotOccupied
from genmem.memory.sid import SIDSpec
from genmem.memory.sqlite_store import SQLiteBankStore
from tests.conftest import TEST_HASH

SPEC = SIDSpec((3, 2, 2))
SIDS = [str(s) for s in SPEC.all_sids()]
sid_st = st.sampled_from(SIDS)
text_st = st.sampled_from(["", "a", "b", "c", "longer text"])


class BankMachine(RuleBasedStateMachine):
    """Drive one SQLite bank and a model side by side."""

    def __init__(self) -> None:
        super().__init__()
        self.bank = SQLiteBankStore(":memory:").create_bank("m", spec=SPEC, codebook_hash=TEST_HASH)
        self.live: dict[str, str] = {}
        self.versions: dict[str, list[str]] = {}
        self.events = 0

    @rule(sid=sid_st, text=text_st)
    def insert(self, sid: str, text: str) -> None:
        if not text:
            return
        try:
            r = self.bank.insert(sid, text)
        except SlotOccupied:
            assert sid in self.live
            return
        assert sid not in self.live
        self.live[sid] = text
        self.versions.setdefault(sid, []).append(text)
        assert r.version_after == len(self.versions[sid])
        self.events += 1

    @rule(sid=sid_st, text=text_st)
    def revise(self, sid: str, text: str) -> None:
        try:
            r = self.bank.revise(sid, text)
        except SlotEmpty:
            assert sid not in self.live
            return
        self.events += 1
        if text == self.live[sid]:
            assert r.outcome == "retained"
            return
        self.versions[sid].append(text)
        if text:
            assert r.outcome == "revised"
            self.live[sid] = text
        else:
            assert r.outcome == "deleted"
            del self.live[sid]

    @rule(sid=sid_st)
    def lookup(self, sid: str) -> None:
        [res] = self.bank.lookup([sid], k=len(SIDS), min_depth=0)
        if sid in self.live:
            assert res.exact and res.hits[0].payload == self.live[sid]
            return
        q = SPEC.parse(sid)
        depths = [q.common_prefix_len(SPEC.parse(s)) for s in self.live]
        best = max(depths, default=None)
        expected = sorted(s for s, d in zip(self.live, depths, strict=True) if d == best)
        assert [h.sid for h in res.hits] == [str(x) for x in sorted(map(SPEC.parse, expected))]

    @invariant()
    def matches_model(self) -> None:
        assert {e.sid: e.payload for e in self.bank.entries()} == self.live
        s = self.bank.stats()
        assert s.events == self.events
        assert s.versions == sum(len(v) for v in self.versions.values())


TestBankMachine = BankMachine.TestCase
TestBankMachine.settings = settings(
    max_examples=60,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
