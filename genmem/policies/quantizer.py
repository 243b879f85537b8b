"""The quantizer addresser: SIDs from the frozen codebooks, the discriminative baseline.

:class:`QuantizerAddresser` is **not** the paper's method. It addresses a context the way the
bank was built: encode the text with the codebooks' own encoder and prefix, then quantise the
embedding with the frozen RQ-KMeans codebooks. It serves two purposes: the discriminative
baseline that generative addressing is compared with, and a cold-start fallback before a
MemRetriever policy has been trained. It implements the
:class:`~genmem.policies.types.SIDGenerator` protocol, so it plugs in wherever a policy does.

``k = 1`` is the plain RQ assignment, exactly ``codebooks.quantize``. ``k > 1`` runs a beam over
levels that keeps the ``k`` best partial codes. A child's cost at level ``l`` is its *excess*
over the best child of the same parent under that level's own assignment rule:

- ``euclidean``: ``||r - c_j||^2 - min_i ||r - c_i||^2``;
- ``weighted``: the same with each centre's frozen multiplier, ``m_j ||r - c_j||^2 - min ...``;
- ``spherical``: ``max_i <r, u_i> - <r, u_j>`` (codes are chosen by cosine with directions
  ``u``; the residual passed on subtracts the scaled centre, as in quantisation).

A path's score is minus its summed excess (0 for the RQ assignment itself, negative for every
other path). Why excess and not the summed squared residual distance: the greedy RQ path does
not always have the smallest summed distance (a worse first code can leave a residual that
later levels explain better), so ranking by distance can put another SID above the one
``quantize`` gives, or drop that SID from the beam altogether. Ranking by excess is the
discriminative counterpart of summing per-level log-probabilities in generative beam search:
each level is scored relative to its best choice, the RQ assignment has zero excess at every
level and is therefore always first, for all three distance settings (ties at zero excess are
broken in its favour, then by code order).

With a bank, candidates can be restricted (``allowed``) to occupied SIDs or to leaves under
an occupied depth ``L-1`` prefix; the beam then only extends prefixes that lead to an allowed
leaf, so it never spends width on dead ends. Excess is still measured against the best child
of each parent, allowed or not, so scores stay comparable. Restricted, the RQ assignment still
comes first whenever it is allowed; otherwise ``k = 1`` is greedy among allowed children and a
wider beam returns the allowed SIDs with the least excess it finds (exhaustively once ``k`` is
at least the number of allowed SIDs). The allowed set follows the bank: it is re-read when the
bank's log shows an insertion or deletion since the previous call.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from genmem.errors import CodebookError, InvalidSID
from genmem.memory.encoders import Encoder, encode_for_codebook, load_encoder
from genmem.memory.rqkmeans import Codebooks, as_embeddings
from genmem.memory.sid import SID, SIDSpec
from genmem.policies.types import AllowedMode, SIDCandidate

if TYPE_CHECKING:
    from genmem.memory.bank import Bank

__all__ = ["QuantizerAddresser"]

_MODES = ("all", "occupied", "prefix")


class QuantizerAddresser:
    """Encode-then-quantise addressing with the frozen codebooks (baseline and cold start).

    Implements ``SIDGenerator``. ``encoder`` overrides the codebooks' recorded encoder (a spec
    string is loaded with the recorded prefix, an :class:`Encoder` is used as it is); the
    recorded one is loaded on first use. ``allowed`` other than ``"all"`` needs ``bank``.
    """

    addresser = "quantizer"
    """What outputs say chose the SID."""

    def __init__(
        self,
        codebooks: Codebooks,
        *,
        encoder: str | Encoder | None = None,
        bank: Bank | None = None,
        allowed: AllowedMode = "all",
        batch_size: int = 32,
    ) -> None:
        if allowed not in _MODES:
            raise ValueError(f"allowed={allowed!r}; use 'all', 'occupied' or 'prefix'")
        if allowed != "all" and bank is None:
            raise ValueError(
                f"allowed={allowed!r} restricts SIDs to a bank's entries; pass bank=... "
                "or use allowed='all'"
            )
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size={batch_size!r} must be an integer >= 1")
        if bank is not None:
            bank.check_codebook(codebooks)
            if bank.spec != codebooks.spec:
                raise InvalidSID(
                    f"the bank's spec is {bank.spec}, the codebooks' {codebooks.spec}",
                    text=str(bank.spec),
                )
        self.codebooks = codebooks
        self.bank = bank
        self.allowed = allowed
        self.batch_size = batch_size
        self._encoder_spec = encoder if isinstance(encoder, str) else None
        self._encoder: Encoder | None = None if isinstance(encoder, str) else encoder
        self._lock = threading.Lock()
        self._levels = _level_arrays(codebooks)
        self._cosine = codebooks.directions is not None
        self._sets: list[set[tuple[int, ...]] | None] | None = None
        self._seen_seq = 0

    def __repr__(self) -> str:
        return f"QuantizerAddresser({self.codebooks!r}, allowed={self.allowed!r})"

    @property
    def spec(self) -> SIDSpec:
        """The codebooks' address space."""
        return self.codebooks.spec

    @property
    def encoder(self) -> Encoder:
        """The encoder contexts are embedded with (loaded on first access)."""
        with self._lock:
            if self._encoder is None:
                meta = self.codebooks.metadata
                name = self._encoder_spec or meta.encoder_id
                if name is None:
                    raise CodebookError(
                        "these codebooks were fitted on raw embeddings and record no encoder; "
                        "pass encoder=... (the one that made those embeddings) or call "
                        "generate_from_embeddings()"
                    )
                self._encoder = load_encoder(name, prefix=meta.encoder_prefix)
            return self._encoder

    def generate(self, context: str, k: int = 1) -> list[SIDCandidate]:
        """Up to ``k`` distinct SIDs for ``context``, best first (k=1: the RQ assignment)."""
        if not isinstance(context, str):
            raise TypeError(f"context must be a string, got {type(context).__name__}")
        return self.generate_batch([context], k)[0]

    def generate_batch(self, contexts: Sequence[str], k: int = 1) -> list[list[SIDCandidate]]:
        """:meth:`generate` for several contexts (encoded together), in order."""
        if isinstance(contexts, str):
            raise TypeError("generate_batch takes a list of contexts; use generate() for one")
        texts = list(contexts)
        for i, t in enumerate(texts):
            if not isinstance(t, str):
                raise TypeError(f"context {i} must be a string, got {type(t).__name__}")
        _check_k(k)
        if not texts:
            return []
        x = encode_for_codebook(
            self.codebooks, texts, encoder=self.encoder, batch_size=self.batch_size
        )
        return self.generate_from_embeddings(x, k)

    def generate_from_embeddings(self, x: np.ndarray, k: int = 1) -> list[list[SIDCandidate]]:
        """Candidates for (N, d) embeddings already made with the codebooks' encoder."""
        _check_k(k)
        arr = as_embeddings(x, dim=self.codebooks.dim)
        sets = self._allowed_sets()
        if sets is None and k == 1:
            return [[SIDCandidate(sid=str(sid), score=0.0)] for sid in self.codebooks.sids(arr)]
        greedy = self.codebooks.quantize(arr)
        return [self._beam(row, k, sets, tuple(g)) for row, g in zip(arr, greedy, strict=True)]

    def _allowed_sets(self) -> list[set[tuple[int, ...]] | None] | None:
        """Allowed prefixes per depth 1..L (None at a depth: anything), or None for ``all``.

        Re-read from the bank when its log shows an insertion or deletion since the last call.
        """
        if self.allowed == "all":
            return None
        assert self.bank is not None
        events = self.bank.events(after_seq=self._seen_seq)
        changed = any(e.outcome in ("inserted", "deleted") for e in events)
        if events:
            self._seen_seq = events[-1].seq
        if self._sets is None or changed:
            occupied = [s.codes for s in self.bank.occupied()]
            levels = self.spec.levels
            sets: list[set[tuple[int, ...]] | None] = [
                {c[:d] for c in occupied} for d in range(1, levels + 1)
            ]
            if self.allowed == "prefix":
                sets[-1] = None  # any leaf under an allowed parent
            self._sets = sets
        return self._sets

    def _beam(
        self,
        x: np.ndarray,
        k: int,
        sets: list[set[tuple[int, ...]] | None] | None,
        greedy: tuple[int, ...],
    ) -> list[SIDCandidate]:
        """Beam of width ``k`` over levels for one embedding, scored by summed excess."""
        prefixes: list[tuple[int, ...]] = [()]
        residuals = x.astype(np.float64)[None, :]
        excess = np.zeros(1)
        for level, (cent, vecs, mult) in enumerate(self._levels):
            if not prefixes:
                return []
            if self._cosine:
                cost = -(residuals @ vecs.T)
            else:
                diff = residuals[:, None, :] - cent[None, :, :]
                cost = np.einsum("bnd,bnd->bn", diff, diff) * mult
            extra = np.maximum(cost - cost.min(axis=1, keepdims=True), 0.0)
            allowed = sets[level] if sets is not None else None
            options = []
            for b, parent in enumerate(prefixes):
                on_path = parent == greedy[:level]
                if on_path:
                    extra[b, greedy[level]] = 0.0  # quantize's own choice has zero excess
                for j in range(cent.shape[0]):
                    codes = (*parent, j)
                    if allowed is not None and codes not in allowed:
                        continue
                    on_greedy = on_path and j == greedy[level]
                    options.append((float(excess[b] + extra[b, j]), not on_greedy, codes, b, j))
            options.sort(key=lambda o: o[:3])
            keep = options[:k]
            prefixes = [o[2] for o in keep]
            excess = np.array([o[0] for o in keep])
            parents = np.array([o[3] for o in keep], dtype=np.int64)
            chosen = np.array([o[4] for o in keep], dtype=np.int64)
            residuals = residuals[parents] - cent[chosen]
        return [
            SIDCandidate(sid=str(SID(p, self.spec)), score=0.0 - float(e))
            for p, e in zip(prefixes, excess, strict=True)
        ]


def _level_arrays(cb: Codebooks) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Per level, float64 (centres, vectors codes are chosen by, multipliers)."""
    out = []
    for i in range(cb.spec.levels):
        cent = cb.centres[i].astype(np.float64)
        vecs = cb.directions[i].astype(np.float64) if cb.directions is not None else cent
        out.append((cent, vecs, cb.multipliers[i].astype(np.float64)))
    return out


def _check_k(k: object) -> None:
    """Refuse anything but an int >= 1."""
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"k={k!r}: ask for an integer number of candidates >= 1")
