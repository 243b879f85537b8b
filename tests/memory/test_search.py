"""Configuration search: one row per (sizes, distance), CSV and JSON written, inputs checked."""

from __future__ import annotations

import csv
import json

import pytest

from genmem.errors import CodebookError
from genmem.memory.search import (
    SearchRow,
    format_search_table,
    parse_configs,
    search_configs,
    write_search_results,
)
from tests.fakes import clustered_embeddings


@pytest.fixture(scope="module")
def rows() -> list[SearchRow]:
    x = clustered_embeddings(300, 12, clusters=8, skew=1.5, seed=2)
    return search_configs(
        x, [(8, 4, 2), (6, 6)], ["euclidean", "spherical", "weighted"], progress=False
    )


def test_one_row_per_configuration_and_distance(rows):
    assert [(r.label, r.distance) for r in rows] == [
        ("8x4x2", "euclidean"),
        ("8x4x2", "spherical"),
        ("8x4x2", "weighted"),
        ("6x6", "euclidean"),
        ("6x6", "spherical"),
        ("6x6", "weighted"),
    ]
    first = rows[0]
    assert (first.levels, first.capacity, first.vocab_size, first.n) == (3, 64, 14, 300)
    assert [r.weight for r in rows[:3]] == [None, None, 0.5]
    assert all(r.fit_seconds > 0 and r.recon_mse > 0 for r in rows)
    assert all(r.recon_mse_per_dim == pytest.approx(r.recon_mse / 12) for r in rows)
    assert len({r.hash for r in rows}) == len(rows)


def test_results_written_as_csv_and_json(rows, tmp_path):
    csv_path, json_path = write_search_results(rows, tmp_path / "out" / "search.csv")
    assert json_path == tmp_path / "out" / "search.json"
    with csv_path.open() as fh:
        table = list(csv.DictReader(fh))
    assert len(table) == len(rows)
    assert table[0]["sizes"] == "8x4x2" and table[0]["weight"] == ""
    assert len(table[0]["utilization"].split("/")) == 3
    assert [SearchRow(**r) for r in json.loads(json_path.read_text())] == rows
    text = format_search_table(rows)
    assert "weighted(0.5)" in text and len(text.splitlines()) == len(rows) + 2


def test_parse_configs():
    assert parse_configs("48,16,8,8; 48x24x24") == [(48, 16, 8, 8), (48, 24, 24)]
    for bad in ("", "48,a", "48,0"):
        with pytest.raises(ValueError):
            parse_configs(bad)


def test_inputs_checked_before_any_fit():
    x = clustered_embeddings(20, 4)
    with pytest.raises(CodebookError, match="at least 32"):
        search_configs(x, [(4, 2), (32, 2)], ["euclidean"], progress=False)
    with pytest.raises(CodebookError, match="unknown"):
        search_configs(x, [(4, 2)], ["euclidean", "cosine"], progress=False)
    with pytest.raises(CodebookError, match="nothing to search"):
        search_configs(x, [], ["euclidean"], progress=False)


def test_a_heldout_share_is_kept_out_of_the_fit_and_scored_apart():
    x = clustered_embeddings(300, 12, clusters=8, skew=1.5, seed=2)
    (row,) = search_configs(x, [(8, 4, 2)], ["euclidean"], heldout=0.2, progress=False)
    assert (row.n, row.heldout_n) == (240, 60)  # metrics on the fitted rows, 60 held out
    assert row.heldout_mse_per_dim > 0 and len(row.heldout_mse_by_depth) == 3
    assert 0.0 <= row.heldout_leaf_utilization <= 1.0
    # points it never saw are reconstructed worse than the ones it was fitted on
    assert row.heldout_mse_per_dim > row.recon_mse_per_dim
    assert "held MSE/dim" in format_search_table([row])
    (plain,) = search_configs(x, [(8, 4, 2)], ["euclidean"], progress=False)
    assert plain.heldout_n == 0 and plain.heldout_mse_per_dim is None
    with pytest.raises(CodebookError, match="heldout"):
        search_configs(x, [(8, 4, 2)], ["euclidean"], heldout=1.0, progress=False)
