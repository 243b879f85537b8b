"""Benchmark RQ-KMeans fitting and quantisation against baselines measured in the same run.

Data: seeded synthetic sentence-like embeddings (unit rows with a shared mean direction,
Zipf-sized topics and sub-topics), by default the paper's 138,243 x 384.

Fitting: the time of every level of ``RQKMeans.fit`` (48x16x8x8 by default) next to
scikit-learn ``KMeans(n_clusters=N_1)`` with its default settings on the same level-1 data.

Quantisation: ``Codebooks.quantize`` throughput (embeddings/s) against (a) a naive numpy
brute force (the direct definition, one level at a time) on a subset and (b) scikit-learn's
chunked ``pairwise_distances_argmin`` per level (Euclidean codebooks only); codes are checked
equal to both.

    python bench/rqkmeans.py            # full size, readable table
    python bench/rqkmeans.py --n 20000 --json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time

import numpy as np
from sklearn.cluster import KMeans
from sklearn.metrics import pairwise_distances_argmin

from genmem.memory.metrics import codebook_metrics
from genmem.memory.rqkmeans import Codebooks, RQKMeans, RQKMeansConfig


def synthetic_embeddings(n: int, d: int, *, seed: int = 0) -> np.ndarray:
    """Unit float32 rows: mean direction + topic + sub-topic + noise, Zipf-sized topics."""
    rng = np.random.default_rng(seed)
    topics, subs = 96, 24

    def unit(a: np.ndarray) -> np.ndarray:
        return a / np.linalg.norm(a, axis=-1, keepdims=True)

    mean_dir = unit(rng.normal(size=d))
    topic = unit(rng.normal(size=(topics, d)))
    sub = unit(rng.normal(size=(topics, subs, d)))
    weight = 1.0 / np.arange(1, topics + 1) ** 0.9
    t = rng.choice(topics, size=n, p=weight / weight.sum())
    s = rng.integers(0, subs, size=n)
    x = np.empty((n, d), dtype=np.float32)
    for start in range(0, n, 20000):  # bounded float64 temporaries
        sl = slice(start, start + 20000)
        noise = unit(rng.normal(size=(len(t[sl]), d)))
        x[sl] = unit(0.5 * mean_dir + 0.9 * topic[t[sl]] + 0.55 * sub[t[sl], s[sl]] + 0.6 * noise)
    return x


def brute_force(cb: Codebooks, x: np.ndarray) -> np.ndarray:
    """The definition, written plainly: per level a broadcast difference against every centre."""
    r = x.astype(np.float64)
    codes = []
    for level in range(cb.spec.levels):
        cent = cb.centres[level].astype(np.float64)
        if cb.directions is not None:
            s = (r[:, None, :] * cb.directions[level].astype(np.float64)[None]).sum(-1).argmax(1)
        else:
            d2 = ((r[:, None, :] - cent[None]) ** 2).sum(-1)
            s = (d2 * cb.multipliers[level].astype(np.float64)).argmin(1)
        codes.append(s)
        r = r - cent[s]
    return np.stack(codes, 1)


def sklearn_argmin(cb: Codebooks, x: np.ndarray) -> np.ndarray:
    """Per level scikit-learn's chunked nearest-centre search (Euclidean codebooks only)."""
    r = x.astype(np.float64)
    codes = []
    for cent in cb.centres:
        s = pairwise_distances_argmin(r, cent.astype(np.float64))
        codes.append(s)
        r = r - cent.astype(np.float64)[s]
    return np.stack(codes, 1)


def timed(fn, *args, **kwargs):
    t0 = time.perf_counter()
    out = fn(*args, **kwargs)
    return out, time.perf_counter() - t0


def run(args: argparse.Namespace) -> dict:
    sizes = tuple(int(v) for v in args.sizes.split(","))
    x, gen_s = timed(synthetic_embeddings, args.n, args.dim, seed=args.seed)
    KMeans(n_clusters=2, random_state=0).fit(x[:1000])  # warm up BLAS/OpenMP pools untimed
    km, sk_s = timed(KMeans(n_clusters=sizes[0], random_state=args.seed).fit, x)
    result: dict = {
        "machine": {
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
            "python": platform.python_version(),
        },
        "n": args.n,
        "dim": args.dim,
        "sizes": list(sizes),
        "data_seconds": gen_s,
        "sklearn_kmeans_default": {"seconds": sk_s, "n_iter": int(km.n_iter_)},
        "fits": [],
    }
    sub = x[: args.baseline_n]
    for distance in args.distances.split(","):
        cfg = RQKMeansConfig(sizes=sizes, distance=distance, seed=args.seed)  # type: ignore[arg-type]
        model, fit_s = timed(RQKMeans(cfg).fit, x, progress=not args.json)
        cb = model.codebooks_
        codes, q_s = timed(cb.quantize, x)
        naive, naive_s = timed(brute_force, cb, sub)
        fit_row = {
            "distance": distance,
            "weight": cfg.weight,
            "fit_seconds": fit_s,
            "level_seconds": model.level_seconds_,
            "level1_speedup_vs_sklearn_default": sk_s / model.level_seconds_[0],
            "quantize_per_s": args.n / q_s,
            "naive_per_s": len(sub) / naive_s,
            "quantize_speedup_vs_naive": (args.n / q_s) / (len(sub) / naive_s),
            "codes_equal_naive": bool((naive == codes[: len(sub)]).all()),
            "codes_equal_fit": bool((codes == model.codes_).all()),
        }
        if distance == "euclidean":
            sk_codes, sk_q_s = timed(sklearn_argmin, cb, x)
            fit_row["sklearn_argmin_per_s"] = args.n / sk_q_s
            fit_row["quantize_speedup_vs_sklearn_argmin"] = sk_q_s / q_s
            fit_row["codes_equal_sklearn_argmin"] = bool((sk_codes == codes).all())
        m = codebook_metrics(codes, cb.spec, embeddings=x, codebooks=cb)
        fit_row["metrics"] = m.model_dump(
            include={"used_leaves", "leaf_utilization", "ucr", "dui", "icr", "recon_mse_per_dim"}
        )
        result["fits"].append(fit_row)
    return result


def print_table(res: dict) -> None:
    sk = res["sklearn_kmeans_default"]
    print(
        f"RQ-KMeans bench: {res['n']} x {res['dim']} synthetic embeddings, sizes "
        f"{'x'.join(map(str, res['sizes']))}, {res['machine']['cpus']} CPUs"
    )
    print(
        f"scikit-learn KMeans(n_clusters={res['sizes'][0]}) default settings on level-1 data: "
        f"{sk['seconds']:.2f} s ({sk['n_iter']} iterations)\n"
    )
    head = f"{'distance':<10} {'fit s':>7} {'per level s':<28} {'L1 vs sklearn':>13}"
    print(head + f" {'quantize/s':>11} {'naive/s':>9} {'x naive':>8} {'equal':>6}")
    for f in res["fits"]:
        levels = "/".join(f"{s:.2f}" for s in f["level_seconds"])
        print(
            f"{f['distance']:<10} {f['fit_seconds']:>7.2f} {levels:<28} "
            f"{f['level1_speedup_vs_sklearn_default']:>12.2f}x {f['quantize_per_s']:>11.0f} "
            f"{f['naive_per_s']:>9.0f} {f['quantize_speedup_vs_naive']:>7.1f}x "
            f"{f['codes_equal_naive'] and f['codes_equal_fit']!s:>6}"
        )
    for f in res["fits"]:
        if "sklearn_argmin_per_s" in f:
            print(
                "\neuclidean quantize vs scikit-learn pairwise_distances_argmin per level: "
                f"{f['sklearn_argmin_per_s']:.0f}/s -> "
                f"{f['quantize_speedup_vs_sklearn_argmin']:.2f}x "
                f"(codes equal: {f['codes_equal_sklearn_argmin']})"
            )
    print()
    for f in res["fits"]:
        m = f["metrics"]
        print(
            f"{f['distance']:<10} used leaves {m['used_leaves']}, leaf util "
            f"{100 * m['leaf_utilization']:.2f}%, UCR {m['ucr']:.4f}, DUI {m['dui']:.3f}, "
            f"ICR {m['icr']:.3f}, recon MSE/dim {m['recon_mse_per_dim']:.3e}"
        )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--n", type=int, default=138_243, help="embeddings (default 138,243)")
    p.add_argument("--dim", type=int, default=384, help="embedding dimension (default 384)")
    p.add_argument("--sizes", default="48,16,8,8", help="codebook sizes (default 48,16,8,8)")
    p.add_argument("--distances", default="weighted,euclidean", help="comma list to fit")
    p.add_argument("--baseline-n", type=int, default=5000, help="rows for the naive baseline")
    p.add_argument("--seed", type=int, default=0, help="data and fit seed")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    args = p.parse_args()
    res = run(args)
    if args.json:
        print(json.dumps(res))
    else:
        print_table(res)


if __name__ == "__main__":
    main()
