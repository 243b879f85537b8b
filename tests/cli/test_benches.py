"""One way to name tasks: `genmem benches` lists the registry, and every command that takes
tasks takes --bench NAME or --data FILE; the old --dataset/--split spellings exit 2 naming
the new one and change nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from genmem.cli import main
from genmem.envs.benches import BENCHES, open_bench


def test_benches_lists_every_bench_with_its_tasks_metrics_and_needs(capsys) -> None:
    assert main(["benches", "--json"]) == 0
    rows = {r["name"]: r for r in json.loads(capsys.readouterr().out)}
    assert list(rows) == list(BENCHES)
    assert rows["gsm8k-test"]["tasks"] == len(open_bench("gsm8k-test").tasks()) == 1319
    assert rows["hotpotqa-distractor"]["tasks"] == len(open_bench("hotpotqa-distractor").tasks())
    assert rows["gsm8k-train"]["metrics"] == ["accuracy"] and rows["nq"]["metrics"] == ["f1", "em"]
    assert rows["gsm8k-train"]["needs"] is None
    assert "WEBSHOP_URL" in rows["webshop"]["needs"] and rows["webshop"]["tasks"] is None
    assert main(["benches"]) == 0
    table = capsys.readouterr().out.splitlines()
    assert table[0].split() == ["bench", "tasks", "metrics", "needs"]
    assert [line.split()[0] for line in table[1:]] == list(BENCHES)


_TAKES_TASKS = [
    (["run", "--bank", "sqlite:///{tmp}/b.db"], "gsm8k-test", "test"),
    (["eval", "--methods", "none"], "gsm8k-test", "test"),
    (["evolve", "--bank", "sqlite:///{tmp}/b.db", "--blocks", "1", "--block-size", "1",
      "--probe-size", "1"], "gsm8k-test", "test"),
    (["bank", "coldstart", "--bank", "sqlite:///{tmp}/b.db"], "gsm8k-train", "train"),
    (["train", "mid", "--bank", "sqlite:///{tmp}/b.db"], "gsm8k-train", "train"),
    (["train", "grpo", "--bank", "sqlite:///{tmp}/b.db"], "gsm8k-train", "train"),
]  # fmt: skip


@pytest.mark.parametrize(("argv", "bench", "split"), _TAKES_TASKS, ids=lambda x: x[0])
def test_old_spellings_exit_2_naming_the_bench(
    tmp_path: Path, capsys, argv: list[str], bench: str, split: str
) -> None:
    out = tmp_path / "out"
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv] + ["--out", str(out)]
    old = ["--dataset", "gsm8k"] if argv[0] != "run" else ["--dataset", "gsm8k-test"]
    for spelling, want in ((old, bench), (["--dataset", "gsm8k", "--split", split], bench)):
        assert main([*argv, *spelling]) == 2
        err = capsys.readouterr().err
        assert f"is now spelled --bench {want}" in err and len(err.strip().splitlines()) == 1
    assert not out.exists() and not (tmp_path / "b.db").exists()
