"""SIDs: canonical form, strict parsing, prefixes, tokens, the exact regular expression."""

from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from genmem.errors import InvalidSID
from genmem.memory.sid import DEFAULT_SPEC, SID, SIDSpec, coerce_sid

specs = st.lists(st.integers(1, 120), min_size=1, max_size=6).map(lambda s: SIDSpec(tuple(s)))


@st.composite
def spec_and_sid(draw):
    spec = draw(specs)
    codes = tuple(draw(st.integers(0, n - 1)) for n in spec.sizes)
    return spec, SID(codes, spec)


def test_default_spec_numbers() -> None:
    assert DEFAULT_SPEC.sizes == (48, 16, 8, 8)
    assert DEFAULT_SPEC.capacity == 49_152
    assert DEFAULT_SPEC.vocab_size == 80
    tokens = DEFAULT_SPEC.tokens()
    assert len(tokens) == len(set(tokens)) == 80
    assert tokens[0] == "<SID_L1_0>" and tokens[47] == "<SID_L1_47>"
    assert tokens[48] == "<SID_L2_0>" and tokens[-1] == "<SID_L4_7>"
    assert DEFAULT_SPEC.form == "<SID_L1_a><SID_L2_b><SID_L3_c><SID_L4_d>"


@given(spec_and_sid())
def test_round_trip(pair) -> None:
    spec, sid = pair
    text = str(sid)
    assert spec.parse(text) == sid
    assert spec.parse(f"  {text}\n") == sid
    assert spec.is_valid(text)
    assert re.fullmatch(spec.regex(), text)
    assert "".join(sid.tokens()) == text
    assert hash(spec.parse(text)) == hash(sid)


@given(spec_and_sid(), st.data())
def test_rejects_out_of_range_codes(pair, data) -> None:
    spec, sid = pair
    level = data.draw(st.integers(1, spec.levels))
    bad = data.draw(st.integers(spec.sizes[level - 1], spec.sizes[level - 1] + 500))
    tokens = sid.tokens()
    tokens[level - 1] = f"<SID_L{level}_{bad}>"
    text = "".join(tokens)
    with pytest.raises(InvalidSID) as info:
        spec.parse(text)
    assert info.value.token == f"<SID_L{level}_{bad}>"
    assert f"0-{spec.sizes[level - 1] - 1}" in str(info.value)
    assert not spec.is_valid(text) and not re.fullmatch(spec.regex(), text)


def _mutations(sid: SID) -> list[str]:
    toks = sid.tokens()
    text = str(sid)
    out = [
        "",
        "   ",
        text[:-1],  # truncated token
        text + text,  # too many levels
        "".join(toks[:-1]),  # missing level
        " ".join(toks) if len(toks) > 1 else "x" + text,  # space between tokens
        text.replace("<SID_L1_", "<SID_l1_"),
        text.replace("<SID_L1_", "<sid_L1_"),
        text.replace(">", "> ", 1) if len(toks) > 1 else text + "x",
        "[" + text + "]",
        text + ".",
        text.replace("<SID_L1_", "<SID_L1_0"),  # leading zero
        text.replace("<SID_L1_", "<SID_L1_-"),
        text.replace("<SID_L1_", "<SID_L1_+"),
    ]
    if len(toks) > 1:
        out.append("".join([toks[1], toks[0], *toks[2:]]))  # levels out of order
        out.append(toks[0] + toks[0].replace("L1", "L2") + "".join(toks[2:]) + "<SID_L9_0>")
    return out


@given(spec_and_sid())
def test_rejects_every_malformed_variant(pair) -> None:
    spec, sid = pair
    for bad in _mutations(sid):
        with pytest.raises(InvalidSID):
            spec.parse(bad)
        assert not re.fullmatch(spec.regex(), bad)


@pytest.mark.parametrize("value", [None, 12, 3.5, b"<SID_L1_0>", ["<SID_L1_0>"]])
def test_parse_rejects_non_strings(value) -> None:
    with pytest.raises(InvalidSID):
        DEFAULT_SPEC.parse(value)


def test_invalid_sid_is_a_value_error_with_a_useful_message() -> None:
    with pytest.raises(ValueError, match=r"level 2 allows codes 0-15"):
        DEFAULT_SPEC.parse("<SID_L1_0><SID_L2_16><SID_L3_0><SID_L4_0>")
    with pytest.raises(InvalidSID, match=r"expected <SID_L2_\.\.\.>"):
        DEFAULT_SPEC.parse("<SID_L1_0><SID_L3_0><SID_L3_0><SID_L4_0>")
    with pytest.raises(InvalidSID, match="level 4"):
        DEFAULT_SPEC.parse("<SID_L1_0><SID_L2_0><SID_L3_0>")


def test_sid_construction_checks_codes() -> None:
    assert SID(np.array([1, 2, 3, 4])) == SID((1, 2, 3, 4))
    assert isinstance(SID(np.array([1, 2, 3, 4])).codes[0], int)
    for bad in [(1, 2, 3), (1, 2, 3, 8), (-1, 0, 0, 0), (1.5, 0, 0, 0), (True, 0, 0, 0)]:
        with pytest.raises(InvalidSID):
            SID(bad)


def test_ordering_and_hashing() -> None:
    a = DEFAULT_SPEC.make((2, 0, 0, 0))
    b = DEFAULT_SPEC.make((10, 0, 0, 0))
    assert a < b and sorted([b, a]) == [a, b]  # numeric, not string order
    assert len({a, DEFAULT_SPEC.make((2, 0, 0, 0)), b}) == 2
    other = SIDSpec((48, 16, 8, 9)).make((2, 0, 0, 0))
    assert other != a
    with pytest.raises(AttributeError):
        a.codes = (0, 0, 0, 0)  # type: ignore[misc]


def test_prefix_helpers() -> None:
    s = DEFAULT_SPEC.parse("<SID_L1_3><SID_L2_0><SID_L3_7><SID_L4_1>")
    assert s.prefix(2) == (3, 0)
    assert s.prefix_str(2) == "<SID_L1_3><SID_L2_0>"
    assert s.prefix(0) == () and s.prefix_str(4) == str(s)
    t = DEFAULT_SPEC.make((3, 0, 5, 1))
    assert s.common_prefix_len(t) == 2 and s.shares_prefix(t, 2) and not s.shares_prefix(t, 3)
    assert s.common_prefix_len((3, 0, 7, 1)) == 4
    assert DEFAULT_SPEC.parse_prefix("<SID_L1_3><SID_L2_0>") == (3, 0)
    assert DEFAULT_SPEC.parse_prefix("") == ()
    assert DEFAULT_SPEC.prefix_string((3, 0)) == "<SID_L1_3><SID_L2_0>"
    with pytest.raises(InvalidSID):
        DEFAULT_SPEC.parse_prefix("<SID_L2_0>")
    with pytest.raises(ValueError):
        s.prefix(5)


def test_string_prefix_matches_level_prefix() -> None:
    # the bank's prefix queries rely on this property of the canonical form
    a = DEFAULT_SPEC.make((3, 1, 0, 0))
    b = DEFAULT_SPEC.make((30, 1, 0, 0))
    assert not str(b).startswith(a.prefix_str(1))
    assert str(a).startswith(a.prefix_str(1))


def test_coerce() -> None:
    s = DEFAULT_SPEC.make((1, 2, 3, 4))
    assert coerce_sid(s) is s
    assert coerce_sid(str(s)) == s and coerce_sid((1, 2, 3, 4)) == s
    with pytest.raises(InvalidSID):
        coerce_sid(SIDSpec((4, 4)).make((1, 1)))
    with pytest.raises(InvalidSID):
        coerce_sid(12)  # type: ignore[arg-type]


@pytest.mark.parametrize("sizes", [(), (0,), (4, -1), (2.5,), (True,)])
def test_bad_specs(sizes) -> None:
    with pytest.raises(ValueError):
        SIDSpec(sizes)


def test_spec_from_string_and_all_sids() -> None:
    assert SIDSpec.from_string("48,16,8,8") == DEFAULT_SPEC
    assert SIDSpec.from_string("48x24x24").sizes == (48, 24, 24)
    with pytest.raises(ValueError):
        SIDSpec.from_string("48,a")
    small = SIDSpec((3, 2))
    assert [s.codes for s in small.all_sids()] == [(a, b) for a in range(3) for b in range(2)]
    assert sum(1 for t in small.tokens()) == 5
