#!/usr/bin/env bash
# A cold-start bank from GSM8K training problems, then online evolution on the test stream with
# every ablation method: the "larger run" of bench/README.md. Both stages are resumable, so
# rerunning the same command after an interruption continues where it stopped.
#
#   bash bench/coldstart_evolve.sh OUT [LIMIT] [BLOCKS] [BLOCK_SIZE] [PROBE]
#
# Defaults: 40 problems x 2 attempts; 4 blocks x 5 queries, probe 5. Extra options for both
# commands (e.g. --model vllm:http://gpu:8000/v1#Qwen/Qwen2.5-7B-Instruct) go in $GENMEM_ARGS;
# the caps ($GENMEM_CAPS, default: 1 planner step, 48-token replies) keep a CPU run of the
# embedded 135M model to several hours.
set -euo pipefail
OUT=${1:?usage: coldstart_evolve.sh OUT [LIMIT] [BLOCKS] [BLOCK_SIZE] [PROBE]}
LIMIT=${2:-40}
BLOCKS=${3:-4}
BLOCK_SIZE=${4:-5}
PROBE=${5:-5}
CAPS=${GENMEM_CAPS:---max-steps 1 --max-new-tokens 48}
read -r -a EXTRA <<< "${GENMEM_ARGS:-}"
read -r -a CAP <<< "$CAPS"
mkdir -p "$OUT"
BANK="sqlite:///$(cd "$OUT" && pwd)/cold.db?bank=cold"

genmem bank coldstart --dataset gsm8k --split train --limit "$LIMIT" \
  --attempts 2 --sizes 8,4,2,2 --merge llm --max-field-chars 12 --max-records 1 \
  "${CAP[@]}" "${EXTRA[@]}" --bank "$BANK" --out "$OUT/cold" --json \
  > "$OUT/coldstart.json" 2> "$OUT/coldstart.log"

genmem evolve --bank "$BANK" --dataset gsm8k --blocks "$BLOCKS" \
  --block-size "$BLOCK_SIZE" --probe-size "$PROBE" --methods sid,greedy,frozen,tfidf,dense,none \
  --candidates 2 --memory-k 2 "${CAP[@]}" "${EXTRA[@]}" --out "$OUT/evolve" --json \
  > "$OUT/evolve.json" 2> "$OUT/evolve.log"
