"""Typed errors for GenMem.

Every error derives from :class:`GenMemError` and from the built-in exception that fits it, so
callers can catch either. Each carries the offending value as attributes and its message says
what was wrong, the rule, and the fix.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "BankAccessDenied",
    "BankExists",
    "BankHoldsTasks",
    "BankNotFound",
    "CodebookError",
    "CodebookMismatch",
    "EncoderUnavailable",
    "GenMemError",
    "IntegrityError",
    "InvalidBankURL",
    "InvalidDevice",
    "InvalidModelOutput",
    "InvalidModelSpec",
    "InvalidSID",
    "InvalidUpdate",
    "ModelUnavailable",
    "RankFailed",
    "ReadOnlyBank",
    "SlotEmpty",
    "SlotOccupied",
    "TooManyFailures",
    "VersionConflict",
]


class GenMemError(Exception):
    """Root of every error GenMem raises on purpose."""


class InvalidSID(GenMemError, ValueError):
    """A Symbolic Identifier that does not parse or does not fit its codebook spec."""

    def __init__(self, message: str, *, text: Any = None, token: str | None = None) -> None:
        super().__init__(message)
        self.text = text
        self.token = token


class CodebookError(GenMemError, ValueError):
    """Codebooks that cannot be fitted, loaded or used as asked."""


class CodebookMismatch(GenMemError, ValueError):
    """A bank built with one codebook was handed another (frozen means frozen)."""

    def __init__(self, message: str, *, expected: str | None, got: str | None) -> None:
        super().__init__(message)
        self.expected = expected
        self.got = got


class EncoderUnavailable(GenMemError, RuntimeError):
    """The text encoder cannot be loaded from local files (nothing is downloaded)."""


class InvalidBankURL(GenMemError, ValueError):
    """A bank location that is not one of the supported URL forms."""

    def __init__(self, message: str, *, url: str) -> None:
        super().__init__(message)
        self.url = url


class BankNotFound(GenMemError, LookupError):
    """The named bank does not exist in the store."""

    def __init__(self, message: str, *, bank_id: str) -> None:
        super().__init__(message)
        self.bank_id = bank_id

    def __str__(self) -> str:  # LookupError would quote the message like a KeyError
        return self.args[0]


class BankExists(GenMemError, ValueError):
    """A bank with that id already exists and the caller asked for a new one."""

    def __init__(self, message: str, *, bank_id: str) -> None:
        super().__init__(message)
        self.bank_id = bank_id


class ReadOnlyBank(GenMemError, PermissionError):
    """A write was attempted on a snapshot or another read-only bank."""

    def __init__(self, message: str, *, bank_id: str) -> None:
        super().__init__(message)
        self.bank_id = bank_id


class BankAccessDenied(GenMemError, PermissionError):
    """A run asked a LangGraph server for a bank it may not open (a URL the server does not
    accept, a path outside its bank root, a host it does not allow, another user's bank).

    Nothing was opened, created or connected to."""

    def __init__(self, message: str, *, requested: str, user: str | None = None) -> None:
        super().__init__(message)
        self.requested = requested
        self.user = user


class InvalidUpdate(GenMemError, ValueError):
    """An update record that is malformed: unknown op, empty insert, oversize payload."""


class SlotOccupied(GenMemError, ValueError):
    """`insert` at an SID that already holds an entry."""

    def __init__(self, message: str, *, sid: str, version: int) -> None:
        super().__init__(message)
        self.sid = sid
        self.version = version


class SlotEmpty(GenMemError, LookupError):
    """`revise` at an SID that holds no entry."""

    def __init__(self, message: str, *, sid: str) -> None:
        super().__init__(message)
        self.sid = sid

    def __str__(self) -> str:
        return self.args[0]


class VersionConflict(GenMemError, RuntimeError):
    """`revise(expected_version=...)` found another version at the slot."""

    def __init__(self, message: str, *, sid: str, expected: int, actual: int | None) -> None:
        super().__init__(message)
        self.sid = sid
        self.expected = expected
        self.actual = actual


class BankUnavailable(GenMemError, ConnectionError):
    """The bank's server went away (restarted, shut down, unreachable) during a call.

    A write under way when it happened may or may not have been committed: read the slot
    again before retrying it (a retried revise with ``expected_version`` is safe)."""


class BankStorageError(GenMemError, OSError):
    """The bank's storage refused a write (disk full, read-only file or database, I/O error).

    The write was rolled back: the bank is as it was before the call."""


class IntegrityError(GenMemError, RuntimeError):
    """A bank's stored state breaks one of its invariants (found by `check()`)."""

    def __init__(self, message: str, *, problems: list[str]) -> None:
        super().__init__(message)
        self.problems = problems


class ModelUnavailable(GenMemError, RuntimeError):
    """A model (weights, tokenizer or backend package) that is not installed or not found."""


class InvalidModelSpec(GenMemError, ValueError):
    """A model spec string or config that names no usable backend."""

    def __init__(self, message: str, *, spec: Any = None) -> None:
        super().__init__(message)
        self.spec = spec


class InvalidDevice(GenMemError, ValueError):
    """A local-model device setting that names no usable device, or one its dtype cannot run on."""

    def __init__(self, message: str, *, device: str, dtype: str | None = None) -> None:
        super().__init__(message)
        self.device = device
        self.dtype = dtype


class InvalidModelOutput(GenMemError, ValueError):
    """A model reply that does not have the shape asked for (bad JSON, wrong fields)."""

    def __init__(self, message: str, *, output: str | None = None) -> None:
        super().__init__(message)
        self.output = output


class TooManyFailures(GenMemError, RuntimeError):
    """A run stopped because more of its steps failed than it was set to tolerate."""

    def __init__(self, message: str, *, failures: int, limit: int, last_error: str) -> None:
        super().__init__(message)
        self.failures = failures
        self.limit = limit
        self.last_error = last_error

    def __reduce__(self) -> tuple[Any, ...]:
        # keyword-only fields: rebuilt by name (a training run sends it from one process to all)
        return (_too_many_failures, (str(self), self.failures, self.limit, self.last_error))


def _too_many_failures(message: str, failures: int, limit: int, last_error: str) -> TooManyFailures:
    return TooManyFailures(message, failures=failures, limit=limit, last_error=last_error)


class RankFailed(GenMemError, RuntimeError):
    """Another process of a training run failed with an error that could not be sent as itself."""

    def __init__(self, message: str, *, rank: int = 0) -> None:
        super().__init__(message)
        self.rank = rank

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rank_failed, (str(self), self.rank))


def _rank_failed(message: str, rank: int) -> RankFailed:
    return RankFailed(message, rank=rank)


class BankHoldsTasks(GenMemError, ValueError):
    """An evaluation's bank was built from the tasks it is scored on."""

    def __init__(self, message: str, *, task_ids: list[str]) -> None:
        super().__init__(message)
        self.task_ids = task_ids
