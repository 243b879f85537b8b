"""A store of banks: the backend primitives plus opening and creating the banks they hold.

:class:`BankStore` is what every backend (SQLite, PostgreSQL, LangGraph stores) subclasses and
what :func:`genmem.memory.location.open_store` returns. The primitives and the shared key and
id rules are in :mod:`genmem.memory.backend`; the semantics of a bank in
:mod:`genmem.memory.bank`.
"""

from __future__ import annotations

import time

from genmem.errors import BankExists, BankNotFound, InvalidUpdate
from genmem.memory.backend import (
    BANK_ID_RE,
    RetryableWrite,
    SlotTx,
    StoreBackend,
    check_bank_id,
    check_new_bank,
    sort_key,
)
from genmem.memory.bank import Bank
from genmem.memory.records import BankInfo
from genmem.memory.sid import SIDSpec

__all__ = [
    "BANK_ID_RE",
    "BankStore",
    "RetryableWrite",
    "SlotTx",
    "check_bank_id",
    "check_new_bank",
    "sort_key",
]


class BankStore(StoreBackend):
    """A store of banks, isolated by bank id (subclass it to add a backend)."""

    def create_bank(
        self,
        bank_id: str = "default",
        *,
        spec: SIDSpec,
        codebook_hash: str,
        exist_ok: bool = False,
    ) -> Bank:
        """Create an empty bank bound to a codebook spec and hash (or open it if ``exist_ok``)."""
        check_new_bank(bank_id, spec)
        info = BankInfo(
            bank_id=bank_id,
            sizes=list(spec.sizes),
            codebook_hash=codebook_hash,
            created_at=time.time(),
        )
        try:
            self._create(info, [], [])
        except BankExists:
            if not exist_ok:
                raise
            bank = self.bank(bank_id)
            bank.check_codebook_hash(codebook_hash)
            if bank.spec != spec:
                raise InvalidUpdate(
                    f"bank {bank_id!r} has sizes {bank.spec} but {spec} was asked for"
                ) from None
            return bank
        return Bank(self, info)

    def bank(self, bank_id: str = "default") -> Bank:
        """Open an existing bank (BankNotFound names the banks that do exist)."""
        info = self.get_info(bank_id)
        if info is None:
            raise self._not_found(bank_id, self.list_banks())
        return Bank(self, info)

    async def abank(self, bank_id: str = "default") -> Bank:
        """:meth:`bank` for async code (the store's async reads, see ``native_async``)."""
        info = await self.aget_info(bank_id)
        if info is None:
            raise self._not_found(bank_id, await self.alist_banks())
        return Bank(self, info)

    def _not_found(self, bank_id: str, banks: list[BankInfo]) -> BankNotFound:
        known = ", ".join(repr(b.bank_id) for b in banks) or "none"
        return BankNotFound(
            f"no bank {bank_id!r} in {self.url or type(self).__name__} "
            f"(banks there: {known}); create it with `genmem bank build` or create_bank()",
            bank_id=bank_id,
        )
