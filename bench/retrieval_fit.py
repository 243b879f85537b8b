"""Benchmark: does the entry each retrieval method hands the agent fit the held-out game? No
model decides here: code scores the entry against the game's walkthrough.

For each of the first ``--games`` games of ``cooking-<split>`` (never in the bank), every method
retrieves as ``genmem eval --methods M --no-rewrite`` would (MemRetriever's real graph and
settings: ``sid`` addresses with the bank's quantizer and reranks, ``tfidf`` and ``dense`` read
the payloads), and three references are added: ``random`` (one entry drawn per game, seeded),
``best`` (the bank's entry that fits the game best: an upper bound for reading one entry, found
with the walkthrough, so never a method) and ``none``. The score of an entry for a game is the
share of walkthrough steps its action prior alone ranks first among the valid commands
(:func:`genmem.envs.cooking_experience.prior_ranks_first`: the highest bonus, shared with no
other command), the criterion ``bench/evolver_choice.py`` judges by; ``full`` counts games where
it ranks every step first. The walkthrough is only the yardstick (it never reaches a model).

Reported: per method the mean share with a 95 % bootstrap interval over games, the games fully
covered, the games whose walkthrough opens a container and whose entry has no opening step, and
paired differences against ``sid``. Records go to ``--out`` (JSONL, one line per game and
method, resumed), a plot beside it::

    python bench/retrieval_fit.py --bank URL --games 150 --out runs/retrieval_fit.jsonl
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from pathlib import Path
from typing import Any

REFERENCES = ("random", "best", "none")


def _records(path: Path) -> dict[tuple[str, str], dict[str, Any]]:
    if not path.is_file():
        return {}
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return {(r["game"], r["method"]): r for r in rows}


def main(argv: list[str] | None = None) -> int:
    """Run the bench and print a table (or one JSON object with --json)."""
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--bank", required=True, help="the bank MemRetriever reads")
    p.add_argument("--split", choices=("valid", "test"), default="test")
    p.add_argument("--games", type=int, default=150)
    p.add_argument("--methods", default="sid,tfidf,dense", help="eval methods (comma-separated)")
    p.add_argument("--seed", type=int, default=0, help="seed of the random entry")
    p.add_argument("--out", required=True, help="records (JSONL), resumed when present")
    p.add_argument("--plot", help="PNG (default: beside --out)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    args = p.parse_args(argv)

    from tqdm.auto import tqdm

    from genmem.envs.benches import BenchOptions, open_bench
    from genmem.envs.cooking_experience import (
        CookingExperienceError,
        parse_procedure,
        prior_ranks_first,
        walkthrough_views,
    )
    from genmem.envs.stats import mean_interval, paired_difference
    from genmem.experiments.contamination import check_bank_is_clean
    from genmem.experiments.methods import check_methods, method_generator
    from genmem.experiments.reader import ReaderConfig, retrieved_support
    from genmem.memory.location import open_bank
    from genmem.policies.backends import load_chat_model

    methods = [m for m in check_methods(args.methods) if m != "none"]
    env = open_bench(f"cooking-{args.split}", BenchOptions(games=args.games))
    tasks = env.tasks()
    bank = open_bank(args.bank)
    check_bank_is_clean(bank, tasks)  # held-out games only
    entries = [e for e in bank.entries() if e.payload.strip()]
    procedures: dict[str, Any] = {}
    for e in entries:
        try:
            procedures[str(e.sid)] = parse_procedure(e.payload)
        except CookingExperienceError:
            continue  # an entry with no procedure: its prior is 0 everywhere
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    done = _records(out)
    started = time.perf_counter()
    config = ReaderConfig(bank_url=args.bank, rewrite=False)
    chat = load_chat_model("local")  # the retriever graph's; with no rewrite it writes nothing
    supports = {
        m: retrieved_support(
            chat, tasks, config, sid_generator=method_generator(m), progress=not args.json
        )
        for m in methods
        if any((t.id, m) not in done for t in tasks)
    }
    draw = random.Random(args.seed)
    drawn = {t.id: str(draw.choice(entries).sid) for t in tasks}
    for task in tqdm(tasks, desc="fit", unit="game", disable=args.json):
        todo = [m for m in (*methods, *REFERENCES) if (task.id, m) not in done]
        if not todo:
            continue
        views = walkthrough_views(task.meta["game_file"], env.walkthrough(task))
        opens = any(c.startswith("open ") for c, _, _ in views)
        fits = {sid: prior_ranks_first(proc, views) for sid, proc in procedures.items()}
        for method in todo:
            if method in supports:
                text = supports[method][task.id]
                proc = _procedure(text, parse_procedure, CookingExperienceError)
                first = prior_ranks_first(proc, views) if proc is not None else 0
                sid = None
            else:
                sid = {"random": drawn[task.id], "best": max(fits, key=fits.get)}.get(method)
                proc = procedures.get(sid) if sid else None
                first = fits.get(sid, 0) if sid else 0
            has_open = proc is not None and any(s.template.startswith("open ") for s in proc.steps)
            row = {
                "game": task.id,
                "method": method,
                "sid": sid,
                "steps": len(views),
                "first": first,
                "opens": opens,
                "entry_opens": has_open,
            }
            with out.open("a", encoding="utf-8") as fh:
                fh.write(json.dumps(row) + "\n")
            done[(task.id, method)] = row

    ids = [t.id for t in tasks]
    names = [*methods, *REFERENCES]
    share = {m: {g: done[(g, m)]["first"] / done[(g, m)]["steps"] for g in ids} for m in names}
    table = {m: mean_interval(share[m].values()) for m in names}
    full = {m: sum(1 for g in ids if done[(g, m)]["first"] == done[(g, m)]["steps"]) for m in names}
    missing_open = {
        m: sum(1 for g in ids if done[(g, m)]["opens"] and not done[(g, m)]["entry_opens"])
        for m in names
    }
    base = "sid" if "sid" in methods else names[0]
    diffs = {f"{m} - {base}": paired_difference(share[m], share[base]) for m in names if m != base}
    result = {
        "bench": f"cooking-{args.split}",
        "games": len(ids),
        "steps": sum(done[(g, names[0])]["steps"] for g in ids),
        "opening_games": sum(1 for g in ids if done[(g, names[0])]["opens"]),
        "bank_entries": len(entries),
        "bank_procedures": len(procedures),
        "share_first": {m: e.model_dump() for m, e in table.items() if e is not None},
        "full": full,
        "no_opening_step": missing_open,
        "paired": {k: d.model_dump() for k, d in diffs.items() if d is not None},
        "seconds": round(time.perf_counter() - started, 1),
        "load": round(os.getloadavg()[0], 2),
        "records": str(out),
    }
    result["plot"] = _plot(table, Path(args.plot) if args.plot else out.with_suffix(".png"), result)
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(
        f"{result['bench']}: {result['games']} games ({result['opening_games']} open a "
        f"container), {result['steps']} walkthrough steps; bank: {len(entries)} entries. Share "
        "of steps the entry's prior alone ranks first (mean over games, 95 % bootstrap):"
    )
    for m in names:
        if (est := table[m]) is not None:
            lo, hi = est.ci
            print(
                f"  {m:8s} {100 * est.mean:5.1f} % [{100 * lo:5.1f}, {100 * hi:5.1f}]  every "
                f"step: {full[m]:3d}  opening game, entry without opening: {missing_open[m]}"
            )
    print(f"paired by game (points, against {base}):")
    for key, d in diffs.items():
        if d is not None:
            lo, hi = d.ci
            print(
                f"  {key:16s} {100 * d.diff:+6.1f} [{100 * lo:+6.1f}, {100 * hi:+6.1f}] "
                f"({d.wins} better, {d.losses} worse, {d.ties} ties)"
            )
    print(
        f"plot: {result['plot']}  records: {out}  ({result['seconds']:.0f} s, "
        f"load {result['load']:.1f})"
    )
    return 0


def _procedure(text: str, parse: Any, error: type[Exception]) -> Any:
    if not text.strip():
        return None
    try:
        return parse(text)
    except error:
        return None


def _plot(table: dict[str, Any], path: Path, result: dict[str, Any]) -> str:
    from genmem.experiments.plots import plot_estimates

    title = (
        f"{result['bench']}, {result['games']} games, bank of {result['bank_entries']} entries "
        "(95 % CI over games)"
    )
    return str(
        plot_estimates(table, path, ylabel="steps the entry's prior ranks first (%)", title=title)
    )


if __name__ == "__main__":
    sys.exit(main())
