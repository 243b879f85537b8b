#!/usr/bin/env bash
# The GPU check (issue 37): on a machine with one GPU, train align, mid and grpo for a few steps
# each under DeepSpeed ZeRO-3 in one process, load every saved policy back and check that no
# tensor came out empty, and time SID decoding against the paper's GPU figures.
#
#   python bench/gpu_stage.py build      # first, where PyPI is reachable (see bench/README.md)
#   bench/gpu_check.sh                   # on the GPU machine: needs no package index
#   bench/gpu_check.sh --cpu             # the same steps on the CPU: cpu-zero3, DS_ACCELERATOR=cpu
#   bench/gpu_check.sh --cpu --no-stage  # ... with this Python's packages, building its own bank
#
# --no-wheels uses the stage's model and bank with this Python's packages (gpu_stage.py check).
# Environment: PRESET (gpu-zero3; --cpu: cpu-zero3), STEPS (2), STAGES ("align mid grpo"),
# CONTEXTS (questions per SID-decoding setting: 20; --cpu: 3; 0 skips the timing),
# PYTHON (python3), WORK (bench/out/gpu-check), LOGS ($WORK/logs), STEP_TIMEOUT (s, 900).
# Prints a summary at the end; exits 1 if any step failed.
set -euo pipefail
cd "$(dirname "$0")/.."

mode=gpu
stage=wheels
for arg in "$@"; do
  case "$arg" in
    --cpu) mode=cpu ;;
    --no-stage) stage=none ;;
    --no-wheels) stage=model ;;
    -h | --help) sed -n '2,15p' "$0" | cut -c3-; exit 0 ;;
    *) echo "gpu_check.sh: unknown option $arg (use --cpu, --no-stage, --no-wheels)" >&2; exit 2 ;;
  esac
done

PYTHON="${PYTHON:-python3}"
STEPS="${STEPS:-2}"
STAGES="${STAGES:-align mid grpo}"
WORK="${WORK:-bench/out/gpu-check}"
LOGS="${LOGS:-$WORK/logs}"
STEP_TIMEOUT="${STEP_TIMEOUT:-900}"
if [[ $mode == cpu ]]; then
  PRESET="${PRESET:-cpu-zero3}"
  CONTEXTS="${CONTEXTS:-3}"
  export DS_ACCELERATOR=cpu GENMEM_DEVICE=cpu CUDA_VISIBLE_DEVICES=""
else
  PRESET="${PRESET:-gpu-zero3}"
  CONTEXTS="${CONTEXTS:-20}"
fi
mkdir -p "$WORK" "$LOGS"
WORK="$(cd "$WORK" && pwd)"
LOGS="$(cd "$LOGS" && pwd)"
export GENMEM_CACHE="$WORK/cache" HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"

summary=()
failed=0
# step NAME COMMAND...: stdout to $LOGS/NAME.out, stderr to $LOGS/NAME.log; PASS or FAIL noted.
step() {
  local name=$1 start=$SECONDS rc=0
  shift
  echo "== $name: $*"
  timeout "$STEP_TIMEOUT" "$@" >"$LOGS/$name.out" 2>"$LOGS/$name.log" || rc=$?
  local took=$((SECONDS - start))
  if [[ $rc == 0 ]]; then
    summary+=("PASS  $name ($took s)")
  else
    summary+=("FAIL  $name (exit $rc after $took s; $LOGS/$name.log)")
    failed=1
    echo "-- $name failed (exit $rc); the end of its output and log:"
    tail -n 5 "$LOGS/$name.out" | cut -c1-400
    grep -v '^Loading weights' "$LOGS/$name.log" | tail -n 25 | cut -c1-400
  fi
  return 0
}
train() {  # train STAGE ARGS...: one process under torchrun, so DeepSpeed has its launcher
  local stage=$1
  shift
  step "$stage" "$PYTHON" -m torch.distributed.run --standalone --nproc_per_node 1 \
    -m genmem.cli train "$stage" --bank "$BANK" --config "$PRESET" --train-steps "$STEPS" \
    --out "$WORK/$stage" --json "$@"
}

# 1. Packages, model and bank: staged by gpu_stage.py, or this Python's own.
SITE="$WORK/site"
if [[ $stage == none ]]; then
  step bank "$PYTHON" -m genmem.cli bank seed --distill reference --size 300 --json
  if [[ $failed == 1 ]]; then
    printf '%s\n' "${summary[@]}"
    exit 1
  fi
  BANK=$("$PYTHON" -c 'import json, sys; print(json.load(sys.stdin)["url"])' <"$LOGS/bank.out")
else
  wheels=()
  [[ $stage == model ]] && wheels=(--no-wheels)
  if ! "$PYTHON" bench/gpu_stage.py unpack --into "$SITE" "${wheels[@]}" >"$LOGS/unpack.log" 2>&1; then
    cat "$LOGS/unpack.log"
    exit 1
  fi
  cat "$LOGS/unpack.log"
  export PYTHONPATH="$SITE:$PYTHONPATH"
  BANK=$(cat "$WORK/bank/url")
fi

# 2. Where things run: the GPU (a shared load, i.e. the judge's and teacher's, must land on it),
#    and the default model converted from its GGUF once, before any launcher starts.
step environment "$PYTHON" - "$mode" <<'EOF'
import sys

import torch

from genmem.policies.local import load_policy

mode = sys.argv[1]
cuda = torch.cuda.is_available()
gpu = torch.cuda.get_device_name(0) if cuda else "none"
policy = load_policy()
device = str(policy.model.device)
print(f"torch {torch.__version__}, CUDA {torch.version.cuda}, GPU: {gpu}; shared loads on {device}")
if mode == "gpu" and not (cuda and device.startswith("cuda")):
    sys.exit(f"no GPU here (torch.cuda.is_available() is {cuda}, shared loads on {device}): "
             "run with --cpu for the same steps on the CPU")
EOF
if [[ $failed == 1 ]]; then
  printf '%s\n' "${summary[@]}"
  exit 1
fi

# 3. Each stage for $STEPS steps under $PRESET, from the default model.
for stage_name in $STAGES; do
  case "$stage_name" in
    align) train align --eval-size 2 --max-context-tokens 128 ;;
    mid) train mid --role retriever --keep valid --limit 1 --max-new-tokens 40 ;;
    grpo) train grpo --limit 1 --constrained --max-new-tokens 16 ;;
    *) echo "gpu_check.sh: unknown stage $stage_name in STAGES" >&2; exit 2 ;;
  esac
done

# 4. Every saved policy loads back whole: no empty tensor (ZeRO-3 saves were once all (0,)).
outs=()
for stage_name in $STAGES; do outs+=("$WORK/$stage_name"); done
[[ ${#outs[@]} == 0 ]] || step saved "$PYTHON" - "$BANK" "${outs[@]}" <<'EOF'
import math
import sys
from pathlib import Path

from safetensors import safe_open

from genmem.memory.location import open_bank
from genmem.policies.local import load_policy
from genmem.policies.sid_tokens import add_sid_tokens

# what every stage starts from: the default model with the bank's SID tokens
base = load_policy(fresh=True)
add_sid_tokens(base.model, base.tokenizer, open_bank(sys.argv[1]).spec)
first = base.model.state_dict()
expected = sum(p.numel() for p in base.model.parameters())
bad = 0
for out in map(Path, sys.argv[2:]):
    files = sorted(out.glob("*.safetensors"))
    if not files:
        print(f"{out.name}: no saved weights in {out}")
        bad += 1
        continue
    empty, stored = [], 0
    for f in files:
        with safe_open(f, "pt") as st:
            for key in st.keys():
                shape = st.get_slice(key).get_shape()
                stored += math.prod(shape)
                if math.prod(shape) == 0:
                    empty.append(f"{key} {tuple(shape)}")
    try:
        policy = load_policy(out, fresh=True)
    except Exception as exc:  # a save with empty tensors does not load: say why
        print(f"{out.name}: does not load: {exc}")
        bad += 1
        continue
    params = sum(p.numel() for p in policy.model.parameters())
    now = policy.model.state_dict()
    moved = sum(not first[k].equal(now[k]) for k in first if k in now)
    print(
        f"{out.name}: {params:,} parameters (start {expected:,}), {stored:,} stored, "
        f"{moved} of {len(first)} tensors changed by training"
    )
    if empty or params != expected or set(now) != set(first):
        bad += 1
        print(f"{out.name}: BAD: empty {empty[:5]}, keys differ: {set(now) ^ set(first)}")
sys.exit(1 if bad else 0)
EOF

# 5. SID decoding latency on the shared load (the GPU, unless --cpu), greedy and beams 5/10/20;
# 6. (issue 38) the tree engine against the trie engine there and on this machine's CPU, with
# their SID agreement, and a 30-command scoring turn in both layouts.
if [[ $CONTEXTS != 0 ]]; then
  step sid-decode "$PYTHON" -m genmem.cli sid bench --contexts "$CONTEXTS" --beams 1,5,10,20 --json
  step sid-latency "$PYTHON" bench/sid_latency.py --contexts "$CONTEXTS" --agreement 200 --json
  if [[ $mode == gpu ]]; then
    step sid-latency-cpu env GENMEM_DEVICE=cpu "$PYTHON" bench/sid_latency.py \
      --contexts "$CONTEXTS" --agreement 20 --json
  fi
  step choice-scoring "$PYTHON" bench/choice_scoring.py --games 4 --commands 30 --json
fi

# Summary
echo
echo "=== GPU check ($mode, preset $PRESET, $STEPS steps), $(date -u +%FT%TZ) ==="
cat "$LOGS/environment.out" 2>/dev/null || true
printf '%s\n' "${summary[@]}"
for stage_name in $STAGES; do
  "$PYTHON" - "$LOGS/$stage_name.out" <<'EOF' || true
import json, sys

try:
    lines = open(sys.argv[1]).read().splitlines()
except OSError:
    sys.exit(0)
report = next((json.loads(x) for x in reversed(lines) if x.startswith("{")), None)
if report is None:
    sys.exit(0)
keys = ("steps", "examples", "losses", "seconds", "complete")
print(f"  {sys.argv[1].rsplit('/', 1)[-1][:-4]}:", {k: report[k] for k in keys if k in report})
EOF
done
sed 's/^/  /' "$LOGS/saved.out" 2>/dev/null || true
"$PYTHON" - "$LOGS/sid-decode.out" <<'EOF' || true
import json, sys

from genmem.policies.decode_bench import PAPER_GPU_MS

try:
    report = json.loads(open(sys.argv[1]).read())
except (OSError, ValueError):
    sys.exit(0)
print(f"  SID decoding, median ms per query over {report['contexts']} questions "
      f"({report['mean_prompt_tokens']:.0f} prompt tokens):")
print(f"  {'beam':>6} {'tree':>8} {'trie':>8} {'generate':>8} {'free':>8} {'paper GPU':>10}")
rows = {(t["decoder"], t["beam"]): t["p50_ms"] for t in report["timings"]}
for beam in sorted({b for _, b in rows}):
    name = "greedy" if beam == 1 else str(beam)
    decoders = ("tree", "trie", "generate", "free")
    cells = [f"{rows.get((d, beam), float('nan')):>8.1f}" for d in decoders]
    print(f"  {name:>6} {' '.join(cells)} {PAPER_GPU_MS.get(beam, ''):>10}")
EOF
for name in sid-latency sid-latency-cpu choice-scoring; do
  "$PYTHON" - "$LOGS/$name.out" "$name" <<'EOF' || true
import json, sys

try:
    r = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
except (OSError, ValueError, IndexError):
    sys.exit(0)
keys = ("device", "device_name", "ref_ms", "fast_ms", "speedup_greedy", "speedup_beam20",
        "sid_agreement", "speedup", "speedup_candidates", "choice_agreement")
print(f"  {sys.argv[2]}:", {k: r[k] for k in keys if k in r})
EOF
done
if [[ $failed == 1 ]]; then
  echo "GPU check: FAILED (logs in $LOGS)"
  exit 1
fi
echo "GPU check: all steps passed (logs in $LOGS)"
