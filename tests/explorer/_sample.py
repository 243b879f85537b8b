"""A small bank with everything the explorer shows: prefixes, revisions, a deletion, a gate
refusal, several actors and a hostile payload."""

from __future__ import annotations

from genmem.memory.bank import Bank
from genmem.memory.gate import WriteGate
from genmem.memory.location import open_store
from genmem.memory.sid import DEFAULT_SPEC

TEST_HASH = "0" * 64

HOSTILE = (
    '</textarea></pre><script>alert("owned")</script><img src=x onerror="alert(1)"> '
    "{{ 7*7 }} & <b>bold</b> --> ]]>"
)
"""A payload that breaks out of every element the pages put text in, if printed unescaped."""

REVISED = "3-0-6-1"
"""The slot with three versions (two revisions)."""
DELETED = "3-0-2-5"
"""The slot whose entry was deleted."""
HOSTILE_AT = "5-1-0-0"


def sid(bank: Bank, path: str) -> str:
    """SID tokens of a dash path such as 3-0-7-1."""
    return str(bank.spec.make(int(c) for c in path.split("-")))


def populate(bank: Bank) -> Bank:
    """Fill ``bank`` (default spec) with the sample content; returns it."""
    for a in range(3, 6):
        for b in range(2):
            for c in range(0, 8, 2 if a == 3 else 4):
                for d in (1, 5):
                    bank.insert(
                        sid(bank, f"{a}-{b}-{c}-{d}"),
                        f"When a task mentions unit prices for item {a}{b}{c}{d}, first list "
                        "each quantity, then multiply before adding totals.",
                        actor="build",
                    )
    bank.revise(
        sid(bank, REVISED),
        "When a task mentions unit prices, list each quantity and its price, multiply, then "
        "add the totals and check the sum against the question.",
        actor="evolver",
    )
    bank.revise(
        sid(bank, REVISED),
        "When a task mentions unit prices, list each quantity and its price, multiply, then "
        "add the totals; round money to cents only at the end.",
        actor="evolver",
    )
    bank.revise(sid(bank, DELETED), "", actor="evolver")
    bank.revise(sid(bank, "4-1-4-5"), "!!! ??? ...", actor="evolver", gate=WriteGate())
    bank.insert(sid(bank, HOSTILE_AT), HOSTILE, actor="api")
    return bank


def sample_bank(path: str) -> tuple[str, Bank]:
    """A sample bank in a new SQLite file; returns its URL and the bank."""
    url = f"sqlite:///{path}?bank=sample"
    store = open_store(url)
    bank = store.create_bank("sample", spec=DEFAULT_SPEC, codebook_hash=TEST_HASH)
    return url, populate(bank)
