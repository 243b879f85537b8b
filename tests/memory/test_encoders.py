"""Encoders: prefix formatting, local-only loading, codebook-aware encoding, the real MiniLM."""

from __future__ import annotations

import time

import numpy as np
import pytest

from genmem.errors import CodebookError, EncoderUnavailable
from genmem.memory.encoders import (
    DEFAULT_ENCODER_ID,
    EXPERIENCE_PREFIX,
    Encoder,
    default_encoder,
    encode_for_codebook,
    format_for_encoding,
    load_encoder,
)
from genmem.memory.rqkmeans import RQKMeans, RQKMeansConfig
from tests.fakes import HashEncoder, gsm8k_texts


def test_prefix_slot_is_filled_once():
    assert format_for_encoding("x {summary} y", "A: {summary}") == "A: x {summary} y"
    assert format_for_encoding("text", "Note: ") == "Note: text"
    assert format_for_encoding("text", None) == "text"
    filled = format_for_encoding("Add the parts.", EXPERIENCE_PREFIX)
    assert filled.endswith("Experience: Add the parts.") and "{summary}" not in filled


def test_missing_model_directory_is_reported_without_download(tmp_path):
    with pytest.raises(EncoderUnavailable, match="never downloaded"):
        load_encoder(str(tmp_path / "no-such-model"))
    with pytest.raises(EncoderUnavailable, match="local model directory"):
        load_encoder("sentence-transformers/all-mpnet-base-v2")


def test_fake_encoder_is_an_encoder():
    enc = HashEncoder(8, prefix="p: ")
    assert isinstance(enc, Encoder)
    a = enc.encode(["one", "two", "one"])
    assert a.shape == (3, 8) and a.dtype == np.float32
    np.testing.assert_array_equal(a[0], a[2])
    assert not np.allclose(HashEncoder(8).encode(["one"])[0], a[0])


def _codebooks(dim: int, *, encoder_id: str | None):
    x = HashEncoder(dim).encode([f"text {i}" for i in range(40)])
    cfg = RQKMeansConfig(sizes=(4, 2), encoder_id=encoder_id, encoder_prefix="p: ")
    return RQKMeans(cfg).fit(x, progress=False).codebooks_


def test_encode_for_codebook_checks_encoder():
    cb = _codebooks(8, encoder_id=None)
    with pytest.raises(CodebookError, match="record no encoder"):
        encode_for_codebook(cb, ["a"])
    with pytest.raises(CodebookError, match="16-dimensional"):
        encode_for_codebook(cb, ["a"], encoder=HashEncoder(16))
    out = encode_for_codebook(cb, ["a", "b"], encoder=HashEncoder(8))
    assert out.shape == (2, 8)


@pytest.mark.slow
def test_default_minilm_embeddings():
    texts = gsm8k_texts(16)
    enc = default_encoder()
    assert (enc.id, enc.dim, enc.prefix) == (DEFAULT_ENCODER_ID, 384, EXPERIENCE_PREFIX)
    a = enc.encode(texts, batch_size=8)
    assert a.shape == (16, 384) and a.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(a, axis=1), 1.0, atol=1e-5)
    np.testing.assert_allclose(enc.encode(texts[:3]), a[:3], atol=1e-5)
    plain = enc.with_prefix(None).encode(texts[:3])
    assert np.linalg.norm(plain - a[:3], axis=1).min() > 1e-2
    # related problems sit closer than unrelated ones would on random unit vectors
    assert float((a @ a.T).mean()) > 0.2


@pytest.mark.slow
def test_model_is_loaded_once_per_process():
    first = default_encoder()
    t0 = time.perf_counter()
    again = load_encoder("default", prefix=None)
    assert time.perf_counter() - t0 < 1.0
    assert again._model is first._model and again.prefix is None
    by_path = load_encoder(str(first.path))
    assert by_path._model is first._model and by_path.id == str(first.path)


@pytest.mark.slow
def test_encode_for_codebook_uses_recorded_prefix():
    texts = gsm8k_texts(4)
    cb = _codebooks(8, encoder_id=DEFAULT_ENCODER_ID)
    with pytest.raises(CodebookError, match="384-dimensional"):
        encode_for_codebook(cb, texts)
    x = default_encoder(prefix="p: ").encode(gsm8k_texts(8))
    cfg = RQKMeansConfig(sizes=(4, 2), encoder_id=DEFAULT_ENCODER_ID, encoder_prefix="p: ")
    cb = RQKMeans(cfg).fit(x, progress=False).codebooks_
    np.testing.assert_allclose(encode_for_codebook(cb, texts), x[:4], atol=1e-5)


@pytest.mark.slow
def test_directory_without_a_model_is_unavailable(tmp_path):
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(EncoderUnavailable, match="cannot load"):
        load_encoder(str(tmp_path))
