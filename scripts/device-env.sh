# Source on the GPU machine: finds NCCL and cuBLAS there (pip nvidia-* packages or the CUDA toolkit)
# and keeps NVLink multicast off. Usage: . bundle/device-env.sh
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
_spk_libs=$(python3 - <<'PY' 2>/dev/null
import importlib, os
out = []
for m in ("nvidia.nccl", "nvidia.cublas", "nvidia.cuda_runtime"):
    try:
        mod = importlib.import_module(m)
        for p in mod.__path__:
            if os.path.isdir(os.path.join(p, "lib")): out.append(os.path.join(p, "lib"))
    except Exception:
        pass
print(":".join(out))
PY
)
for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib; do
  [ -d "$d" ] && _spk_libs="$_spk_libs:$d"
done
# The bundle's own lib/ too: RUNPATH ($ORIGIN/../lib) covers the binaries' direct needs only, not the
# libraries those pull in (libgloo -> libhiredis).
_spk_bundle_lib=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lib
[ -d "$_spk_bundle_lib" ] && _spk_libs="$_spk_bundle_lib:$_spk_libs"
export LD_LIBRARY_PATH="${_spk_libs#:}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
unset _spk_bundle_lib
unset _spk_libs
