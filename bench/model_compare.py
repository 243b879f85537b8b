"""Compare the default model with another on the same demo problems (issue 21, part 6).

Reads the ``results.jsonl`` of ``genmem demo --out DIR`` runs (one per model, the same problems,
budgets and seed bank) and prints, per model over the problems every run finished: accuracy with
a bootstrap interval, how often each role's output was usable (the retriever's rewrite kept by
the gate, the planner's own final answer, a numeric answer, the evolver's update written) and
why it was not, and seconds per problem, with ratios against the first run and the paired
accuracy difference. ::

    export OMP_NUM_THREADS=1 FLAGS="--problems 30 --max-new-tokens 128"
    genmem demo $FLAGS --model local:smollm2-135m --out runs/cmp/smollm2-135m
    genmem demo $FLAGS --model local:gemma3-270m --out runs/cmp/gemma3-270m
    python bench/model_compare.py runs/cmp/smollm2-135m runs/cmp/gemma3-270m [--json]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from genmem.envs.bundled import jsonl_rows
from genmem.envs.stats import format_interval, mean_interval, paired_difference

_NUMBER = re.compile(r"\d")


def _event(record: dict[str, Any], node: str) -> dict[str, Any]:
    return next((e for e in record.get("events") or [] if e.get("node") == node), {})


def summarise(records: list[dict[str, Any]]) -> dict[str, Any]:
    """What one model's runs did, role by role."""
    n = len(records)
    scores = [float(r.get("score") or 0.0) for r in records]  # an errored run scores 0
    refused: Counter[str] = Counter()
    gated: Counter[str] = Counter()
    rewrites = finished = numeric = written = errors = 0
    for r in records:
        errors += bool(r.get("error"))
        got = _event(r, "mem_retriever")
        if got.get("support_source") == "rewrite":
            rewrites += 1
        elif got.get("support_refused"):
            refused[got["support_refused"]] += 1
        finished += r.get("status") == "finished"
        numeric += bool(r.get("answer") and _NUMBER.search(r["answer"]))
        update = r.get("update") or {}
        failure = r.get("evolve_error") or {}
        if update.get("outcome") in ("inserted", "revised"):
            written += 1
        elif failure:
            gated[failure.get("gate_reason") or failure.get("kind") or "error"] += 1
    accuracy = mean_interval(scores)
    return {
        "n": n,
        "accuracy": accuracy.model_dump() if accuracy else None,
        "errors": errors,
        "rewrite_kept": rewrites / n,
        "rewrite_refused": dict(refused.most_common()),
        "planner_finished": finished / n,
        "numeric_answer": numeric / n,
        "update_written": written / n,
        "update_refused": dict(gated.most_common()),
        "s_per_problem": sum(float(r.get("seconds") or 0.0) for r in records) / n,
    }


def main(argv: list[str] | None = None) -> int:
    """Print the comparison of two or more demo runs."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("runs", nargs="+", help="demo output folders; the first is the baseline")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    args = p.parse_args(argv)
    if len(args.runs) < 2:
        p.error("give at least two demo output folders")
    runs = {
        Path(d).name: {r["id"]: r for r in jsonl_rows(Path(d) / "results.jsonl")} for d in args.runs
    }
    common = [i for i in next(iter(runs.values())) if all(i in rs for rs in runs.values())]
    if not common:
        p.error("the runs share no finished problem")
    base_name = next(iter(runs))
    out: dict[str, Any] = {"problems": len(common), "models": {}, "paired": {}}
    for name, rs in runs.items():
        out["models"][name] = summarise([rs[i] for i in common])
    base_scores = {i: float(runs[base_name][i].get("score") or 0.0) for i in common}
    for name, rs in list(runs.items())[1:]:
        diff = paired_difference({i: float(rs[i].get("score") or 0.0) for i in common}, base_scores)
        out["paired"][f"{name} - {base_name}"] = diff.model_dump() if diff else None
    if args.json:
        print(json.dumps(out, indent=2))
        return 0
    base = out["models"][base_name]
    print(f"{len(common)} problems every run finished; rates in %, time ratio against {base_name}")
    cols = ["model", "accuracy", "rewrite kept", "planner answered", "numeric answer"]
    cols += ["update written", "s/problem", "time ratio"]
    print("| " + " | ".join(cols) + " |\n|" + "---|" * len(cols))
    for name, m in out["models"].items():
        acc = m["accuracy"]
        rates = [m[k] for k in ("rewrite_kept", "planner_finished", "numeric_answer")]
        rates.append(m["update_written"])
        cells = [name, format_interval(acc["mean"], acc["ci"]), *(f"{r:.0%}" for r in rates)]
        cells += [f"{m['s_per_problem']:.0f}", f"{m['s_per_problem'] / base['s_per_problem']:.2f}x"]
        print("| " + " | ".join(cells) + " |")
    for name, m in out["models"].items():
        print(f"{name}: rewrites refused {m['rewrite_refused']}; ", end="")
        print(f"updates refused {m['update_refused']}; errors {m['errors']}")
    for pair, d in out["paired"].items():
        if d:
            print(
                f"accuracy {pair}: {format_interval(d['diff'], d['ci'], signed=True)} "
                f"({d['wins']} wins, {d['losses']} losses, {d['ties']} ties)"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
