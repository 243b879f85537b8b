#!/usr/bin/env bash
# A cold-start bank from GSM8K training problems, then online evolution on the test stream with
# every ablation method: the "larger run" of bench/README.md. Both stages are resumable, so
# rerunning the same command after an interruption continues where it stopped.
#
#   bash bench/coldstart_evolve.sh OUT [LIMIT] [BLOCKS] [BLOCK_SIZE] [PROBE]
#
# Defaults: 100 problems x 2 attempts; 5 blocks x 20 queries, probe 5: about 2 hours on 2 CPU
# cores with the embedded 135M model (bench/README.md has the figures). Extra options for both
# commands (e.g. --model vllm:http://gpu:8000/v1#Qwen/Qwen2.5-7B-Instruct) go in $GENMEM_ARGS;
# the caps ($GENMEM_CAPS, default: 1 planner step, 48-token replies) keep a CPU run that short.
set -euo pipefail
OUT=${1:?usage: coldstart_evolve.sh OUT [LIMIT] [BLOCKS] [BLOCK_SIZE] [PROBE]}
LIMIT=${2:-100}
BLOCKS=${3:-5}
BLOCK_SIZE=${4:-20}
PROBE=${5:-5}
CAPS=${GENMEM_CAPS:---max-steps 1 --max-new-tokens 48}
read -r -a EXTRA <<< "${GENMEM_ARGS:-}"
read -r -a CAP <<< "$CAPS"
mkdir -p "$OUT"
BANK="sqlite:///$(cd "$OUT" && pwd)/cold.db?bank=cold"

genmem bank coldstart --bench gsm8k-train --limit "$LIMIT" \
  --attempts 2 --sizes 8,4,2,2 --merge llm --max-field-chars 12 --max-records 1 \
  "${CAP[@]}" "${EXTRA[@]}" --bank "$BANK" --out "$OUT/cold" --json \
  > "$OUT/coldstart.json" 2> "$OUT/coldstart.log"

genmem evolve --bank "$BANK" --bench gsm8k-test --blocks "$BLOCKS" \
  --block-size "$BLOCK_SIZE" --probe-size "$PROBE" --methods sid,greedy,frozen,tfidf,dense,none \
  --candidates 2 --memory-k 2 "${CAP[@]}" "${EXTRA[@]}" --out "$OUT/evolve" --json \
  > "$OUT/evolve.json" 2> "$OUT/evolve.log"
