"""Benchmark: how often a distilled cooking procedure's prior alone ranks a walkthrough's next
command first (teacher forcing: the walkthrough's earlier commands are played).

Each measured game is scored with the procedure of other training games, never its own: the
seed entry of the next training game (``one``), and those of ``--teachers`` other training games
merged into one procedure (``merged``). At every walkthrough step the prior
(:func:`genmem.envs.cooking_experience.procedure_prior`) is the only score over the valid
commands; a step counts as ranked first when the walkthrough's command has the highest prior and
no other command shares it. ``needed`` steps are those the measured game's own procedure holds
(its scored steps and their prerequisites: not ``inventory`` or ``drop knife``). Chance is the
mean of 1 / (valid commands). Measured games come from ``cooking-train`` (the ones the
procedures come from, each scored with others') or ``cooking-valid`` (never in a bank)::

    python bench/cooking_prior.py --games 48 --teachers 5
    python bench/cooking_prior.py --split valid --games 20 --json
"""

from __future__ import annotations

import argparse
import json
import sys
import time


def main(argv: list[str] | None = None) -> int:
    """Run the bench and print a table (or one JSON object with --json)."""
    from genmem.envs.cooking import CookingConfig, load_cooking_games
    from genmem.envs.cooking_experience import (
        cooking_experience,
        cooking_seed_row,
        distill_procedure,
        merge_procedures,
        parse_procedure,
        parse_recipe,
        play_commands,
        procedure_prior,
        step_of,
        walkthrough_views,
    )

    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--games", type=int, default=48, help="measured games (default 48)")
    p.add_argument("--split", choices=("train", "valid"), default="train")
    p.add_argument("--teachers", type=int, default=5, help="procedures merged (default 5)")
    p.add_argument("--rooms", type=int, choices=(1, 6, 9, 12), default=1, help="rooms (1)")
    p.add_argument("--recipe", type=int, default=2, help="ingredients per recipe (2)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    args = p.parse_args(argv)
    started = time.perf_counter()
    n_train = max(args.games if args.split == "train" else 0, args.teachers + 1, 2)
    shape = {"rooms": args.rooms, "recipe": args.recipe}
    train_cfg = CookingConfig(split="train", n_games=n_train, **shape)
    train = load_cooking_games(train_cfg)
    teachers = [
        parse_procedure(cooking_experience(row["question"], row["answer"]))
        for row in (cooking_seed_row(r, train_cfg.games_dir() / r.file) for r in train)
    ]
    if args.split == "train":
        measured_cfg, measured = train_cfg, train[: args.games]
    else:
        measured_cfg = CookingConfig(split="valid", n_games=args.games, **shape)
        measured = load_cooking_games(measured_cfg)
    arms = {"one": [0, 0, 0, 0], "merged": [0, 0, 0, 0]}  # first, tied, needed-first, needed
    steps = needed_steps = 0
    chance = 0.0
    for i, record in enumerate(measured):
        path = measured_cfg.games_dir() / record.file
        others = [t for j, t in enumerate(teachers) if args.split != "train" or j != i]
        procs = {
            "one": others[i % len(others)],
            "merged": merge_procedures(others[: args.teachers]),
        }
        own = distill_procedure(
            play_commands(path, record.walkthrough, game=record.id, split=record.split)
        )
        recipe = parse_recipe(record.recipe)
        for command, valid, view in walkthrough_views(path, record.walkthrough):
            needed = step_of(own, recipe, command) is not None
            steps += 1
            needed_steps += needed
            chance += 1 / len(valid)
            for arm, proc in procs.items():
                prior = procedure_prior(proc, valid, view)
                best = max(prior)
                mine = prior[valid.index(command)]
                top = mine == best and best > 0
                alone = top and prior.count(best) == 1
                arms[arm][0] += alone
                arms[arm][1] += top
                arms[arm][2] += alone and needed
                arms[arm][3] += needed
    report = {
        "split": args.split,
        **shape,
        "games": len(measured),
        "steps": steps,
        "needed_steps": needed_steps,
        "chance_first": round(chance / steps, 3),
        "teachers_merged": args.teachers,
        "seconds": round(time.perf_counter() - started, 1),
        **{
            arm: {
                "first": v[0],
                "first_or_tied": v[1],
                "needed_first": v[2],
                "share_first": round(v[0] / steps, 3),
                "share_needed_first": round(v[2] / max(1, needed_steps), 3),
            }
            for arm, v in arms.items()
        },
    }
    if args.json:
        print(json.dumps(report))
        return 0
    print(
        f"{report['games']} {args.split} games ({args.rooms} rooms, {args.recipe} ingredients), "
        f"{steps} walkthrough steps ({needed_steps} "
        f"needed), chance of ranking first {report['chance_first']:.1%}, "
        f"{report['seconds']} s"
    )
    for arm in arms:
        r = report[arm]
        print(
            f"{arm:7s} first {r['first']}/{steps} ({r['share_first']:.1%}), first or tied "
            f"{r['first_or_tied']}/{steps}, needed steps first {r['needed_first']}/"
            f"{needed_steps} ({r['share_needed_first']:.1%})"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
