"""Benchmark: does a reader trained with retrieved experience use it? Teacher forcing on held-out
cooking games.

For each of the first ``--games`` games of ``--split`` (``test`` by default; never in a bank or a
reader's training), MemRetriever reads the bank as ``genmem eval --methods sid --no-rewrite``
would, and the game's walkthrough is played. Before each walkthrough command the ranking
interactor's prompt is built twice, with the retrieved experience and without it
(:func:`genmem.experiments.reader.reader_steps`), and each model ranks the valid commands. A
step counts when the walkthrough's command ranks first (the ``mean`` rule; with
``--prior-weight`` W > 0 also with W x the action prior added where experience is shown).

Models: the embedded one (``base``) and every ``--reader NAME=DIR`` (``genmem train reader``
output: a reader trained with experience and its control trained without). Per model and
condition: the mean over games of the share of steps ranked first, with a 95 % bootstrap
interval over games, and paired differences by game, first among them the issue's test of
learnt memory use: the reader shown experience minus the control shown none.

Records (one line per game, model and condition) go to ``--out`` as they come, the settings
they were made with beside them (``<out>.settings.json``); a rerun with the same ``--out`` skips
what is there, and is refused when its bank, split, prior weight or readers differ::

    python bench/reader_choice.py --bank URL --reader reader=DIR1 --reader control=DIR2 \\
        --games 16 --out runs/reader_choice.jsonl
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

CONDITIONS = ("memory", "no_memory")


def _records(path: Path) -> dict[tuple[str, str, str], dict[str, Any]]:
    if not path.is_file():
        return {}
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return {(r["game"], r["model"], r["condition"]): r for r in rows}


def _settings_differ(path: Path, mine: dict[str, Any]) -> str:
    """What differs between ``mine`` and the settings at ``path`` ("" when nothing does). A model
    may be added to a run (its records are its own), never changed; the file keeps them all."""
    theirs = json.loads(path.read_text()) if path.is_file() else dict(mine)
    keys = sorted(
        k for k in mine.keys() | theirs.keys() if k != "models" and mine.get(k) != theirs.get(k)
    )
    said = [f"{k}: {theirs.get(k)!r} there, {mine.get(k)!r} now" for k in keys]
    models = theirs.get("models", {})
    said += [
        f"model {name}: {models[name]!r} there, {where!r} now"
        for name, where in mine["models"].items()
        if models.get(name, where) != where
    ]
    if not said:
        body = {**theirs, "models": {**models, **mine["models"]}}
        path.write_text(json.dumps(body, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return "; ".join(said)


def main(argv: list[str] | None = None) -> int:
    """Run the bench and print a table (or one JSON object with --json)."""
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--bank", required=True, help="the bank MemRetriever reads")
    p.add_argument("--reader", action="append", default=[], help="NAME=DIR (repeatable)")
    p.add_argument("--split", choices=("valid", "test"), default="test")
    p.add_argument("--games", type=int, default=16)
    p.add_argument("--prior-weight", type=float, default=5.0)
    p.add_argument("--out", required=True, help="records (JSONL), resumed when present")
    p.add_argument("--plot", help="PNG of the shares ranked first (default: beside --out)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    args = p.parse_args(argv)

    from tqdm.auto import tqdm

    from genmem.envs.benches import BenchOptions, open_bench
    from genmem.envs.cooking_experience import experience_prior
    from genmem.envs.stats import mean_interval, paired_difference
    from genmem.experiments.contamination import check_bank_is_clean
    from genmem.experiments.reader import (
        ReaderConfig,
        ranked_first,
        reader_steps,
        retrieved_support,
        step_scores,
    )
    from genmem.memory.location import open_bank
    from genmem.policies.backends import load_chat_model

    models = {"base": "local"}
    for item in args.reader:
        name, _, path = item.partition("=")
        if not name or not (Path(path) / "config.json").is_file():
            p.error(f"--reader {item!r}: give NAME=DIR, DIR a trained reader's folder")
        models[name] = f"local:{path}"
    env = open_bench(f"cooking-{args.split}", BenchOptions(games=args.games))
    tasks = env.tasks()
    check_bank_is_clean(open_bank(args.bank), tasks)  # held-out games only
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    mine = {"bank": args.bank, "split": args.split, "prior_weight": args.prior_weight,
            "models": models}  # fmt: skip
    differ = _settings_differ(out.with_suffix(".settings.json"), mine)
    if differ:
        p.error(f"{out} holds records made with other settings ({differ}); give another --out")
    done = _records(out)
    started = time.perf_counter()
    config = ReaderConfig(bank_url=args.bank, rewrite=False)
    supports = retrieved_support(load_chat_model("local"), tasks, config, progress=not args.json)
    steps = {
        (t.id, c): reader_steps(env, t, supports[t.id] if c == "memory" else "")
        for t in tasks
        for c in CONDITIONS
    }
    chats: dict[str, Any] = {}
    todo = [(t, m, c) for m in models for t in tasks for c in CONDITIONS]
    todo = [(t, m, c) for t, m, c in todo if (t.id, m, c) not in done]
    for task, model, condition in tqdm(todo, desc="rank", disable=args.json):
        chat = chats.get(model) or chats.setdefault(model, load_chat_model(models[model]))
        these = steps[(task.id, condition)]
        scores = step_scores(chat, these)
        row = {
            "game": task.id,
            "model": model,
            "condition": condition,
            "steps": len(these),
            "support": bool(supports[task.id].strip()) if condition == "memory" else False,
            "first": ranked_first(these, scores),
            "first_prior": ranked_first(
                these, scores, prior=experience_prior, prior_weight=args.prior_weight
            ),
        }
        with out.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps(row) + "\n")
        done[(task.id, model, condition)] = row

    ids = [t.id for t in tasks]
    shares: dict[str, dict[str, float]] = {}
    for model in models:
        for condition in CONDITIONS:
            for prior in ("", "_prior"):
                if prior and condition == "no_memory":
                    continue  # the prior reads the experience: none is shown
                key = f"{model}/{condition}{prior}"
                rows = [done[(g, model, condition)] for g in ids]
                shares[key] = {r["game"]: sum(r["first" + prior]) / r["steps"] for r in rows}
    table = {k: mean_interval(v.values()) for k, v in shares.items()}
    pairs = []
    names = [m for m in models if m != "base"]
    if len(names) >= 2:
        reader, control = names[0], names[1]
        pairs += [
            (f"{reader}/memory", f"{control}/no_memory"),
            (f"{reader}/memory", f"{control}/memory"),
        ]
    for model in models:
        pairs.append((f"{model}/memory", f"{model}/no_memory"))
    for model in names:
        pairs.append((f"{model}/memory", "base/memory"))
        pairs.append((f"{model}/no_memory", "base/no_memory"))
    diffs = {f"{a} - {b}": paired_difference(shares[a], shares[b]) for a, b in pairs}
    result = {
        "bench": f"cooking-{args.split}",
        "games": len(tasks),
        "steps": sum(len(steps[(t.id, "memory")]) for t in tasks),
        "with_support": sum(1 for t in tasks if supports[t.id].strip()),
        "prior_weight": args.prior_weight,
        "models": models,
        "ranked_first": {k: e.model_dump() for k, e in table.items() if e is not None},
        "paired": {k: d.model_dump() for k, d in diffs.items() if d is not None},
        "seconds": round(time.perf_counter() - started, 1),
        "load": round(os.getloadavg()[0], 2),
        "records": str(out),
    }
    plot = Path(args.plot) if args.plot else out.with_suffix(".png")
    result["plot"] = _plot(table, plot, result)
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(
        f"{result['bench']}: {result['games']} games, {result['steps']} walkthrough steps, "
        f"{result['with_support']} games with experience retrieved; mean over games of the share "
        "of steps whose walkthrough command ranks first (95 % bootstrap over games)"
    )
    for key, est in table.items():
        if est is not None:
            lo, hi = est.ci
            print(f"  {key:28s} {100 * est.mean:5.1f} % [{100 * lo:5.1f}, {100 * hi:5.1f}]")
    print("paired by game (points):")
    for key, d in diffs.items():
        if d is not None:
            lo, hi = d.ci
            print(
                f"  {key:48s} {100 * d.diff:+6.1f} [{100 * lo:+6.1f}, {100 * hi:+6.1f}] "
                f"({d.wins} better, {d.losses} worse, {d.ties} ties)"
            )
    print(
        f"plot: {result['plot']}  records: {out}  ({result['seconds']:.0f} s, "
        f"load {result['load']:.1f})"
    )
    return 0


def _plot(table: dict[str, Any], path: Path, result: dict[str, Any]) -> str:
    from genmem.experiments.plots import plot_estimates

    title = (
        f"{result['bench']}, {result['games']} games, {result['steps']} steps (95 % CI over games)"
    )
    return str(
        plot_estimates(table, path, ylabel="walkthrough command ranked first (%)", title=title)
    )


if __name__ == "__main__":
    sys.exit(main())
