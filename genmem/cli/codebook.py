"""`genmem codebook ...`: fit RQ-KMeans codebooks, report their metrics, search configurations.

Every command reads either a ``.npy`` (N, d) float matrix of embeddings or a ``.jsonl`` file of
``{"text": ...}`` records, which is encoded first (with the instruction prefix unless
``--no-prefix``). Inputs are validated before anything is written.
"""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path
from typing import Any

import numpy as np

from genmem.cli.common import CLIError, emit, positive_int, read_text_jsonl

__all__ = ["register"]

_INPUT_HELP = '.npy (N, d) float embeddings, or .jsonl of {"text": ...} records to encode'
_ENCODER_HELP = (
    "encoder for .jsonl input: 'default' (all-MiniLM-L6-v2) or a local model directory; "
    "with .npy input it only records which encoder made the vectors"
)


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``genmem codebook`` and its sub-commands."""
    from genmem.memory.rqkmeans import DEFAULT_WEIGHT, DISTANCES, RQKMeansConfig

    fit = RQKMeansConfig()

    p = sub.add_parser("codebook", help="fit, inspect and compare RQ-KMeans codebooks")
    csub = p.add_subparsers(dest="codebook_command", required=True, metavar="CODEBOOK_COMMAND")

    f = csub.add_parser("fit", help="fit codebooks on embeddings or texts and save them")
    f.add_argument("--input", required=True, help=_INPUT_HELP)
    sizes = ",".join(map(str, fit.sizes))
    f.add_argument("--sizes", default=sizes, help=f"codebook size per level ({sizes})")
    f.add_argument("--distance", choices=DISTANCES, default=fit.distance, help="assignment rule")
    f.add_argument(
        "--weight", type=float, default=None, help=f"w for weighted (default {DEFAULT_WEIGHT})"
    )
    _add_fit_options(f, fit)
    f.add_argument("--out", required=True, help="new directory for the codebooks")
    f.add_argument("--json", action="store_true", help="print one JSON object")
    f.set_defaults(func=_fit)

    st = csub.add_parser("stats", help="metrics of codebooks on embeddings or texts")
    st.add_argument("codebook", help="codebook directory (from `genmem codebook fit`)")
    st.add_argument("--input", required=True, help=_INPUT_HELP)
    st.add_argument(
        "--encoder", default=None, help="encoder for .jsonl input (default: the recorded one)"
    )
    st.add_argument("--json", action="store_true", help="print one JSON object")
    st.set_defaults(func=_stats)

    se = csub.add_parser("search", help="fit and score several configurations")
    se.add_argument("--input", required=True, help=_INPUT_HELP)
    se.add_argument("--configs", required=True, help="size tuples, e.g. '48,16,8,8;48,24,24'")
    se.add_argument(
        "--distances", default="euclidean,weighted", help=f"comma list of {', '.join(DISTANCES)}"
    )
    se.add_argument(
        "--weight",
        type=float,
        default=DEFAULT_WEIGHT,
        help=f"w for weighted (default {DEFAULT_WEIGHT})",
    )
    se.add_argument(
        "--heldout",
        type=float,
        default=0.2,
        help="share of the rows kept out of every fit and scored apart (default 0.2; 0: none)",
    )
    _add_fit_options(se, fit)
    se.add_argument("--out", required=True, help="results CSV (a .json is written beside it)")
    se.add_argument("--json", action="store_true", help="print one JSON object")
    se.set_defaults(func=_search)


def _add_fit_options(p: argparse.ArgumentParser, fit: Any) -> None:
    """The K-means flags of ``fit`` and ``search``, their defaults RQ-KMeans's own (``fit``)."""
    p.add_argument("--seed", type=int, default=fit.seed, help=f"random seed (default {fit.seed})")
    p.add_argument(
        "--n-init", type=positive_int, default=fit.n_init, help="K-means restarts per level"
    )
    p.add_argument(
        "--max-iter", type=positive_int, default=fit.max_iter, help="K-means iterations cap"
    )
    p.add_argument("--encoder", default=None, help=_ENCODER_HELP)
    p.add_argument("--no-prefix", action="store_true", help="encode texts without the prefix")


def _input_kind(path: str) -> str:
    p = Path(path)
    if not p.is_file():
        raise CLIError(f"input file {path!r} does not exist")
    suffix = p.suffix.lower()
    if suffix not in (".npy", ".jsonl"):
        raise CLIError(f"input {path!r} must be a .npy matrix or a .jsonl file of text records")
    return suffix[1:]


def _load_npy(path: str) -> np.ndarray:
    try:
        arr = np.load(path, allow_pickle=False)
    except (ValueError, OSError) as exc:
        raise CLIError(f"{path} is not a readable .npy array ({exc})") from None
    from genmem.memory.rqkmeans import as_embeddings

    return as_embeddings(arr, what=f"embeddings in {path}")


def _texts(path: str, need: int) -> list[str]:
    texts = [r["text"] for r in read_text_jsonl(path)]
    if len(texts) < need:
        from genmem.errors import CodebookError

        raise CodebookError(
            f"{path} holds {len(texts)} texts but the codebooks need at least {need} "
            "(the largest level size); add texts or use smaller sizes"
        )
    return texts


def _prefix(args: argparse.Namespace) -> str | None:
    from genmem.memory.encoders import EXPERIENCE_PREFIX

    return None if args.no_prefix else EXPERIENCE_PREFIX


def _embed_input(args: argparse.Namespace, need: int) -> tuple[np.ndarray, str | None, str | None]:
    """Embeddings of ``--input`` plus the (encoder id, prefix) to record with them."""
    from genmem.memory.encoders import DEFAULT_ENCODER_ID, load_encoder

    if _input_kind(args.input) == "npy":
        x = _load_npy(args.input)
        spec = args.encoder
        if spec is None:  # nothing is known about where the vectors came from
            return x, None, None
        known = spec in ("default", DEFAULT_ENCODER_ID)
        return x, DEFAULT_ENCODER_ID if known else str(Path(spec).resolve()), _prefix(args)
    texts = _texts(args.input, need)
    enc = load_encoder(args.encoder, prefix=_prefix(args))
    return enc.encode(texts, progress=not args.json), enc.id, enc.prefix


def _fit(args: argparse.Namespace) -> int:
    from genmem.errors import CodebookError
    from genmem.memory.metrics import codebook_metrics
    from genmem.memory.rqkmeans import RQKMeans, RQKMeansConfig
    from genmem.memory.sid import SIDSpec

    try:
        sizes = SIDSpec.from_string(args.sizes).sizes
        cfg = RQKMeansConfig(
            sizes=sizes,
            distance=args.distance,
            weight=args.weight,
            seed=args.seed,
            n_init=args.n_init,
            max_iter=args.max_iter,
        )
    except (ValueError, CodebookError) as exc:
        raise CLIError(str(exc)) from None
    out = Path(args.out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise CLIError(f"--out {args.out!r} already exists and is not empty; pick a new directory")
    _input_kind(args.input)
    x, enc_id, prefix = _embed_input(args, max(sizes))
    cfg = dataclasses.replace(cfg, encoder_id=enc_id, encoder_prefix=prefix)
    model = RQKMeans(cfg).fit(x, progress=not args.json)
    cb = model.codebooks_
    m = codebook_metrics(model.codes_, cb.spec, embeddings=x, codebooks=cb)
    cb.save(out)
    result = {
        "out": str(out),
        "hash": cb.hash,
        "sizes": list(cb.spec.sizes),
        "distance": cb.distance,
        "weight": cb.weight,
        "n": int(x.shape[0]),
        "dim": cb.dim,
        "encoder_id": enc_id,
        "fit_seconds": round(model.fit_seconds_, 3),
        "level_seconds": [round(s, 3) for s in model.level_seconds_],
        "metrics": m.model_dump(),
    }
    text = (
        f"fitted {cb.spec} codebooks ({_rule(cb)}) on {x.shape[0]} x {cb.dim} embeddings in "
        f"{model.fit_seconds_:.1f} s -> {out}\nhash {cb.hash}\n" + _headline(m)
    )
    emit(result, as_json=args.json, text=text)
    return 0


def _rule(cb: Any) -> str:
    return cb.distance + (f", w={cb.weight:g}" if cb.weight is not None else "")


def _headline(m: Any) -> str:
    icr = f"{m.icr:.3f}" if m.icr is not None else "undefined (collapsed)"
    line = (
        f"used leaves {m.used_leaves} of {m.capacity} ({100 * m.leaf_utilization:.2f}%), "
        f"UCR {m.ucr:.4f}, singletons {m.singleton_fraction:.3f}, DUI {m.dui:.3f}, ICR {icr}"
    )
    if m.recon_mse is not None:
        line += (
            f"\nreconstruction: MSE {m.recon_mse:.4g} per entry ({m.recon_mse_per_dim:.3e} per "
            f"dimension), mean ||e - ê|| {m.recon_euclidean:.4g}"
        )
    return line


def _stats(args: argparse.Namespace) -> int:
    from genmem.memory.encoders import encode_for_codebook
    from genmem.memory.metrics import codebook_metrics
    from genmem.memory.rqkmeans import Codebooks, as_embeddings

    kind = _input_kind(args.input)
    cb = Codebooks.load(args.codebook)
    if kind == "npy":
        x = as_embeddings(_load_npy(args.input), dim=cb.dim, what=f"embeddings in {args.input}")
    else:
        texts = _texts(args.input, 1)
        x = encode_for_codebook(cb, texts, encoder=args.encoder, progress=not args.json)
    m = codebook_metrics(cb.quantize(x), cb.spec, embeddings=x, codebooks=cb)
    result = {
        **m.model_dump(),
        "codebook": str(args.codebook),
        "hash": cb.hash,
        "distance": cb.distance,
        "weight": cb.weight,
    }
    emit(result, as_json=args.json, text=_stats_table(args.codebook, cb, m))
    return 0


def _stats_table(path: str, cb: Any, m: Any) -> str:
    lines = [
        f"codebook {path}: {cb.spec}, {_rule(cb)}, d={cb.dim}, hash {cb.hash[:16]}",
        f"{m.n} entries; capacity {m.capacity}, vocabulary {m.vocab_size}",
        f"{'level':>5} {'N_l':>5} {'used':>5} {'U_l':>8} {'U_1:l':>8} {'H_norm':>7} {'N_eff':>7}",
    ]
    for lv, n_l in enumerate(m.sizes):
        lines.append(
            f"{lv + 1:>5} {n_l:>5} {round(m.utilization[lv] * n_l):>5} "
            f"{100 * m.utilization[lv]:>7.2f}% {100 * m.prefix_utilization[lv]:>7.2f}% "
            f"{m.entropy_norm[lv]:>7.3f} {m.effective_codes[lv]:>7.2f}"
        )
    lines.append(_headline(m))
    return "\n".join(lines)


def _search(args: argparse.Namespace) -> int:
    from genmem.memory.rqkmeans import DISTANCES
    from genmem.memory.search import (
        format_search_table,
        parse_configs,
        search_configs,
        write_search_results,
    )

    try:
        configs = parse_configs(args.configs)
    except ValueError as exc:
        raise CLIError(f"--configs: {exc}") from None
    distances = [d.strip() for d in args.distances.split(",") if d.strip()]
    unknown = [d for d in distances if d not in DISTANCES]
    if unknown or not distances:
        raise CLIError(
            f"--distances {args.distances!r}: unknown {unknown or 'empty list'}; "
            f"use a comma list of {', '.join(DISTANCES)}"
        )
    if not args.out.lower().endswith(".csv"):
        raise CLIError(f"--out {args.out!r} must name a .csv file (the .json goes beside it)")
    if not 0.0 <= args.heldout < 1.0:
        raise CLIError(f"--heldout {args.heldout}: a share in [0, 1), e.g. 0.2")
    _input_kind(args.input)
    x, _, _ = _embed_input(args, max(max(c) for c in configs))
    rows = search_configs(
        x,
        configs,
        distances,
        weight=args.weight,
        seed=args.seed,
        n_init=args.n_init,
        max_iter=args.max_iter,
        heldout=args.heldout,
        progress=not args.json,
    )
    csv_path, json_path = write_search_results(rows, args.out)
    result = {"csv": str(csv_path), "json": str(json_path), "rows": [r.model_dump() for r in rows]}
    text = f"{format_search_table(rows)}\nwrote {csv_path} and {json_path}"
    emit(result, as_json=args.json, text=text)
    return 0
