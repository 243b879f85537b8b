"""Symbolic Identifiers: the address type of a GenMem bank.

An SID is a tuple of ``L`` discrete codes, one per level, each drawn from that level's codebook.
Its canonical text form is ``<SID_L1_a><SID_L2_b>...``: levels 1-based and in order, codes
0-based, written without leading zeros. Each level has its own tokens, so ``<SID_L1_3>`` and
``<SID_L2_3>`` are different symbols; a spec of sizes ``(48, 16, 8, 8)`` needs 80 tokens for
49,152 addresses.

Because every token ends with ``>``, the canonical string of a depth-``l`` prefix is a plain
string prefix of the canonical string of every SID under it; the bank's prefix queries rely on
that.
"""

from __future__ import annotations

import itertools
import operator
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from genmem.errors import InvalidSID

__all__ = ["DEFAULT_SIZES", "DEFAULT_SPEC", "SID", "SIDSpec", "coerce_sid"]

DEFAULT_SIZES: tuple[int, ...] = (48, 16, 8, 8)

_TOKEN_RE = re.compile(r"<SID_L(\d+)_(\d+)>")


def _number_alternation(n: int) -> str:
    """A regex group matching exactly the decimal numbers 0..n-1 without leading zeros."""
    return "(?:" + "|".join(str(c) for c in range(n - 1, -1, -1)) + ")"


@dataclass(frozen=True, order=True)
class SIDSpec:
    """The shape of an address space: one codebook size per level."""

    sizes: tuple[int, ...] = DEFAULT_SIZES
    """Codebook size per level, level 1 first; every size >= 1, at least one level."""

    def __post_init__(self) -> None:
        sizes = tuple(self.sizes)
        if not sizes:
            raise ValueError("SIDSpec needs at least one level, e.g. sizes=(48, 16, 8, 8)")
        for i, n in enumerate(sizes, start=1):
            if isinstance(n, bool) or not isinstance(n, int) or n < 1:
                raise ValueError(
                    f"SIDSpec level {i} has size {n!r}; every level size must be an int >= 1"
                )
        object.__setattr__(self, "sizes", sizes)

    @classmethod
    def from_string(cls, text: str) -> SIDSpec:
        """Parse sizes written as ``48,16,8,8`` or ``48x16x8x8``."""
        parts = [p for p in re.split(r"[,x×\s]+", text.strip()) if p]
        try:
            sizes = tuple(int(p) for p in parts)
        except ValueError:
            raise ValueError(
                f"codebook sizes {text!r} are not integers; write them like '48,16,8,8'"
            ) from None
        return cls(sizes)

    def __str__(self) -> str:
        return "x".join(str(n) for n in self.sizes)

    @property
    def levels(self) -> int:
        """Number of levels ``L``."""
        return len(self.sizes)

    @property
    def capacity(self) -> int:
        """Number of distinct addresses, the product of the level sizes."""
        out = 1
        for n in self.sizes:
            out *= n
        return out

    @property
    def vocab_size(self) -> int:
        """Number of level tokens, the sum of the level sizes."""
        return sum(self.sizes)

    def token(self, level: int, code: int) -> str:
        """The token for ``code`` at 1-based ``level``."""
        if not 1 <= level <= self.levels:
            raise InvalidSID(
                f"level {level} does not exist; spec {self} has levels 1-{self.levels}",
                text=level,
            )
        if not 0 <= code < self.sizes[level - 1]:
            raise InvalidSID(
                f"code {code} is out of range at level {level}; "
                f"allowed 0-{self.sizes[level - 1] - 1} (spec {self})",
                text=code,
            )
        return f"<SID_L{level}_{code}>"

    def level_tokens(self, level: int) -> list[str]:
        """All tokens of one 1-based level, in code order."""
        return [self.token(level, c) for c in range(self.sizes[level - 1])]

    def tokens(self) -> list[str]:
        """All level tokens of the spec, level 1 first (the symbols added to a tokenizer)."""
        return [t for level in range(1, self.levels + 1) for t in self.level_tokens(level)]

    @property
    def form(self) -> str:
        """A human-readable template, e.g. ``<SID_L1_a><SID_L2_b><SID_L3_c><SID_L4_d>``."""
        letters = "abcdefghijklmnopqrstuvwxyz"
        return "".join(f"<SID_L{i}_{letters[(i - 1) % 26]}>" for i in range(1, self.levels + 1))

    def regex(self) -> str:
        """A regular expression (no anchors) matching exactly the canonical SIDs of this spec."""
        return self._regex

    @cached_property
    def _regex(self) -> str:
        return "".join(f"<SID_L{i}_{_number_alternation(n)}>" for i, n in enumerate(self.sizes, 1))

    @cached_property
    def _compiled(self) -> re.Pattern[str]:
        return re.compile(self._regex)

    def is_valid(self, text: str) -> bool:
        """True when ``text`` is exactly one canonical SID of this spec (no whitespace)."""
        return self._compiled.fullmatch(text) is not None

    def _codes_from_text(self, text: Any, *, exact: bool) -> tuple[int, ...]:
        if not isinstance(text, str):
            raise InvalidSID(
                f"an SID must be a string like {self.form}, got {type(text).__name__}",
                text=text,
            )
        body = text.strip()
        codes: list[int] = []
        pos = 0
        while pos < len(body):
            m = _TOKEN_RE.match(body, pos)
            if m is None:
                nxt = body.find("<", pos + 1)
                junk = body[pos : nxt if nxt > 0 else len(body)]
                raise InvalidSID(
                    f"unexpected text {junk!r} in SID {text!r}: only tokens like "
                    f"<SID_L1_0> are allowed; expected form {self.form} (spec {self})",
                    text=text,
                    token=junk,
                )
            tok, level_s, code_s = m.group(0), m.group(1), m.group(2)
            level = len(codes) + 1
            if level > self.levels:
                raise InvalidSID(
                    f"extra token {tok!r} in SID {text!r}: spec {self} has exactly "
                    f"{self.levels} levels; expected form {self.form}",
                    text=text,
                    token=tok,
                )
            if level_s != str(level):
                raise InvalidSID(
                    f"token {tok!r} is at position {level} of SID {text!r} but names level "
                    f"{level_s}; levels must appear in order 1..{self.levels} "
                    f"(expected <SID_L{level}_...>)",
                    text=text,
                    token=tok,
                )
            n = self.sizes[level - 1]
            if code_s != str(int(code_s)) or not 0 <= int(code_s) < n:
                raise InvalidSID(
                    f"token {tok!r} in SID {text!r} has code {code_s}; level {level} allows "
                    f"codes 0-{n - 1} written without leading zeros (spec {self})",
                    text=text,
                    token=tok,
                )
            codes.append(int(code_s))
            pos = m.end()
        if exact and len(codes) != self.levels:
            missing = len(codes) + 1
            raise InvalidSID(
                f"SID {text!r} has {len(codes)} of {self.levels} levels; level {missing} "
                f"(<SID_L{missing}_...>) is missing; expected form {self.form}",
                text=text,
            )
        return tuple(codes)

    def parse(self, text: str) -> SID:
        """Parse one canonical SID strictly; surrounding whitespace is allowed, nothing else."""
        return SID(self._codes_from_text(text, exact=True), self)

    def parse_prefix(self, text: str) -> tuple[int, ...]:
        """Parse a prefix of 0..L level tokens (e.g. ``<SID_L1_3><SID_L2_0>``) into codes."""
        return self._codes_from_text(text, exact=False)

    def prefix_string(self, codes: Sequence[int]) -> str:
        """Canonical text of a prefix given as codes (validated)."""
        if len(codes) > self.levels:
            raise InvalidSID(
                f"prefix {tuple(codes)} has {len(codes)} levels; spec {self} has {self.levels}",
                text=codes,
            )
        return "".join(self.token(i, int(c)) for i, c in enumerate(codes, 1))

    def make(self, codes: Iterable[int]) -> SID:
        """Build a validated SID of this spec from its codes."""
        return SID(tuple(codes), self)

    def all_sids(self) -> Iterator[SID]:
        """Every address of the spec in code order (use with care: ``capacity`` items)."""
        for codes in itertools.product(*(range(n) for n in self.sizes)):
            yield SID(codes, self)


DEFAULT_SPEC = SIDSpec(DEFAULT_SIZES)


@dataclass(frozen=True, order=True)
class SID:
    """An immutable, hashable, ordered address bound to a :class:`SIDSpec`."""

    codes: tuple[int, ...]
    spec: SIDSpec = DEFAULT_SPEC

    def __post_init__(self) -> None:
        try:
            codes = tuple(operator.index(c) for c in self.codes)  # ints and numpy ints only
        except TypeError:
            raise InvalidSID(
                f"SID codes must be integers, got {self.codes!r}", text=self.codes
            ) from None
        if any(isinstance(c, bool) for c in self.codes):
            raise InvalidSID(f"SID codes must be integers, got {self.codes!r}", text=self.codes)
        if len(codes) != self.spec.levels:
            raise InvalidSID(
                f"SID {codes} has {len(codes)} codes; spec {self.spec} needs exactly "
                f"{self.spec.levels}",
                text=codes,
            )
        for level, (c, n) in enumerate(zip(codes, self.spec.sizes, strict=True), 1):
            if not 0 <= c < n:
                raise InvalidSID(
                    f"code {c} at level {level} of SID {codes} is out of range; level {level} "
                    f"allows 0-{n - 1} (spec {self.spec})",
                    text=codes,
                    token=f"<SID_L{level}_{c}>",
                )
        object.__setattr__(self, "codes", codes)

    @classmethod
    def parse(cls, text: str, spec: SIDSpec = DEFAULT_SPEC) -> SID:
        """Parse canonical text strictly against ``spec``."""
        return spec.parse(text)

    def __str__(self) -> str:
        return "".join(f"<SID_L{i}_{c}>" for i, c in enumerate(self.codes, 1))

    def __repr__(self) -> str:
        if self.spec == DEFAULT_SPEC:
            return f"SID('{self}')"
        return f"SID('{self}', spec={self.spec})"

    def __len__(self) -> int:
        return len(self.codes)

    def __iter__(self) -> Iterator[int]:
        return iter(self.codes)

    def tokens(self) -> list[str]:
        """The SID as its list of level tokens."""
        return [f"<SID_L{i}_{c}>" for i, c in enumerate(self.codes, 1)]

    def prefix(self, depth: int) -> tuple[int, ...]:
        """The codes of the first ``depth`` levels (0 <= depth <= L)."""
        if not 0 <= depth <= len(self.codes):
            raise ValueError(f"prefix depth {depth} outside 0..{len(self.codes)}")
        return self.codes[:depth]

    def prefix_str(self, depth: int) -> str:
        """Canonical text of the depth-``depth`` prefix."""
        return "".join(self.tokens()[: len(self.prefix(depth))])

    def common_prefix_len(self, other: SID | Sequence[int]) -> int:
        """Number of leading levels shared with ``other``."""
        other_codes = other.codes if isinstance(other, SID) else tuple(other)
        n = 0
        for a, b in zip(self.codes, other_codes, strict=False):
            if a != b:
                break
            n += 1
        return n

    def shares_prefix(self, other: SID | Sequence[int], depth: int) -> bool:
        """True when both share at least their first ``depth`` levels."""
        return self.common_prefix_len(other) >= depth


def coerce_sid(value: SID | str | Sequence[int], spec: SIDSpec = DEFAULT_SPEC) -> SID:
    """Turn an SID, its canonical text or its codes into an SID of ``spec`` (strict)."""
    if isinstance(value, SID):
        if value.spec != spec:
            raise InvalidSID(
                f"SID {value} belongs to spec {value.spec}, but spec {spec} was expected",
                text=str(value),
            )
        return value
    if isinstance(value, str):
        return spec.parse(value)
    if isinstance(value, Sequence):
        return SID(tuple(value), spec)
    raise InvalidSID(
        f"cannot read an SID from {type(value).__name__}; pass text like {spec.form}",
        text=value,
    )
