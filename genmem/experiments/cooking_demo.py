"""The cooking demo: cooking games played in order, each one's experience written back to the
bank before the next, so a later game can use what an earlier one lost or won.

Every game is a ``cooking-valid`` game (never in a bank or in training). The bank, addressed by
the shipped cooking codebooks (:data:`~genmem.envs.bundled.COOKING_CODEBOOKS`), starts with the
procedures of a few ``cooking-train`` walkthroughs (the paper's seed bank, small), or empty.
Each game runs the closed loop in ``evolve`` mode (:func:`~genmem.experiments.evaluate.evaluate`
with the ``sid`` method): MemRetriever reads the bank, the ranking interactor plays with the
action prior (weight fixed on training games), and MemEvolver's template writer distils the
game's plays into a procedure that is inserted, or merged with the stored one (retained when
the merge adds nothing; ``EvolverConfig.choice_rule``). The
report says, per game, what was read and written, and whether a game was won after reading what
an earlier game wrote. A handful of games is an illustration; the measurements are in
``docs/results.md``.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

if TYPE_CHECKING:
    from genmem.envs.cooking import CookingConfig
    from genmem.experiments.evaluate import EvalRecord

__all__ = [
    "DEMO_PRIOR_WEIGHT",
    "CookingDemoConfig",
    "CookingDemoReport",
    "DemoGame",
    "render_demo",
    "run_cooking_demo",
]

DEMO_PRIOR_WEIGHT = 5.0
"""The action prior's weight, chosen on ``cooking-train`` games (bench/ranker_scoring.py)."""


class CookingDemoConfig(BaseModel):
    """Which games the cooking demo plays, and how."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    games: int = Field(default=3, ge=2, le=20, description="cooking-valid games, in order.")
    seed_games: int = Field(
        default=2,
        ge=0,
        le=48,
        description="cooking-train games whose walkthroughs seed the bank (their procedures, "
        "by the template distiller); 0 starts from an empty bank.",
    )
    seed: int = Field(default=0, ge=0, description="Which set of cooking-valid games.")
    prior_weight: float = Field(
        default=DEMO_PRIOR_WEIGHT,
        ge=0.0,
        description="Weight of the action prior read from the stored procedure (0: text only).",
    )
    model: str = Field(default="local", description="Model spec of every role (local models).")
    rewrite: bool = Field(
        default=False,
        description="Have MemRetriever rewrite the entry for the game (the paper). Off: the "
        "planner gets the entry as stored, which is what it got anyway (the gate refused every "
        "135M rewrite of a cooking procedure), 6x faster (bench/cooking_episode.py).",
    )


class DemoGame(BaseModel):
    """One game of the demo: what it read, how it went, what it wrote."""

    id: str
    won: bool
    lost: bool
    steps_left: float = Field(description="Share of the step budget left at the end.")
    read_sid: str | None = None
    read: str | None = Field(default=None, description="The entry read: version and origin.")
    wrote: str | None = Field(default=None, description="What MemEvolver did to the bank.")
    update_sid: str | None = None
    why: str | None = None
    seconds: float = 0.0
    error: str | None = None


class CookingDemoReport(BaseModel):
    """The demo's games, the bank it left, and what it shows."""

    games: list[DemoGame]
    seeded: int = Field(description="Entries the bank started with.")
    bank_url: str
    shown: str
    """What the games show about the memory, in a sentence or two (a win after a write, or not)."""
    seconds: float
    out: str


def run_cooking_demo(
    config: CookingDemoConfig,
    out: Path,
    *,
    games: CookingConfig | None = None,
    chat: Any = None,
    progress: bool = True,
) -> CookingDemoReport:
    """Play ``config.games`` cooking-valid games in order through the closed loop, on a bank
    seeded from ``config.seed_games`` training walkthroughs that each game's update writes to;
    what an earlier demo wrote in ``out`` (``start.db``, ``games/``) is removed first, nothing
    else.

    Args:
        config: How many games, which, the prior's weight and the model.
        out: The demo's folder (the starting bank, the games' records and evolving bank).
        games: Other games to play (e.g. smaller ones); default: ``config.games``
            default-difficulty ``cooking-valid`` games of set ``config.seed``.
        chat: A chat model for every role instead of ``config.model`` (it must score choices).
        progress: Show progress bars.
    """
    from genmem.envs.bundled import COOKING_CODEBOOKS
    from genmem.envs.cooking import CookingConfig, CookingEnvironment
    from genmem.experiments.evaluate import EvalConfig, evaluate, read_records
    from genmem.memory.rqkmeans import Codebooks

    started = time.perf_counter()
    out.mkdir(parents=True, exist_ok=True)
    # a demo always starts over: only what an earlier demo wrote here goes
    shutil.rmtree(out / "games", ignore_errors=True)
    for name in ("start.db", "start.db-wal", "start.db-shm"):
        (out / name).unlink(missing_ok=True)
    codebooks = Codebooks.load(COOKING_CODEBOOKS)
    start = f"sqlite:///{(out / 'start.db').resolve()}?bank=cooking-demo"
    seeded = _seed(start, codebooks, config.seed_games, progress)
    env = CookingEnvironment(
        games or CookingConfig(split="valid", n_games=config.games, seed=config.seed)
    )
    settings = EvalConfig(
        model=config.model,
        methods=["sid"],
        mode="evolve",
        bank_url=start,
        limit=config.games,
        interactor="rank",
        prior_weight=config.prior_weight,
        writer="template",
        rewrite=config.rewrite,
    )
    report = evaluate(env, settings, out=out / "games", model=chat, progress=progress)
    records = read_records(Path(report.records))
    bank_url = f"sqlite:///{(out / 'games' / 'banks' / 'sid.db').resolve()}?bank=cooking-demo"
    played = [_game(r) for r in records]
    return CookingDemoReport(
        games=played,
        seeded=seeded,
        bank_url=bank_url,
        shown=_shown(played, seeded),
        seconds=round(time.perf_counter() - started, 1),
        out=str(out),
    )


def _seed(url: str, codebooks: Any, n: int, progress: bool) -> int:
    """Create the starting bank: the template procedures of ``n`` training walkthroughs."""
    from genmem.envs.cooking import cooking_seed_rows
    from genmem.envs.cooking_experience import WRITER, cooking_experience
    from genmem.memory.build import ExperienceRecord
    from genmem.memory.from_texts import bank_from_texts
    from genmem.memory.location import open_bank

    if n == 0:
        open_bank(url, codebooks=codebooks, create=True)
        return 0
    rows = cooking_seed_rows(n)
    records = []
    for row in rows:
        meta = {"source": "cooking-train", "id": row["id"], "writer": WRITER}
        text = cooking_experience(row["question"], row["answer"])
        records.append(ExperienceRecord(text=text, metadata={**meta, "question": row["question"]}))
    built = bank_from_texts(records, url, codebooks=codebooks, progress=progress)
    return built.bank.stats().entries


def _game(record: EvalRecord) -> DemoGame:
    """A record as the demo shows it (the entry read: its version and the plays behind it)."""
    exact = next((h for h in record.retrieved if h.get("sid") == record.sid), None)
    read = None
    if exact is not None:
        payload = str(exact.get("payload") or "")
        origin = payload.splitlines()[0].removeprefix("Cooking procedure, ") if payload else ""
        read = f"v{exact.get('version')}: {origin}"
    elif record.retrieved:
        read = f"{len(record.retrieved)} neighbour(s), no entry at the SID itself"
    return DemoGame(
        id=record.id,
        won=record.success,
        lost=bool(record.metrics.get("lost")),
        steps_left=float(record.metrics.get("budget_left", 0.0)),
        read_sid=record.sid,
        read=read,
        wrote=record.memory_op,
        update_sid=record.update_sid,
        why=record.memory_note,
        seconds=record.seconds,
        error=record.error,
    )


def _shown(games: list[DemoGame], seeded: int = 0) -> str:
    """Whether a game was won after reading an entry an earlier game wrote, said plainly."""
    for i, game in enumerate(games):
        if not game.won or game.read is None or game.read_sid is None:
            continue
        earlier = [g for g in games[:i] if g.update_sid == game.read_sid and g.wrote in _CHANGED]
        if earlier and any(not g.won for g in games[:i]):
            lost = next(g for g in games[:i] if not g.won)
            return (
                f"{game.id} was won after reading {game.read_sid} ({game.read}), which "
                f"{', '.join(g.id for g in earlier)} wrote; {lost.id} before it was not won. "
                "Memory changed the play through the action prior (the stored procedure's "
                "steps and rules as a bonus on matching commands); the ranker's own scores "
                "and the model's weights did not change."
            )
    won = sum(g.won for g in games)
    ops = ", ".join(f"{op} {n}" for op, n in _counts(g.wrote or "nothing" for g in games))
    after = [
        g
        for i, g in enumerate(games)
        if g.won and any(e.update_sid == g.read_sid and e.wrote in _CHANGED for e in games[:i])
    ]
    if after:
        text = (
            f"{len(after)} game(s) were won after reading an entry earlier games had changed "
            f"({after[0].id} first), but no game was lost before them ({won} of {len(games)} "
            f"won; the games' updates: {ops}): the first game was won without any change, so "
            "this run does not show that the changes mattered."
        )
    else:
        text = (
            f"No game was won after reading what an earlier game changed ({won} of "
            f"{len(games)} won; the games' updates: {ops}), so this run does not show the agent "
            "learning from its own games."
        )
    if seeded:
        text += (
            " The wins rest on the seeded training procedure, read through the action prior; "
            "the model's weights and its own scores did not change."
        )
    return text


def _counts(items: Any) -> list[tuple[str, int]]:
    from collections import Counter

    return sorted(Counter(items).items())


_CHANGED = ("inserted", "revised")
"""Updates that changed what a later game reads (a retention changes nothing)."""


def render_demo(report: CookingDemoReport) -> str:
    """The report as text: a line per game, then what it shows."""
    start = f"{report.seeded} entries from training walkthroughs" if report.seeded else "empty"
    lines = [
        f"GenMem cooking demo: {len(report.games)} cooking-valid games in order; the bank "
        f"started {start} and took each game's update; {report.seconds:.0f} s",
        "",
    ]
    for n, g in enumerate(report.games, 1):
        result = "won" if g.won else "lost" if g.lost else "not finished"
        if g.error:
            result = f"error ({g.error[:80]})"
        lines.append(
            f"game {n} ({g.id}): {result}, {100 * (1 - g.steps_left):.0f}% of the steps used, "
            f"{g.seconds:.0f} s"
        )
        lines.append(f"  read  {g.read_sid or '-'}: {g.read or 'nothing stored there yet'}")
        lines.append(f"  wrote {g.update_sid or '-'}: {g.wrote or 'nothing'} ({g.why or '-'})")
    lines += ["", report.shown, f"bank: {report.bank_url}", f"records: {report.out}/games"]
    return "\n".join(lines)
