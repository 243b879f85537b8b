"""The cooking demo: games in order on a bank seeded from a training walkthrough, each game's
update written by the template writer before the next; what the report says. Small games (one
ingredient, one room, cook only, 12 steps) and a fake model keep it quick; the real model's
part (choosing among the writer's candidates) is tested in ``tests/envs/test_cooking_experience``,
and a whole game with it costs minutes (the demo's own runs are recorded in bench/README.md).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

pytest.importorskip("textworld")

from genmem.cli import main
from genmem.envs.cooking import CookingConfig
from genmem.envs.cooking_experience import parse_procedure
from genmem.experiments.cooking_demo import (
    CookingDemoConfig,
    DemoGame,
    _shown,
    render_demo,
    run_cooking_demo,
)
from genmem.memory.location import open_bank
from tests.fakes import ScoringChat, by_role


def _small(cooking_config: CookingConfig) -> CookingConfig:
    """Two small cooking-valid games beside the session's small train game."""
    return cooking_config.model_copy(update={"split": "valid", "n_games": 2, "seed": 3})


def _delegate(messages: list[Any]) -> str:
    return json.dumps(
        {"thought": "t", "action": {"action": "delegate", "agent": "interactor", "task": "cook"}}
    )


def test_games_run_in_order_on_the_bank_the_earlier_ones_wrote(tmp_path, cooking_config) -> None:
    chat = ScoringChat(reply=by_role(team=_delegate, other="<answer>cook it</answer>"))
    config = CookingDemoConfig(games=2, seed_games=1)
    out = tmp_path / "demo"
    (out / "games").mkdir(parents=True)
    (out / "games" / "records.jsonl").write_text("an earlier demo's record\n")
    (out / "notes.txt").write_text("the user's own file")
    report = run_cooking_demo(config, out, games=_small(cooking_config), chat=chat, progress=False)
    # an earlier demo's files went (its records would have been resumed), nothing else did
    assert (out / "notes.txt").read_text() == "the user's own file"
    assert report.seeded == 1 and len(report.games) == 2
    assert all(g.id.startswith("cook-valid-") and g.error is None for g in report.games)
    bank = open_bank(report.bank_url)
    events = bank.events()
    # the seed came from a training walkthrough; every later write is the template writer's
    assert events[0].op == "insert" and events[0].actor != "mem_evolver"
    assert all(e.actor == "mem_evolver/template" for e in events[1:])
    for game in report.games:
        assert game.read_sid is not None
        assert game.wrote is not None  # an update, or why there was none
        assert game.why and ("template writer" in game.why or "nothing in this run" in game.why)
    for entry in bank.entries():
        parse_procedure(entry.payload)  # every entry is a procedure the prior can read
    text = render_demo(report)
    assert "game 1 (" in text and "game 2 (" in text and report.shown in text
    assert "started 1 entries from training walkthroughs" in text


def test_the_report_says_a_win_after_a_write_only_when_it_happened() -> None:
    def game(i: int, won: bool, read: str | None, wrote: str | None) -> DemoGame:
        return DemoGame(
            id=f"g{i}", won=won, lost=not won, steps_left=0.5, read_sid="<S>",
            read=read, wrote=wrote, update_sid="<S>" if wrote else None,
        )  # fmt: skip

    lost_then_won = [game(1, False, None, "inserted"), game(2, True, "v1: from 1 lost plays", None)]
    assert _shown(lost_then_won).startswith("g2 was won after reading <S>")
    assert "g1 wrote" in _shown(lost_then_won)
    never_lost = [game(1, True, "v1", "revised"), game(2, True, "v2", "revised")]
    said = _shown(never_lost)  # a win on a changed entry, but nothing lost before it
    assert said.startswith("1 game(s) were won after reading an entry earlier games had changed")
    assert "(g2 first)" in said and "does not show that the changes mattered" in said
    retained = [game(1, False, None, "retained"), game(2, True, "v1", "retained")]
    said = _shown(retained, seeded=2)
    assert "updates: retained 2" in said and "does not show the agent learning" in said
    assert "seeded training procedure" in said and "seeded" not in _shown(retained)


def test_bad_demo_settings_are_refused(capsys) -> None:
    for argv, field in ((["--seed-games", "-1"], "seed_games"), (["--games", "1"], "games")):
        assert main(["demo", "--bench", "cooking", *argv]) == 2
        assert field in capsys.readouterr().err
