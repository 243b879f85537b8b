"""JSONL files: run outputs survive a kill mid-write, input data stays strict."""

from __future__ import annotations

import json
import re
import warnings
from pathlib import Path

import pytest

from genmem.envs.bundled import (
    GSM8K_TRAIN,
    append_jsonl,
    jsonl_rows,
    read_gsm8k,
    read_jsonl,
    replace_jsonl,
)

ROWS = [{"id": "a", "text": "première"}, {"id": "b", "text": "second"}]


def _sealed(rows: list[dict]) -> bytes:
    return "".join(json.dumps(r) + "\n" for r in rows).encode("utf-8")


def _torn(path: Path, rows: list[dict], fragment: bytes) -> Path:
    """A results file as kill -9 during ``append_jsonl`` leaves it: whole lines, then a piece."""
    path.write_bytes(_sealed(rows) + fragment)
    return path


@pytest.mark.parametrize(
    "fragment",
    [
        b'{"id": "c", "te',  # cut inside the object
        '{"id": "c", "text": "é'.encode()[:-1],  # cut inside a two-byte character
        b'{"id": "c", "text": "done"}',  # whole object, cut before its newline
    ],
    ids=["mid-object", "mid-character", "before-newline"],
)
def test_a_torn_last_line_is_dropped_and_reported(tmp_path: Path, fragment: bytes) -> None:
    path = _torn(tmp_path / "results.jsonl", ROWS, fragment)
    with pytest.warns(RuntimeWarning, match=rf"{re.escape(str(path))}:3: .*torn"):
        assert jsonl_rows(path) == ROWS


def test_the_next_append_replaces_the_torn_line(tmp_path: Path) -> None:
    path = _torn(tmp_path / "results.jsonl", ROWS, b'{"id": "c", "te')
    append_jsonl(path, {"id": "c", "text": "again"})
    assert path.read_bytes() == _sealed([*ROWS, {"id": "c", "text": "again"}])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing torn any more: no warning
        assert [r["id"] for r in jsonl_rows(path)] == ["a", "b", "c"]


def test_append_keeps_whole_files_and_starts_new_ones(tmp_path: Path) -> None:
    path = tmp_path / "new.jsonl"
    append_jsonl(path, ROWS[0])
    append_jsonl(path, ROWS[1])
    assert path.read_bytes() == _sealed(ROWS)
    only_fragment = _torn(tmp_path / "fragment.jsonl", [], b'{"id"')
    append_jsonl(only_fragment, ROWS[0])
    assert only_fragment.read_bytes() == _sealed(ROWS[:1])


@pytest.mark.parametrize(
    ("content", "line"),
    [
        (_sealed(ROWS[:1]) + b'{"id": "b", "te\n' + _sealed(ROWS[1:]), 2),  # torn, then more
        (_sealed(ROWS) + b'{"id": "c", "te\n', 3),  # bad, but its newline was written
        (_sealed(ROWS) + b"[1, 2]\n", 3),  # JSON, not an object
        (_sealed(ROWS[:1]) + b'{"id": "caf\xe9"}\n' + _sealed(ROWS[1:]), 2),  # not UTF-8
    ],
    ids=["torn-not-last", "bad-last-with-newline", "not-an-object", "not-utf8"],
)
def test_other_bad_lines_in_results_still_raise(tmp_path: Path, content: bytes, line: int) -> None:
    path = tmp_path / "results.jsonl"
    path.write_bytes(content)
    with pytest.raises(ValueError, match=rf"{re.escape(str(path))}:{line}: "):
        jsonl_rows(path)


@pytest.mark.parametrize(
    "fragment",
    [b'{"question": "How many', b'{"question": "caf\xc3'],
    ids=["torn", "torn-mid-character"],
)
def test_input_data_is_strict_even_on_its_last_line(tmp_path: Path, fragment: bytes) -> None:
    data = tmp_path / "data.jsonl"
    data.write_bytes(_sealed(ROWS) + fragment)
    with pytest.raises(ValueError, match=rf"{re.escape(str(data))}:3: "):
        list(read_jsonl(data))


def test_a_damaged_copy_of_bundled_data_names_the_line(tmp_path: Path) -> None:
    lines = GSM8K_TRAIN.read_bytes().splitlines(keepends=True)[:5]
    damaged = tmp_path / "train.jsonl"
    damaged.write_bytes(b"".join(lines[:4]) + lines[4][:30])  # the fifth problem cut short
    assert len(read_gsm8k(GSM8K_TRAIN, limit=5)) == 5
    with pytest.raises(ValueError, match=rf"{re.escape(str(damaged))}:5: "):
        read_gsm8k(damaged)


def test_missing_results_file_is_empty(tmp_path: Path) -> None:
    assert jsonl_rows(tmp_path / "nothing-yet.jsonl") == []


def test_a_rewrite_stopped_midway_keeps_every_old_record(tmp_path: Path) -> None:
    path = tmp_path / "records.jsonl"
    path.write_bytes(_sealed(ROWS))

    def rows_then_a_kill():
        yield {"id": "a", "text": "rewritten"}
        raise KeyboardInterrupt  # the run is stopped while the new file is being written

    with pytest.raises(KeyboardInterrupt):
        replace_jsonl(path, rows_then_a_kill())
    assert path.read_bytes() == _sealed(ROWS)
    assert [p.name for p in tmp_path.iterdir()] == ["records.jsonl"]  # no temporary file left
    replace_jsonl(path, [*ROWS, {"id": "c", "text": "new"}])
    assert jsonl_rows(path) == [*ROWS, {"id": "c", "text": "new"}]
