"""Local policy directories, run with transformers on the CPU or a GPU.

The embedded models (SmolLM2-135M-Instruct by default) come from PyPI packages as GGUF files and
are converted once into the model cache (:mod:`genmem.policies.embedded`).

A *policy directory* is any transformers causal-LM directory, usually one written by
:func:`save_policy` (the default model with the SID tokens added, or a fine-tuned copy from the
training package), with a ``genmem_policy.json`` describing its SID vocabulary.
"""

from __future__ import annotations

import contextlib
import os
import re
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, get_args

from genmem.errors import InvalidDevice, ModelUnavailable
from genmem.memory.sid import SIDSpec
from genmem.policies.embedded import (
    DEFAULT_MODEL,
    EMBEDDED_MODELS,
    default_gguf_path,
    embedded_directory,
    embedded_model,
)
from genmem.policies.policy_dir import (
    POLICY_FILE,
    Alignment,
    PolicyInfo,
    cache_root,
    read_info,
    write_info,
)
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
    "import_transformers",
    "inference_device",
    "int8_copy",
    "load_policy",
    "model_directory",
    "outside_zero3",
    "save_policy",
]

DEFAULT_MODEL_ID = DEFAULT_MODEL.model_id
"""The default model's upstream name."""


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


def model_directory(spec: str | os.PathLike[str] | None) -> Path:
    """The model folder a spec names: an embedded model (converted once) or a directory.

    None, ``default``, ``local`` and the names in
    :data:`~genmem.policies.embedded.EMBEDDED_MODELS` (``gemma3-270m``) name embedded models,
    with or without ``local:``; an existing directory of that name wins.
    """
    path = None if spec is None else Path(str(spec).strip().removeprefix("local:")).expanduser()
    if path is not None and (path / "config.json").is_file():
        return path
    model = embedded_model(spec)
    if model is not None:
        return embedded_directory(model)
    assert path is not None
    return path


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


INFERENCE_DEVICE_ENV = "GENMEM_DEVICE"
"""Environment variable that picks the device of shared (inference) loads."""
_DEVICE_FORMS = "auto, cpu, cuda or cuda:N"


def inference_device() -> str:
    """The device shared loads run on, from ``$GENMEM_DEVICE`` (``auto`` when unset).

    ``auto`` is this process's GPU when torch sees one and the CPU otherwise; ``cuda`` is this
    process's GPU and fails without one; ``cuda:N`` is GPU N; ``cpu`` is the CPU. This process's
    GPU is ``cuda:$LOCAL_RANK`` under torchrun or accelerate, so each rank's judge or teacher
    sits beside its own trainee (ranks past the last GPU wrap round), else ``cuda:0``.

    Raises:
        InvalidDevice: a value of none of these forms, or a GPU that torch does not see.
    """
    import torch

    raw = os.environ.get(INFERENCE_DEVICE_ENV, "auto")
    value = raw.strip().lower()
    if value == "cpu":
        return "cpu"
    if value not in ("auto", "cuda") and not re.fullmatch(r"cuda:\d+", value):
        raise InvalidDevice(
            f"{INFERENCE_DEVICE_ENV}={raw!r} is not a device: use {_DEVICE_FORMS}",
            device=raw,
        )
    if not torch.cuda.is_available():
        if value == "auto":
            return "cpu"
        raise InvalidDevice(
            f"{INFERENCE_DEVICE_ENV}={raw!r} but torch sees no CUDA GPU (torch "
            f"{torch.__version__}): use auto or cpu, or run where torch sees a GPU",
            device=raw,
        )
    count = torch.cuda.device_count()
    if value.startswith("cuda:"):
        index = int(value.removeprefix("cuda:"))
        if index >= count:
            raise InvalidDevice(
                f"{INFERENCE_DEVICE_ENV}={raw!r} but torch sees {count} GPU(s), cuda:0 to "
                f"cuda:{count - 1}: name one of those, or use auto",
                device=raw,
            )
        return f"cuda:{index}"
    rank = os.environ.get("LOCAL_RANK", "0")
    if not rank.strip().isdigit():
        raise InvalidDevice(
            f"LOCAL_RANK={rank!r} is not a process index, so {INFERENCE_DEVICE_ENV}={raw!r} "
            "cannot pick this process's GPU: unset LOCAL_RANK or name the GPU (cuda:N)",
            device=raw,
        )
    return f"cuda:{int(rank) % count}"


def _check_device(device: str, dtype: str) -> None:
    """Refuse a dtype the device cannot run (int8 generation uses CPU-only kernels)."""
    if dtype == "int8" and device != "cpu":
        raise InvalidDevice(
            f"{INFERENCE_DTYPE_ENV}/dtype 'int8' runs on the CPU only (its quantised copy uses "
            f"torch's CPU kernels), but the device is {device!r} ({INFERENCE_DEVICE_ENV}="
            f"{os.environ.get(INFERENCE_DEVICE_ENV, 'auto')!r}): set {INFERENCE_DEVICE_ENV}=cpu "
            "to keep int8, or use float32 or bfloat16 on the GPU",
            device=device,
            dtype=dtype,
        )


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
    float32 for fresh ones, which are trained. Shared loads go on :func:`inference_device` (a
    GPU where there is one); fresh ones on the CPU, where their trainer places them from.

    Raises:
        ModelUnavailable: not a model directory.
        InvalidDevice: a bad ``$GENMEM_DEVICE``, or int8 on a GPU.
    """
    directory = model_directory(path)
    if not (directory / "config.json").is_file():
        raise ModelUnavailable(
            f"{directory} is not a transformers model directory (no config.json); pass a "
            "directory written by `save_policy`/`save_pretrained`, 'default', or an embedded "
            f"model ({', '.join(EMBEDDED_MODELS)})"
        )
    chosen = dtype or ("float32" if fresh else inference_dtype())
    device = "cpu" if fresh else inference_device()
    _check_device(device, chosen)
    key = f"{directory.resolve()}@{chosen}@{device}"
    with _CACHE_LOCK:
        if not fresh and key in _CACHE:
            return _CACHE[key]
        policy = _load(directory, chosen, device, shared=not fresh)
        if not fresh:
            policy.replies = ReplyMemo()
            policy.prefixes = PrefixCache()
            _CACHE[key] = policy
    return policy


def import_transformers() -> None:
    """Resolve the transformers classes GenMem loads and generates with, in this thread.

    transformers imports its classes lazily on first attribute access, and two threads that
    touch one for the first time together can see a half-imported module (``ImportError:
    cannot import name 'AutoModelForCausalLM'``): run this before starting worker threads.
    Without transformers installed it does nothing.
    """
    try:
        from transformers import (  # noqa: F401
            AutoModelForCausalLM,
            AutoTokenizer,
            GenerationConfig,
            LogitsProcessorList,
        )
    except ImportError:
        return


@contextlib.contextmanager
def outside_zero3(model: Any = None) -> Iterator[None]:
    """Load (``model`` None) or resize ``model`` whole even while a ZeRO-3 trainer exists.

    Once a DeepSpeed ZeRO-3 training config is live, transformers builds every model it loads,
    and every embedding it resizes, as ZeRO-3 shards that only that trainer's engine can run.
    Shared loads (a judge, a teacher) are inference copies no engine runs, so they are built
    whole; a model whose weights are already shards is left to ZeRO-3, and so are fresh loads
    (trainees, loaded straight into this process's shards).
    """
    try:
        from transformers.integrations import deepspeed as hf_deepspeed
    except ImportError:  # pragma: no cover - transformers is a dependency
        yield
        return
    sharded = model is not None and any(hasattr(p, "ds_id") for p in model.parameters())
    live = hf_deepspeed._hf_deepspeed_config_weak_ref
    if sharded or live is None:
        yield
        return
    hf_deepspeed._hf_deepspeed_config_weak_ref = None
    try:
        yield
    finally:
        hf_deepspeed._hf_deepspeed_config_weak_ref = live


def _load(directory: Path, dtype: Dtype, device: str, *, shared: bool = False) -> LocalPolicy:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    # False is what transformers does for BPE anyway; copies converted earlier still say True.
    tokenizer = AutoTokenizer.from_pretrained(directory, clean_up_tokenization_spaces=False)
    weights = "float32" if dtype == "int8" else dtype
    # A fresh load under a live ZeRO-3 config is a trainee: it loads as this process's shards.
    with outside_zero3() if shared else contextlib.nullcontext():
        model = AutoModelForCausalLM.from_pretrained(directory, dtype=getattr(torch, weights))
    model.to(device)
    model.eval()
    _align_eos(tokenizer, model)
    return LocalPolicy(
        model=model, tokenizer=tokenizer, info=read_info(directory), path=directory, dtype=dtype
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
        write_info(out, policy.info)
    return out
