"""Command-line flags generated from a pydantic model's fields, and the model built back from them.

A config model owns its values: the field's name is the flag (``memory_k``: ``--memory-k``), its
default the flag's, its ``Literal`` values the choices and its ``description`` the help, so a
default is written once and the CLI cannot drift from the library. A bool that defaults to True
becomes ``--no-NAME`` (``rerank``: ``--no-rerank``), one that defaults to False ``--NAME``.
pydantic-settings has a CLI source too, but it parses the whole command line into one settings
object (reading environment variables as well); a ``genmem`` command mixes a model's fields with
flags of its own, on argparse sub-parsers, so this module only adds arguments and reads them back.

Example:
    >>> import argparse
    >>> from pydantic import BaseModel, Field
    >>> class Budget(BaseModel):
    ...     max_steps: int = Field(default=3, ge=1, description="Planner steps per task.")
    ...     rerank: bool = Field(default=True, description="Rerank the candidates.")
    >>> p = argparse.ArgumentParser()
    >>> add_field_flags(p, Budget)
    >>> args = p.parse_args(["--max-steps", "5", "--no-rerank"])
    >>> model_from_args(Budget, args)
    Budget(max_steps=5, rerank=False)
"""

from __future__ import annotations

import argparse
import types
import typing
from collections.abc import Iterable, Mapping
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo

from genmem.cli.argtypes import CLIError, nonnegative_int, positive_int

__all__ = ["add_field_flag", "add_field_flags", "field_help", "flag_of", "model_from_args"]

M = TypeVar("M", bound=BaseModel)


def flag_of(name: str, field: FieldInfo) -> str:
    """The flag of a field: ``--kebab-case``, or ``--no-kebab-case`` for a bool on by default."""
    flag = name.replace("_", "-")
    negated = _bare(field.annotation) is bool and field.default is True
    return f"--no-{flag}" if negated else f"--{flag}"


def field_help(field: FieldInfo, *, default: bool = True) -> str:
    """A field's description as help, ending ``(default X)`` (a required field, or one whose
    default is None, says none; a ``--no-NAME`` flag ends ``(on by default)``)."""
    text = str(field.description or "").rstrip(".").replace("%", "%%")
    first = text.split(" ", 1)[0]
    if first[1:].islower():  # "Entries ..." -> "entries ...", as every flag's help; "SIDs" stays
        text = text[0].lower() + text[1:]
    value = None if field.is_required() else field.get_default(call_default_factory=True)
    if not default or value is None or value is False:
        return text
    if value is True:
        return f"{text} (on by default)"
    shown = ",".join(map(str, value)) if isinstance(value, (list, tuple)) else value
    return f"{text} (default {shown})"


def add_field_flags(
    parser: argparse.ArgumentParser | argparse._ArgumentGroup,
    model: type[BaseModel],
    names: Iterable[str] | None = None,
    *,
    overrides: Mapping[str, Mapping[str, Any]] | None = None,
) -> None:
    """Add one flag per field of ``model`` (``names``: these fields, in this order; default all).

    Args:
        parser: The parser (or argument group) the flags go to.
        model: The pydantic model whose fields they set.
        names: The fields to expose; the others keep their defaults.
        overrides: Per field, ``add_argument`` keywords that replace the generated ones (``help``,
            ``default``, ``type``, ``metavar``...) and ``flag``, another option string (a flag
            whose name predates the field's).
    """
    fields = model.model_fields
    for name in fields if names is None else names:
        add_field_flag(parser, name, fields[name], **(overrides or {}).get(name, {}))


def add_field_flag(
    parser: argparse.ArgumentParser | argparse._ArgumentGroup,
    name: str,
    field: FieldInfo,
    **overrides: Any,
) -> None:
    """Add the flag of one field (``overrides``: as in :func:`add_field_flags`)."""
    kwargs = _argument(field)
    flag = overrides.pop("flag", flag_of(name, field))
    if flag != flag_of(name, field) and "action" not in kwargs:
        kwargs["metavar"] = flag.removeprefix("--").replace("-", "_").upper()
    kwargs.update(overrides)
    parser.add_argument(flag, dest=name, **kwargs)


def model_from_args(
    model: type[M],
    args: argparse.Namespace,
    /,
    names: Iterable[str] | None = None,
    **values: Any,
) -> M:
    """``model`` from the parsed flags of its fields and ``values``.

    Args:
        model: The pydantic model to build.
        args: The parsed command line; a field's flag left at None keeps the field's default.
        names: The fields read from ``args`` (default: every field ``args`` has a value for).
        **values: Fields given outright (not read from ``args``).

    Returns:
        The model.

    Raises:
        CLIError: a value the model refuses (exit 2), worded with its flag.
    """
    read = model.model_fields if names is None else names
    given = {
        name: getattr(args, name)
        for name in read
        if name not in values and getattr(args, name, None) is not None
    }
    try:
        return model(**given, **values)
    except ValidationError as exc:
        raise CLIError(_message(model, exc, values)) from None


def _message(model: type[BaseModel], exc: ValidationError, values: Mapping[str, Any]) -> str:
    """Each error as ``--flag VALUE: rule`` (a model-level error as its message)."""
    parts = []
    for error in exc.errors():
        msg = str(error.get("msg", "")).removeprefix("Value error, ")
        loc = error.get("loc") or ()
        name = loc[0] if loc else None
        if isinstance(name, str) and name in model.model_fields and name not in values:
            flag = flag_of(name, model.model_fields[name])
            parts.append(f"{flag} {error.get('input')!r}: {msg}")
        else:
            parts.append(msg)
    return "; ".join(parts)


def _argument(field: FieldInfo) -> dict[str, Any]:
    """``add_argument`` keywords for one field: action or type, default, choices, help."""
    kind = _bare(field.annotation)
    required = field.is_required()
    default = None if required else field.get_default(call_default_factory=True)
    if kind is bool:
        action = "store_false" if default is True else "store_true"
        return {"action": action, "help": field_help(field)}
    kwargs: dict[str, Any] = {"default": default, "help": field_help(field)}
    if required:
        kwargs["required"] = True
    if typing.get_origin(kind) is Literal:
        kwargs["choices"] = typing.get_args(kind)
    elif kind is int:
        kwargs["type"] = _int_type(field)
    elif kind is float:
        kwargs["type"] = float
    return kwargs


def _bare(annotation: Any) -> Any:
    """``X`` of ``X | None`` (other annotations as they are)."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return annotation


def _int_type(field: FieldInfo) -> Any:
    """:func:`positive_int` for ``ge >= 1``, :func:`nonnegative_int` for ``ge 0``, else int."""
    least = max((m.ge for m in field.metadata if getattr(m, "ge", None) is not None), default=None)
    if least is not None and least >= 1:
        return positive_int
    return nonnegative_int if least == 0 else int
