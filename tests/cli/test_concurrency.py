"""``--concurrency N``: one flag, one help, every command that runs tasks; bad values exit 2."""

from __future__ import annotations

import pytest

from genmem.cli import main
from genmem.cli.main import build_parser

_EVOLVE = ["--blocks", "1", "--block-size", "1", "--probe-size", "1"]
COMMANDS = {
    "eval": ["eval", "--bench", "gsm8k-test"],
    "run": ["run", "--bench", "gsm8k-test", "--bank", "sqlite:///{tmp}/b.db?bank=b"],
    "bank coldstart": ["bank", "coldstart", "--bench", "gsm8k-train", "--bank", "sqlite:///{tmp}/b.db"],
    "evolve": ["evolve", "--bench", "gsm8k-test", "--bank", "sqlite:///{tmp}/b.db", *_EVOLVE],
}  # fmt: skip


def _exit(argv: list[str]) -> int:
    try:
        return main(argv)
    except SystemExit as exc:  # argparse's own refusals
        return int(exc.code or 0)


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("value", ["0", "-2", "two"])
def test_a_bad_concurrency_exits_2_before_any_work(tmp_path, capsys, command, value) -> None:
    argv = [a.replace("{tmp}", str(tmp_path)) for a in COMMANDS[command]]
    out = tmp_path / "out"
    assert _exit([*argv, "--concurrency", value, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "argument --concurrency" in err and ("must be >= 1" in err or "not an integer" in err)
    assert not out.exists() and not (tmp_path / "b.db").exists()


@pytest.mark.parametrize("command", ["eval", "run"])
def test_evolve_mode_takes_one_task_at_a_time(tmp_path, capsys, command) -> None:
    argv = [a.replace("{tmp}", str(tmp_path)) for a in COMMANDS[command]]
    out = tmp_path / "out"
    code = _exit([*argv, "--mode", "evolve", "--concurrency", "4", "--out", str(out)])
    assert code == 2
    err = capsys.readouterr().err
    assert "--concurrency 4 with --mode evolve" in err and len(err.strip().splitlines()) == 1
    assert not out.exists()


def test_the_flag_has_one_help_everywhere() -> None:
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command").choices
    bank = next(a for a in sub["bank"]._actions if a.dest and "command" in a.dest).choices
    parsers = [sub["eval"], sub["run"], sub["evolve"], bank["coldstart"]]
    helps = {next(a for a in p._actions if a.dest == "concurrency").help for p in parsers}
    defaults = {p.get_default("concurrency") for p in parsers}
    assert len(helps) == 1 and defaults == {1}
