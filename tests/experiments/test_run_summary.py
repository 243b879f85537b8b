"""`genmem run` / `demo` totals: an errored query with a reference is a wrong answer."""

from __future__ import annotations

import pytest

from genmem.experiments.runner import QueryRecord, summarize


def _query(i: int, score: float | None, *, error: str | None = None, ref: str | None = "4"):
    return QueryRecord(
        id=str(i), query=f"q{i}", mode="evolve", score=score, reference=ref, error=error
    )


def test_an_errored_query_with_a_reference_counts_as_wrong() -> None:
    records = [
        _query(1, 1.0),
        _query(2, 0.0),
        _query(3, None, error="RuntimeError('model crashed')"),
        _query(4, None, error="RuntimeError('model crashed')", ref=None),  # nothing to score
        _query(5, None, ref=None),
    ]
    summary = summarize(records)
    assert (summary.queries, summary.scored, summary.errors) == (5, 3, 2)
    assert summary.accuracy == pytest.approx(1 / 3)
    lo, hi = summary.accuracy_ci  # type: ignore[misc]
    assert 0.0 <= lo <= 1 / 3 <= hi <= 1.0
    assert summary.intervals.resamples >= 1000
    # Without a scorer nothing is scored, so an error is no wrong answer either.
    unscored = summarize([_query(1, None), _query(2, None, error="boom")], scoring=False)
    assert (unscored.scored, unscored.accuracy, unscored.accuracy_ci) == (0, None, None)


def test_a_run_where_everything_errored_has_accuracy_zero() -> None:
    summary = summarize([_query(1, None, error="boom"), _query(2, None, error="boom")])
    assert (summary.scored, summary.accuracy, summary.accuracy_ci) == (2, 0.0, (0.0, 0.0))


def test_the_table_shows_the_interval_and_says_errors_count() -> None:
    from genmem.cli.run import render_table

    records = [_query(1, 1.0), _query(2, 0.0), _query(3, None, error="boom")]
    text = render_table(records, summarize(records))
    assert "correct 33% [0%, 100%] of 3 (errored runs count as wrong)" in text
    assert "error" in text.splitlines()[4]
