"""JSON-schema constrained decoding for local transformers policies (lm-format-enforcer).

A 135M model asked for JSON writes prose, repeats itself, or never closes the object. Under a
schema constraint every token it may pick keeps the reply a prefix of a valid document, so the
reply always parses; whether the content is sensible is still the model's business. This is the
local counterpart of a vLLM server's structured outputs, and uses the library vLLM 0.31 pins
(``lm-format-enforcer==0.11.3``) so the two co-install.

The library's own transformers integration imports names transformers 5 no longer has, so the
small tokenizer adapter lives here; the parser, the token tree and the enforcer are the
library's.
"""

from __future__ import annotations

import copy
import threading
import weakref
from collections.abc import Callable
from typing import Any

__all__ = ["json_schema_prefix_fn", "normalize_schema", "schema_of"]

_DATA: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()
_LOCK = threading.Lock()


def schema_of(schema: dict[str, Any] | type) -> dict[str, Any]:
    """The JSON schema of a pydantic model class, or the dict itself (copied)."""
    if isinstance(schema, dict):
        return copy.deepcopy(schema)
    dump = getattr(schema, "model_json_schema", None)
    if dump is None:
        raise TypeError(f"expected a JSON-schema dict or a pydantic model class, got {schema!r}")
    return dump()


def normalize_schema(schema: Any) -> Any:
    """The schema in the subset the enforcer reads: ``oneOf`` as ``anyOf``, no discriminator."""
    if isinstance(schema, dict):
        out = {k: normalize_schema(v) for k, v in schema.items() if k != "discriminator"}
        if "oneOf" in out:
            out["anyOf"] = out.pop("oneOf")
        return out
    if isinstance(schema, list):
        return [normalize_schema(v) for v in schema]
    return schema


def _tokenizer_data(tokenizer: Any) -> Any:
    """The enforcer's per-tokenizer tables (built once per tokenizer, ~2 s for 49k tokens)."""
    from lmformatenforcer.tokenenforcer import TokenEnforcerTokenizerData

    with _LOCK:
        cached = _DATA.get(tokenizer)
        if cached is not None:
            return cached
        special = set(tokenizer.all_special_ids)
        zero = tokenizer.encode("0", add_special_tokens=False)[-1]
        regular = []
        for token_id in range(len(tokenizer)):
            if token_id in special:
                continue
            # Decoding after a "0" keeps a leading space that decoding alone would drop.
            after_zero = tokenizer.decode([zero, token_id])[1:]
            alone = tokenizer.decode([token_id])
            regular.append((token_id, after_zero, len(after_zero) > len(alone)))

        def decode(ids: list[int]) -> str:
            return tokenizer.decode(ids).rstrip("\ufffd")

        data = TokenEnforcerTokenizerData(
            regular, decode, tokenizer.eos_token_id, False, len(tokenizer)
        )
        _DATA[tokenizer] = data
        return data


def json_schema_prefix_fn(
    tokenizer: Any, schema: dict[str, Any] | type, prompt_length: int
) -> Callable[[int, Any], list[int]]:
    """A ``prefix_allowed_tokens_fn`` for ``generate`` that keeps the reply valid for ``schema``.

    ``prompt_length`` is the number of prompt tokens, which the constraint does not see.
    """
    from lmformatenforcer import CharacterLevelParserConfig, JsonSchemaParser, TokenEnforcer

    data = _tokenizer_data(tokenizer)
    # Compact JSON with keys in the order the schema's "required" lists them: fewer tokens,
    # and a schema can put a "thought" before the decision it explains.
    config = CharacterLevelParserConfig(
        alphabet=data.tokenizer_alphabet,
        max_consecutive_whitespaces=1,
        force_json_field_order=True,
    )
    normalized = normalize_schema(schema_of(schema))
    parser = JsonSchemaParser(normalized, config=config)
    enforcer = TokenEnforcer(data, parser)
    parser.config = config  # TokenEnforcer swaps in a default config; restore ours
    eos = [data.eos_token_id]
    # A closed top-level object can only be followed by whitespace: end the reply there.
    end_when_done = normalized.get("type") == "object"

    def allowed(batch_id: int, sequence: Any) -> list[int]:
        tokens = enforcer.get_allowed_tokens(sequence[prompt_length:].tolist())
        ids = list(getattr(tokens, "allowed_tokens", tokens))
        if end_when_done and eos[0] in ids:
            return eos
        return ids

    return allowed
