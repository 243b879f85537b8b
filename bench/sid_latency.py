"""Benchmark: SID decoding latency of the reference and the fast engine, and their agreement.

The embedded default model (float32, the SID tokens added, untrained) decodes SIDs for the first
N bundled GSM8K training questions, one context per call as an agent asks, greedy and beam
5/10/20 (``--beams`` for others, up to 50: retrieval's candidate budget), with two engines of
``TransformersSIDGenerator`` taking turns context by context:

- ``ref``: ``engine="trie"``, the default before issue 38 (one cache row per beam, choices made
  in Python);
- ``fast``: ``engine="tree"``, the default now (every beam in one pass over one copy of the
  prompt, the system turn read once per process, one level looked ahead, choices on the
  device).

Then both decode ``--agreement`` questions (the timed ones first) at each width, and the bench
reports the share of contexts whose SID lists are identical, and the largest score difference.
Runs on whatever device shared loads use (``GENMEM_DEVICE``, a GPU where torch sees one)::

    python bench/sid_latency.py                       # 20 timed, 200 compared
    python bench/sid_latency.py --contexts 10 --agreement 50 --json
    python bench/sid_latency.py --fast-dtype bfloat16   # the fast engine on a bf16 copy
    python bench/sid_latency.py --contexts 5 --agreement 0 --profile   # where the time goes
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from typing import Any


def _sync(device: Any) -> None:
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _difference(context: int, beam: int, ref: list[Any], fast: list[Any]) -> dict[str, Any]:
    """Where two SID lists part: the first place, and how close the scores there are.

    ``same_set`` says whether only the order differs; ``gap`` is the largest difference between
    the reference's scores at the places where the lists differ and the fast engine's there (a
    swap of near-ties has a gap near float rounding).
    """
    places = [i for i, (a, b) in enumerate(zip(ref, fast, strict=False)) if a.sid != b.sid]
    return {
        "context": context,
        "beam": beam,
        "first_place": places[0] if places else min(len(ref), len(fast)),
        "places": len(places),
        "same_set": {c.sid for c in ref} == {c.sid for c in fast},
        "gap": max((abs(ref[i].score - fast[i].score) for i in places), default=0.0),
    }


def _profile(gen: Any, contexts: list[str], beam: int) -> dict[str, Any]:
    """Where one engine's calls spend their time: each forward pass, the rest, the top ops.

    The model's ``forward`` is wrapped to time every pass (synchronised on a GPU); the medians
    over ``contexts`` say what a call costs in passes (their input shapes: batch x tokens) and
    outside them (prompt building, tokenising, choosing beams). One more call runs under the
    torch profiler for the operators with the most self time.
    """
    from torch.profiler import ProfilerActivity, profile

    module = gen.policy.model
    passes: list[tuple[str, float]] = []
    forward = module.forward

    def timed(*args: Any, **kwargs: Any) -> Any:
        _sync(module.device)
        started = time.perf_counter()
        out = forward(*args, **kwargs)
        _sync(module.device)
        shape = tuple(kwargs["input_ids"].shape)
        passes.append((f"{shape[0]}x{shape[1]}", (time.perf_counter() - started) * 1000))
        return out

    calls = []
    module.forward = timed
    try:
        for context in contexts:
            passes.clear()
            started = time.perf_counter()
            gen.generate(context, beam)
            total = (time.perf_counter() - started) * 1000
            calls.append((total, list(passes)))
    finally:
        del module.forward  # back to the class's
    n_passes = statistics.median(len(p) for _, p in calls)
    by_pass = []
    for i in range(int(n_passes)):
        times = [p[i][1] for _, p in calls if len(p) > i]
        shapes = sorted({p[i][0] for _, p in calls if len(p) > i})
        by_pass.append({"pass": i, "shapes": shapes, "ms": statistics.median(times)})
    total = statistics.median(t for t, _ in calls)
    in_passes = statistics.median(sum(ms for _, ms in p) for _, p in calls)
    activities = [ProfilerActivity.CPU]
    if module.device.type == "cuda":
        activities.append(ProfilerActivity.CUDA)
    with profile(activities=activities) as prof:
        gen.generate(contexts[0], beam)
    events = sorted(prof.key_averages(), key=lambda e: -e.self_cpu_time_total)[:8]
    cpu_total = sum(e.self_cpu_time_total for e in prof.key_averages()) or 1
    return {
        "beam": beam,
        "call_ms": total,
        "in_passes_ms": in_passes,
        "outside_passes_ms": total - in_passes,
        "passes": by_pass,
        "top_ops": [
            {"op": e.key, "self_cpu_share": e.self_cpu_time_total / cpu_total, "calls": e.count}
            for e in events
        ],
    }


def main(argv: list[str] | None = None) -> int:
    """Run the bench and print a table (or one JSON object with --json)."""
    import torch
    from tqdm.auto import tqdm

    from genmem.envs.bundled import read_gsm8k
    from genmem.policies.local import load_policy
    from genmem.policies.sid_decoding import SIDDecodingConfig, TransformersSIDGenerator

    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--contexts", type=int, default=20, help="timed contexts (default 20)")
    p.add_argument(
        "--agreement", type=int, default=200, help="contexts compared (default 200; 0: none)"
    )
    p.add_argument(
        "--fast-dtype",
        choices=("float32", "bfloat16"),
        default="float32",
        help="weights of the fast engine's copy (default float32, the reference's)",
    )
    p.add_argument(
        "--beams",
        default="1,5,10,20",
        help="widths, comma-separated (default 1,5,10,20; greedy and 20 are always in)",
    )
    p.add_argument(
        "--profile",
        action="store_true",
        help="also time each forward pass of a greedy and a beam-20 call of both engines",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object")
    args = p.parse_args(argv)
    if args.contexts < 1 or args.agreement < 0:
        p.error("--contexts must be at least 1 and --agreement at least 0")
    try:
        beams = sorted({1, 20, *(int(b) for b in args.beams.split(",") if b.strip())})
    except ValueError:
        p.error(f"--beams {args.beams!r} must be comma-separated integers")
    if not all(1 <= b <= 50 for b in beams):
        p.error(f"--beams {args.beams!r}: each width must be 1 to 50")
    questions = [r["question"] for r in read_gsm8k(limit=max(args.contexts, args.agreement))]
    ref_policy = load_policy(None, dtype="float32")
    fast_policy = load_policy(None, dtype=args.fast_dtype)
    engines = {
        "ref": TransformersSIDGenerator(ref_policy, config=SIDDecodingConfig(engine="trie")),
        "fast": TransformersSIDGenerator(fast_policy, config=SIDDecodingConfig(engine="tree")),
    }
    for gen in engines.values():  # first-call costs (the system turn's cache) out of the timing
        gen.generate(questions[0])
    ms: dict[str, dict[int, list[float]]] = {name: {b: [] for b in beams} for name in engines}
    steps = [(q, b) for q in questions[: args.contexts] for b in beams]
    for n, (question, beam) in enumerate(tqdm(steps, desc="timing", disable=args.json)):
        for name in engines if n % 2 == 0 else list(engines)[::-1]:
            started = time.perf_counter()
            engines[name].generate(question, beam)
            ms[name][beam].append((time.perf_counter() - started) * 1000)
    same = {b: 0 for b in beams}
    diff = 0.0
    differences = []
    compared = questions[: args.agreement]
    for i, question in enumerate(tqdm(compared, desc="agreement", disable=args.json)):
        for beam in beams:
            ref = engines["ref"].generate(question, beam)
            fast = engines["fast"].generate(question, beam)
            if [c.sid for c in ref] == [c.sid for c in fast]:
                same[beam] += 1
                diff = max(
                    [diff, *(abs(a.score - b.score) for a, b in zip(ref, fast, strict=True))]
                )
            else:
                differences.append(_difference(i, beam, ref, fast))
    profiles = {}
    if args.profile:
        timed = questions[: min(args.contexts, 5)]
        profiles = {
            name: [_profile(gen, timed, b) for b in (1, 20)] for name, gen in engines.items()
        }
    ref_ms = {b: statistics.median(v) for b, v in ms["ref"].items()}
    fast_ms = {b: statistics.median(v) for b, v in ms["fast"].items()}
    device = str(fast_policy.model.device)
    keys = {
        "device": device,
        "device_name": torch.cuda.get_device_name() if device.startswith("cuda") else "cpu",
        "torch_threads": torch.get_num_threads(),
        "load_average": os.getloadavg()[0],
        "model": ref_policy.info.base_model,
        "ref_dtype": "float32",
        "fast_dtype": args.fast_dtype,
        "contexts": args.contexts,
        "ref_ms": ref_ms,
        "fast_ms": fast_ms,
        "speedup_greedy": ref_ms[1] / fast_ms[1],
        "speedup_beam20": ref_ms[20] / fast_ms[20],
        "agreement_contexts": len(compared),
        "sid_agreement": (sum(same.values()) / (len(compared) * len(beams)) if compared else None),
        "sid_agreement_by_beam": {b: same[b] / len(compared) for b in beams} if compared else {},
        "max_score_diff": diff,
        "differences": differences,
        "profile": profiles,
    }
    if args.json:
        print(json.dumps(keys))
        return 0
    print(
        f"SID decoding, {keys['model']} on {device} ({keys['device_name']}), "
        f"{args.contexts} GSM8K contexts one per call, {keys['torch_threads']} torch threads, "
        f"load {keys['load_average']:.1f}; ref float32 trie, fast {args.fast_dtype} tree"
    )
    print(f"{'beam':>4}{'ref ms':>10}{'fast ms':>10}{'speedup':>9}{'same SIDs':>11}")
    for b in beams:
        agree = f"{same[b] / len(compared):.1%}" if compared else "-"
        print(
            f"{b:>4}{ref_ms[b]:>10.1f}{fast_ms[b]:>10.1f}{ref_ms[b] / fast_ms[b]:>8.2f}x{agree:>11}"
        )
    if compared:
        print(
            f"{len(compared)} contexts compared; largest score difference where the SIDs agree "
            f"{diff:.1e}"
        )
    for d in differences:
        print(
            f"  context {d['context']}, beam {d['beam']}: the lists part at place "
            f"{d['first_place']} ({d['places']} places differ, "
            f"{'same SIDs in another order' if d['same_set'] else 'different SIDs'}, "
            f"score gap there {d['gap']:.1e})"
        )
    for name, rows in profiles.items():
        for row in rows:
            passes = ", ".join(f"{p['shapes'][0]}: {p['ms']:.1f}" for p in row["passes"])
            ops = ", ".join(f"{o['op']} {o['self_cpu_share']:.0%}" for o in row["top_ops"][:3])
            print(
                f"{name} beam {row['beam']}: {row['call_ms']:.1f} ms a call, "
                f"{row['outside_passes_ms']:.1f} outside the passes; passes (batch x tokens: ms) "
                f"{passes}; top ops {ops}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
