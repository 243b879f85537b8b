"""CachedEncoder: the same vectors as the wrapped encoder, each distinct text embedded once."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from genmem.memory.embedding_cache import CachedEncoder
from genmem.memory.encoders import Encoder
from tests.fakes import CountingEncoder, HashEncoder


def test_vectors_equal_the_wrapped_encoder_and_repeats_are_free() -> None:
    inner = CountingEncoder()
    cached = CachedEncoder(inner)
    assert isinstance(cached, Encoder) and cached.dim == 16 and cached.id == inner.id
    texts = ["alpha", "beta", "alpha", "gamma"]
    got = cached.encode(texts)
    np.testing.assert_array_equal(got, HashEncoder(16).encode(texts))
    assert inner.seen == ["alpha", "beta", "gamma"]  # the repeat inside one call is free too
    again = cached.encode(["gamma", "beta", "delta"])
    np.testing.assert_array_equal(again, HashEncoder(16).encode(["gamma", "beta", "delta"]))
    assert inner.seen[3:] == ["delta"]
    assert (cached.hits, cached.misses) == (3, 4)
    assert cached.encode([]).shape == (0, 16)
    with pytest.raises(TypeError, match="sequence"):
        cached.encode("alpha")


def test_the_file_is_shared_between_instances_and_keyed_by_prefix(tmp_path: Path) -> None:
    path = tmp_path / "vectors.sqlite"
    CachedEncoder(CountingEncoder(), path).encode(["one", "two"])
    second = CountingEncoder()
    got = CachedEncoder(second, path).encode(["two", "one", "three"])
    assert second.seen == ["three"]
    np.testing.assert_array_equal(got, HashEncoder(16).encode(["two", "one", "three"]))
    prefixed = CountingEncoder(prefix="Q: {summary}")
    CachedEncoder(prefixed, path).encode(["one"])
    assert prefixed.seen == ["one"]  # another prefix is another vector
