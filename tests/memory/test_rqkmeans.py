"""RQ-KMeans: assignment equals brute force, reconstruction, frozen save/load, balance, errors."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from genmem.errors import CodebookError, InvalidSID
from genmem.memory.metrics import codebook_metrics
from genmem.memory.rqkmeans import Codebooks, RQKMeans, RQKMeansConfig
from genmem.memory.sid import SID
from tests.fakes import clustered_embeddings

SIZES = (8, 4, 2)
DIM = 16
DISTANCES = ("euclidean", "spherical", "weighted")


def fit(x: np.ndarray, distance: str = "weighted", **kw) -> RQKMeans:
    cfg = RQKMeansConfig(sizes=kw.pop("sizes", SIZES), distance=distance, **kw)
    return RQKMeans(cfg).fit(x, progress=False)


def brute_force_codes(cb: Codebooks, x: np.ndarray) -> np.ndarray:
    """The definition: per level a direct argmin over every centre, then subtract the centre."""
    r = np.asarray(x, dtype=np.float64)
    codes = []
    for level in range(cb.spec.levels):
        cent = cb.centres[level].astype(np.float64)
        if cb.directions is not None:
            u = cb.directions[level].astype(np.float64)
            s = (r[:, None, :] * u[None, :, :]).sum(-1).argmax(axis=1)
        else:
            mult = cb.multipliers[level].astype(np.float64)
            s = (((r[:, None, :] - cent[None, :, :]) ** 2).sum(-1) * mult).argmin(axis=1)
        codes.append(s)
        r = r - cent[s]
    return np.stack(codes, axis=1)


@pytest.fixture(scope="module")
def data() -> np.ndarray:
    return clustered_embeddings(400, DIM, clusters=10, skew=1.0, seed=1)


@pytest.fixture(scope="module", params=DISTANCES)
def fitted(request, data) -> RQKMeans:
    return fit(data, request.param)


# --- assignment ---------------------------------------------------------------------------------


def test_fit_codes_equal_quantize_and_brute_force(fitted, data):
    cb = fitted.codebooks_
    assert fitted.codes_.shape == (len(data), len(SIZES))
    np.testing.assert_array_equal(cb.quantize(data), fitted.codes_)
    np.testing.assert_array_equal(brute_force_codes(cb, data), fitted.codes_)


finite = st.floats(-3, 3, allow_nan=False, allow_infinity=False, width=32)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(x=arrays(np.float32, st.tuples(st.integers(1, 30), st.just(DIM)), elements=finite))
def test_quantize_equals_brute_force_on_any_data(fitted, x):
    cb = fitted.codebooks_
    np.testing.assert_array_equal(cb.quantize(x), brute_force_codes(cb, x))


@pytest.mark.parametrize("distance", ["euclidean", "spherical"])
@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**16))
def test_exact_ties_resolve_like_brute_force(distance, seed):
    """Points equidistant from two centres, with large offsets so rounding decides the tie.

    The fast expanded-form costs round differently from the direct ones; without re-scoring
    near-ties some of these rows get a different code than the definition gives.
    """
    cb = _tie_codebooks(distance)
    rng = np.random.default_rng(seed)
    vecs = (cb.directions or cb.centres)[0].astype(np.float64)
    rows = []
    for _ in range(50):
        i, j = rng.choice(len(vecs), 2, replace=False)
        diff = vecs[i] - vecs[j]
        v = rng.normal(size=DIM)
        v -= (v @ diff) / (diff @ diff) * diff  # orthogonal to c_i - c_j: an exact tie
        base = np.zeros(DIM) if distance == "spherical" else (vecs[i] + vecs[j]) / 2
        rows.append(base + v * rng.choice([1.0, 10.0, 100.0]))
    x = np.array(rows)
    np.testing.assert_array_equal(cb.quantize(x), brute_force_codes(cb, x))


_TIE_CODEBOOKS: dict[str, Codebooks] = {}


def _tie_codebooks(distance: str) -> Codebooks:
    if distance not in _TIE_CODEBOOKS:
        x = clustered_embeddings(400, DIM, clusters=10, skew=1.0, seed=1)
        _TIE_CODEBOOKS[distance] = fit(x, distance).codebooks_
    return _TIE_CODEBOOKS[distance]


@settings(max_examples=8, deadline=None)
@given(seed=st.integers(0, 2**16), distance=st.sampled_from(DISTANCES), n=st.integers(8, 60))
def test_fit_on_random_data_matches_brute_force(seed, distance, n):
    x = np.random.default_rng(seed).normal(size=(n, 5)).astype(np.float32)
    model = fit(x, distance, sizes=(4, 3), seed=seed)
    np.testing.assert_array_equal(brute_force_codes(model.codebooks_, x), model.codes_)


def test_quantize_handles_duplicates_and_zero_rows(fitted):
    cb = fitted.codebooks_
    x = np.zeros((5, DIM), dtype=np.float32)
    x[3:] = cb.centres[0][1]
    np.testing.assert_array_equal(cb.quantize(x), brute_force_codes(cb, x))


def test_sids_are_spec_sids(fitted, data):
    sids = fitted.codebooks_.sids(data[:5])
    assert all(isinstance(s, SID) and s.spec == fitted.codebooks_.spec for s in sids)
    assert [s.codes for s in sids] == [tuple(r) for r in fitted.codes_[:5].tolist()]


# --- reconstruction -----------------------------------------------------------------------------


def test_reconstruction_is_sum_of_chosen_centres(fitted, data):
    cb = fitted.codebooks_
    codes = fitted.codes_
    for depth in range(len(SIZES) + 1):
        want = np.zeros((len(data), DIM))
        for level in range(depth):
            want += cb.centres[level].astype(np.float64)[codes[:, level]]
        np.testing.assert_allclose(cb.reconstruct(codes, depth), want, rtol=0, atol=1e-12)
        np.testing.assert_allclose(cb.residuals(data, depth), data - want, atol=1e-12)
    np.testing.assert_allclose(
        cb.reconstruction_error(data), np.linalg.norm(data - cb.reconstruct(codes), axis=1)
    )


def test_error_decreases_with_depth_on_fit_set(fitted, data):
    cb = fitted.codebooks_
    errors = [float((cb.residuals(data, d) ** 2).sum(1).mean()) for d in range(len(SIZES) + 1)]
    assert all(a > b for a, b in itertools.pairwise(errors)), errors
    assert fitted.level_mse_ == pytest.approx(errors[1:])


def test_reconstruct_rejects_bad_codes_and_depth(fitted):
    cb = fitted.codebooks_
    with pytest.raises(InvalidSID, match="level 2"):
        cb.reconstruct(np.array([[0, SIZES[1], 0]]))
    with pytest.raises(InvalidSID):
        cb.reconstruct(np.array([[0.5, 0, 0]]))
    with pytest.raises(CodebookError, match="depth"):
        cb.reconstruct(np.zeros((1, 3), dtype=int), depth=4)
    assert cb.reconstruct(np.zeros((2, 1), dtype=int), depth=1).shape == (2, DIM)


def test_sampled_kmeans_start_is_exact_and_close(data):
    """A K-means start on 4 rows per centre: codes stay exact, the error stays near the full fit."""
    full = fit(data, "euclidean", max_points_per_centre=None)
    sampled = fit(data, "euclidean", max_points_per_centre=4)
    assert sampled.codebooks_.metadata.max_points_per_centre == 4
    np.testing.assert_array_equal(brute_force_codes(sampled.codebooks_, data), sampled.codes_)
    assert sampled.level_mse_[-1] < 1.1 * full.level_mse_[-1]
    assert fit(data, "euclidean", max_points_per_centre=4).codebooks_ == sampled.codebooks_


# --- frozen codebooks, save and load ------------------------------------------------------------


def test_arrays_and_attributes_are_read_only(fitted):
    cb = fitted.codebooks_
    for arr in (*cb.centres, *cb.multipliers, *(cb.directions or ())):
        assert not arr.flags.writeable
        with pytest.raises(ValueError):
            arr[0] = 1.0
    with pytest.raises(AttributeError, match="frozen"):
        cb._centres = ()


def test_save_load_round_trip(fitted, data, tmp_path):
    cb = fitted.codebooks_
    out = cb.save(tmp_path / "cb")
    assert sorted(p.name for p in out.iterdir()) == ["centres.npz", "metadata.json"]
    back = Codebooks.load(out)
    assert back.hash == cb.hash and back == cb
    assert back.metadata == cb.metadata
    np.testing.assert_array_equal(back.quantize(data), cb.quantize(data))
    assert not back.centres[0].flags.writeable


def test_hash_ignores_fit_time_but_not_content(data):
    a, b = fit(data, "euclidean").codebooks_, fit(data, "euclidean").codebooks_
    assert a.hash == b.hash
    assert fit(data, "euclidean", seed=3).codebooks_.hash != a.hash
    assert fit(data, "euclidean", encoder_prefix="p: ").codebooks_.hash != a.hash


def test_save_refuses_a_non_empty_directory(fitted, tmp_path):
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "keep.txt").write_text("mine")
    with pytest.raises(CodebookError, match="not empty"):
        fitted.codebooks_.save(tmp_path / "x")
    assert (tmp_path / "x" / "keep.txt").read_text() == "mine"


def _tamper_metadata(path):
    meta = json.loads((path / "metadata.json").read_text())
    meta["weight"] = 0.75 if meta["distance"] == "weighted" else None
    meta["encoder_prefix"] = "edited"
    (path / "metadata.json").write_text(json.dumps(meta))


def _weight_on_euclidean(path):
    meta = json.loads((path / "metadata.json").read_text())
    meta["distance"], meta["weight"] = "euclidean", 0.3
    (path / "metadata.json").write_text(json.dumps(meta))


def _tamper_centres(path):
    with np.load(path / "centres.npz") as npz:
        arrays = dict(npz)
    arrays["centres_2"] = arrays["centres_2"] + 1e-3
    np.savez(path / "centres.npz", **arrays)


def _truncate_centres(path):
    (path / "centres.npz").write_bytes(b"PK\x03\x04 not really a zip")


def _drop_hash(path):
    meta = json.loads((path / "metadata.json").read_text())
    meta["hash"] = ""
    (path / "metadata.json").write_text(json.dumps(meta))


@pytest.mark.parametrize(
    ("tamper", "match"),
    [
        (_tamper_metadata, "hash mismatch"),
        (_tamper_centres, "hash mismatch"),
        (_truncate_centres, "centres.npz"),
        (_drop_hash, "metadata.json"),
        (_weight_on_euclidean, "metadata.json"),
        (lambda p: (p / "metadata.json").write_text("{not json"), "metadata.json"),
        (lambda p: (p / "metadata.json").unlink(), "metadata.json is missing"),
    ],
)
def test_tampered_directory_is_refused(fitted, tmp_path, tamper, match):
    out = fitted.codebooks_.save(tmp_path / "cb")
    tamper(out)
    with pytest.raises(CodebookError, match=match):
        Codebooks.load(out)


def test_load_missing_directory(tmp_path):
    with pytest.raises(CodebookError, match="does not exist"):
        Codebooks.load(tmp_path / "nope")


# --- distance settings --------------------------------------------------------------------------


def test_weighted_with_zero_weight_is_euclidean(data):
    e, w = fit(data, "euclidean"), fit(data, "weighted", weight=0.0)
    for a, b in zip(e.codebooks_.centres, w.codebooks_.centres, strict=True):
        np.testing.assert_array_equal(a, b)
    assert all((m == 1).all() for m in w.codebooks_.multipliers)
    np.testing.assert_array_equal(e.codes_, w.codes_)


def test_weighted_balances_skewed_data():
    x = clustered_embeddings(1500, DIM, clusters=20, skew=2.0, seed=4)
    sizes = (16, 8, 4)
    scores = {}
    for distance in ("euclidean", "weighted"):
        model = fit(x, distance, sizes=sizes)
        scores[distance] = codebook_metrics(model.codes_, model.codebooks_.spec)
    e, w = scores["euclidean"], scores["weighted"]
    assert w.dui > e.dui + 0.02, (e.dui, w.dui)
    assert w.used_leaves > e.used_leaves, (e.used_leaves, w.used_leaves)


def test_spherical_directions_are_unit_and_centres_scale_them(data):
    cb = fit(data, "spherical").codebooks_
    for u, c in zip(cb.directions, cb.centres, strict=True):
        np.testing.assert_allclose(np.linalg.norm(u, axis=1), 1.0, atol=1e-6)
        scale = (c * u).sum(1)
        np.testing.assert_allclose(c, scale[:, None] * u, atol=1e-6)


# --- bad input ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("x", "match"),
    [
        (np.zeros((5, DIM)), "at least 8 embeddings"),
        (np.full((20, DIM), np.nan), "NaN or inf"),
        (np.full((20, DIM), np.inf), "NaN or inf"),
        (np.zeros(20), "2-D"),
        (np.zeros((20, DIM, 1)), "2-D"),
        (np.array([["a"] * DIM] * 20), "real-valued"),
        (np.zeros((20, 0)), "no columns"),
    ],
)
def test_fit_rejects_bad_input(x, match):
    with pytest.raises(CodebookError, match=match):
        fit(x)


def test_quantize_rejects_wrong_dimension(fitted):
    with pytest.raises(CodebookError, match="dimension 7"):
        fitted.codebooks_.quantize(np.zeros((3, 7), dtype=np.float32))


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"distance": "euclidean", "weight": 0.5}, "only applies to distance='weighted'"),
        ({"weight": -1.0}, "finite number >= 0"),
        ({"distance": "manhattan"}, "unknown"),
        ({"sizes": ()}, "at least one level"),
        ({"sizes": (8, 0)}, "level 2"),
        ({"n_init": 0}, "n_init"),
        ({"max_points_per_centre": 0}, "max_points_per_centre"),
        ({"seed": -1}, "seed"),
        ({"tol": float("nan")}, "tol"),
    ],
)
def test_config_rejects_bad_combinations(kwargs, match):
    with pytest.raises(CodebookError, match=match):
        RQKMeansConfig(**kwargs)


def test_config_defaults_are_the_papers():
    cfg = RQKMeansConfig()
    assert (cfg.sizes, cfg.distance, cfg.weight) == ((48, 16, 8, 8), "weighted", 0.5)
    assert RQKMeansConfig(distance="euclidean").weight is None


@pytest.mark.parametrize("fitted", ["weighted"], indirect=True)
def test_an_archive_with_an_unknown_compression_method_is_a_codebook_error(fitted, tmp_path):
    """Found by fuzzing: zipfile raises NotImplementedError for a damaged method field."""
    from genmem.memory.rqkmeans import Codebooks

    target = fitted.codebooks_.save(tmp_path / "cb", remember=False)
    archive = target / "centres.npz"
    data = bytearray(archive.read_bytes())
    at = data.index(b"PK\x01\x02") + 10  # the first central-directory record's method field
    data[at : at + 2] = (99).to_bytes(2, "little")
    archive.write_bytes(bytes(data))
    with pytest.raises(CodebookError, match="cannot be read as codebook arrays"):
        Codebooks.load(target, remember=False)
