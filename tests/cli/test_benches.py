"""One way to name tasks: `genmem benches` lists the registry, and every command that takes
tasks takes --bench NAME or --data FILE; --dataset and --split are no flags of any of them.
An environment registered once is listed, taken by --bench, given its option flags, opened
and offered as a seed source, with nothing else edited."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import Field

from genmem.cli import main
from genmem.envs.base import Environment, Outcome, Task
from genmem.envs.benches import (
    BENCHES,
    ENVIRONMENTS,
    Bench,
    BenchOptions,
    EnvOptions,
    EnvSpec,
    Seeding,
    open_bench,
    register,
    unregister,
)


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
    ["run", "--bank", "sqlite:///{tmp}/b.db"],
    ["eval", "--methods", "none"],
    ["evolve", "--bank", "sqlite:///{tmp}/b.db", "--blocks", "1", "--block-size", "1",
     "--probe-size", "1"],
    ["bank", "coldstart", "--bank", "sqlite:///{tmp}/b.db"],
    ["train", "mid", "--bank", "sqlite:///{tmp}/b.db"],
    ["train", "grpo", "--bank", "sqlite:///{tmp}/b.db"],
]  # fmt: skip


@pytest.mark.parametrize("argv", _TAKES_TASKS, ids=lambda argv: " ".join(argv[:2]))
def test_the_old_dataset_and_split_flags_are_refused_as_unknown(
    tmp_path: Path, capsys, argv: list[str]
) -> None:
    out = tmp_path / "out"
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv] + ["--out", str(out)]
    for old in (["--dataset", "gsm8k"], ["--dataset", "gsm8k", "--split", "train"]):
        with pytest.raises(SystemExit) as exc:
            main([*argv, *old])
        assert exc.value.code == 2
        assert f"unrecognized arguments: {' '.join(old)}" in capsys.readouterr().err
    assert not out.exists() and not (tmp_path / "b.db").exists()


class _Toy(Environment):
    """Sums of two small numbers; the answer's last word is scored against the sum."""

    name = "toy"
    metric_names = ("accuracy",)

    def __init__(self, n: int) -> None:
        self.n = n

    def tasks(self, limit: int | None = None) -> list[Task]:
        sums = [
            Task(id=f"toy-{i}", query=f"{i} + {i}?", reference=str(2 * i)) for i in range(self.n)
        ]
        return sums[:limit]

    def score(self, task: Task, answer: str | None) -> Outcome:
        right = float((answer or "").split()[-1:] == [task.reference])
        return Outcome(score=right, success=right == 1.0, metrics={"accuracy": right})


class _ToyOptions(EnvOptions):
    toy_sums: int = Field(default=4, ge=1, description="toy sums in the set (4)")


def _toy_rows(n: int) -> list[dict[str, Any]]:
    return [{"question": f"{i} + {i}?", "answer": str(2 * i)} for i in range(n)]


@pytest.fixture
def toy() -> Iterator[EnvSpec]:
    """A toy environment in the registry for one test, removed again after it."""
    spec = register(
        EnvSpec(
            name="toy",
            benches=(Bench(name="toy-sums", about="sums of two numbers", metrics=("accuracy",)),),
            open=lambda bench, options: _Toy(options.toy_sums),
            options=_ToyOptions,
            count=lambda bench, options: options.toy_sums,
            seed=Seeding(
                about="toy sums",
                rows=_toy_rows,
                heldout="toy-sums",
                write=lambda question, answer: f"Add the two numbers of {question}",
            ),
        )
    )
    yield spec
    if "toy" in ENVIRONMENTS:
        unregister("toy")


def test_a_registered_environment_is_listed_taken_by_bench_and_opened(toy, capsys) -> None:
    from genmem.cli.main import build_parser
    from genmem.cli.tasks import environment
    from genmem.experiments.seed_bank import SeedBankConfig, seed_texts

    assert main(["benches", "--json"]) == 0
    rows = {r["name"]: r for r in json.loads(capsys.readouterr().out)}
    assert rows["toy-sums"] == {
        "name": "toy-sums", "tasks": 4, "metrics": ["accuracy"], "needs": None,
        "about": "sums of two numbers",
    }  # fmt: skip
    assert main(["benches"]) == 0
    assert "toy-sums" in capsys.readouterr().out
    # --bench takes it, and its option is a flag of every command that takes tasks
    evaluate = ["eval", "--out", "unused", "--bench", "toy-sums"]  # parsed only
    args = build_parser().parse_args([*evaluate, "--toy-sums", "2"])
    env = environment(args)
    assert isinstance(env, _Toy) and [t.reference for t in env.tasks()] == ["0", "2"]
    assert env.score(env.tasks()[1], "it is 2").success
    assert len(open_bench("toy-sums", BenchOptions(toy_sums=3)).tasks()) == 3
    with pytest.raises(SystemExit):
        build_parser().parse_args([*evaluate, "--toy-sums", "0"])
    assert "must be >= 1" in capsys.readouterr().err
    # and it seeds a bank: --source takes it, its own writer writes the experiences
    args = build_parser().parse_args(["bank", "seed", "--source", "toy", "--distill", "abstract"])
    assert args.source == "toy"
    with pytest.raises(ValueError, match="abstract experiences only"):
        SeedBankConfig(source="toy", distill="procedure", fit_size=48)
    cfg = SeedBankConfig(source="toy", distill="abstract", size=2, fit_size=48)
    assert seed_texts(cfg)[:2] == ["Add the two numbers of 0 + 0?", "Add the two numbers of 1 + 1?"]


def test_once_unregistered_an_environment_is_gone(toy, capsys) -> None:
    unregister("toy")
    assert "toy-sums" not in BENCHES
    with pytest.raises(SystemExit):
        main(["eval", "--out", "unused", "--bench", "toy-sums"])
    err = capsys.readouterr().err
    assert "invalid choice: 'toy-sums'" in err and "gsm8k-train" in err  # the valid names
