"""A bank from a user's own texts in one call: encode, fit (or reuse) codebooks, insert.

:func:`bank_from_texts` is the library's shortest road to a bank. It does what ``genmem codebook
fit`` followed by ``genmem bank build`` do, on texts held in memory:

1. the texts are embedded with the codebooks' encoder (the default encoder when codebooks are
   fitted here);
2. the codebooks are the ones given, else those of the bank the URL already names (found on
   this machine by their hash), else fitted on these texts and kept by hash so that the
   quantizer finds them again from the bank alone;
3. each text is quantised to its SID and written through the write gate
   (:func:`~genmem.memory.build.build_bank`: texts that share a SID become one entry, occupied
   slots are kept as they are: a second call adds the texts whose slots are still empty and
   counts the others in ``report.skipped_occupied``; changing an entry is MemEvolver's job, or
   ``Bank.apply``'s).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from genmem.errors import CodebookError
from genmem.memory.bank import Bank
from genmem.memory.build import BuildReport, ExperienceRecord, build_bank
from genmem.memory.encoders import Encoder, encode_for_codebook, load_encoder
from genmem.memory.gate import DEFAULT_GATE, GateConfig
from genmem.memory.location import new_sqlite_file, open_store, parse_bank_url
from genmem.memory.rqkmeans import Codebooks, RQKMeans, RQKMeansConfig
from genmem.memory.sid import DEFAULT_SIZES

__all__ = ["BankBuild", "bank_from_texts", "sizes_for"]

PAPER_SIZES_FROM = 480
"""From this many texts on, fitted codebooks take the paper's 48x16x8x8 (ten texts per
first-level code); fewer texts get two small levels (:func:`sizes_for`)."""


@dataclass(frozen=True)
class BankBuild:
    """What :func:`bank_from_texts` made."""

    bank: Bank
    """The bank, open and ready for the memory tools and graphs."""
    codebooks: Codebooks
    """The frozen codebooks its SIDs come from (kept on this machine by hash)."""
    report: BuildReport
    """Counts of the write: texts, slots, inserted, kept, refused by the gate."""
    fitted: bool
    """Whether the codebooks were fitted by this call (else given or the bank's own)."""


def sizes_for(n_texts: int) -> tuple[int, ...]:
    """Codebook sizes for fitting on ``n_texts`` texts.

    The paper's 48x16x8x8 from :data:`PAPER_SIZES_FROM` texts on; below that, two levels of
    ``ceil(sqrt(n))`` codes each (at least 2, at most ``n``), about one slot per text.

    Raises:
        ValueError: fewer than 2 texts (nothing to cluster).
    """
    if n_texts < 2:
        raise ValueError(f"fitting codebooks needs at least 2 texts, got {n_texts}")
    if n_texts >= PAPER_SIZES_FROM:
        return DEFAULT_SIZES
    k = min(n_texts, max(2, math.ceil(math.sqrt(n_texts))))
    return (k, k)


def bank_from_texts(
    texts: Sequence[str | ExperienceRecord],
    bank_url: str,
    *,
    codebooks: Codebooks | str | Path | None = None,
    sizes: Sequence[int] | None = None,
    encoder: Encoder | str | None = None,
    gate: GateConfig | None = DEFAULT_GATE,
    progress: bool = False,
) -> BankBuild:
    """Build (or add to) the bank ``bank_url`` names from ``texts``, codebooks included.

    Args:
        texts: The experiences: plain strings, or :class:`ExperienceRecord` with provenance
            metadata (``query``, ``question``, ...) that the write gate grounds them in.
        bank_url: Where the bank lives, e.g. ``sqlite:///bank.db?bank=lessons`` or a
            ``postgresql://...`` URL; the bank is created if it does not exist.
        codebooks: Codebooks to quantise with (an object or a directory written by
            ``Codebooks.save``). Default: the existing bank's own codebooks, found by hash,
            else new ones fitted on ``texts``.
        sizes: Codebook sizes per level when fitting (default :func:`sizes_for`); refused when
            codebooks are given or reused, since those fix the sizes.
        encoder: The sentence encoder: an :class:`~genmem.memory.encoders.Encoder`, a model
            directory or ``"default"``. Default: the codebooks' recorded encoder, and the
            default encoder when fitting.
        gate: The write gate's settings; None writes every text unchecked.
        progress: Show progress bars.

    Returns:
        The open bank, its codebooks, the build report and whether the codebooks were fitted.

    Raises:
        ValueError: no texts, an empty text, or ``sizes`` where codebooks are fixed.
        InvalidBankURL: ``bank_url`` cannot be parsed or opened.
        CodebookError: the bank exists but its codebooks are not on this machine and none were
            given, or the given codebooks are not the bank's (``CodebookMismatch``).
    """
    records = [t if isinstance(t, ExperienceRecord) else ExperienceRecord(text=t) for t in texts]
    if not records:
        raise ValueError("bank_from_texts needs at least one text")
    parsed = parse_bank_url(bank_url)
    books = Codebooks.load(codebooks) if isinstance(codebooks, str | Path) else codebooks
    if books is None and sizes is None and new_sqlite_file(parsed):
        sizes_for(len(records))  # too few texts to fit: refuse before a file is made
    store = open_store(parsed)
    existing = store.get_info(parsed.bank_id)
    if books is None and existing is not None:
        books = Codebooks.recall(existing.codebook_hash)
        if books is None:
            raise CodebookError(
                f"bank {parsed.bank_id!r} exists and was built with codebooks "
                f"{existing.codebook_hash[:12]}, which this machine has not seen: pass them as "
                "codebooks=DIR (or name a new bank)"
            )
    if books is not None and sizes is not None:
        source = "given" if codebooks is not None else "the bank's own"
        raise ValueError(
            f"sizes={tuple(sizes)} cannot apply: the codebooks are fixed ({source}, {books.spec})"
        )
    if existing is not None and books is not None:
        store.bank(parsed.bank_id).check_codebook(books)  # before any work
    text_list = [r.text for r in records]
    fitted = books is None
    if books is None:
        enc = encoder if isinstance(encoder, Encoder) else load_encoder(encoder)
        vectors = enc.encode(text_list, progress=progress)
        config = RQKMeansConfig(
            sizes=tuple(sizes) if sizes is not None else sizes_for(len(records)),
            encoder_id=enc.id,
            encoder_prefix=getattr(enc, "prefix", None),
        )
        books = RQKMeans(config).fit(vectors, progress=progress).codebooks_
        books.remember()
    else:
        vectors = encode_for_codebook(books, text_list, encoder=encoder, progress=progress)
    bank = store.create_bank(
        parsed.bank_id, spec=books.spec, codebook_hash=books.hash, exist_ok=True
    )
    report = build_bank(bank, records, books.sids(vectors), progress=progress, gate=gate)
    return BankBuild(bank=bank, codebooks=books, report=report, fitted=fitted)
