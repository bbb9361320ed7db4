#!/usr/bin/env bash
# One call on the GPU machine: gpu tests, HF reference logits for the golden files, our CPU and CUDA
# outputs against HF for each synthetic architecture, then the decode benchmark. Results in $OUT.
# Env: SKIP_HF=1 skips the HF comparison; KERNEL_BENCH=1 adds bench_cuda_kernels (GEMV/GEMM/sampling).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/spk-out}; mkdir -p "$OUT"
. bundle/device-env.sh
S=bundle/bin/sparkctl
{
echo "== gpu tests"
for t in cuda_kernels_test cuda_backend_test cuda_sample_test cuda_model_test; do
  echo "-- $t"; bundle/bin/$t --gtest_brief=1 2>&1 | grep -v "^\[ *OK"
done
if [ "${KERNEL_BENCH:-0}" = 1 ]; then echo "== kernel bench"; bundle/bin/bench_cuda_kernels 30; fi
if [ "${SKIP_HF:-0}" != 1 ]; then
echo "== HF reference (fp32)"
python3 scripts/hf_reference.py --synth-all --sparkctl $S --npm-dir bundle/npm --work /tmp/golden-models \
  --out-dir "$OUT/golden" --device cpu 2>&1 | tail -5
ids=$(python3 -c "import json,glob; print(','.join(map(str, json.load(open(sorted(glob.glob('$OUT/golden/*.json'))[0]))['prompt_ids'])))")
for m in /tmp/golden-models/*/; do
  name=$(basename "$m")
  for be in cpu cuda; do
    $S generate --model "$m" --prompt-ids "$ids" --max-tokens 32 --temperature 0 --backend $be \
      --dump-logits "$OUT/ours-$be-$name.json" > /dev/null 2>"$OUT/gen-$be-$name.log" || tail -3 "$OUT/gen-$be-$name.log"
    tol=1e-3; [ $be = cuda ] && tol=2e-2
    python3 scripts/compare_logits.py "$OUT/golden/$name.json" "$OUT/ours-$be-$name.json" --tol $tol | sed "s/^/$be vs HF: /"
  done
done
fi
echo "== decode bench"; scripts/bench-decode.sh "$@"
} 2>&1 | tee "$OUT/device-check.log"
tar czf "$OUT/results.tgz" -C "$OUT" golden $(cd "$OUT" && ls ours-*.json gen-*.log 2>/dev/null) 2>/dev/null
rm -rf "$OUT/golden" "$OUT"/ours-*.json "$OUT"/gen-*.log
