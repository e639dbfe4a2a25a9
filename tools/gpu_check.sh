#!/usr/bin/env bash
# One-shot GPU check of the engine, for a GPU machine held for a few minutes only (one H100 or
# H200, PyTorch 2.11 cu130 in its python3, nvcc 13.0, cmake, ninja, no network, no Debian -dev
# packages). Run tools/prepare_gpu_deps.sh first on the build machine and carry .gpu-deps with
# the tree. From the repository root: bash tools/gpu_check.sh. Everything lands in $OUT
# (default /tmp/gpu_out):
#   gpu_check.log   this script's whole output, phase by phase with timestamps
#   configure.log   cmake's output          build.log   the build (-k 0: every error at once)
#   cuda_test.xml   engine_cuda_test's results (gtest XML)
#   gpu_runs.log    the CLI on cuda: gradient-checked runs of several kinds, offload and
#                   recompute, a TorchScript model scripted by 2.11, a trace and its comparison,
#                   the NCCL refusal of two ranks on one GPU
#   gpu_trace.json  the measured trace of one run       figures.txt  the numbers for the docs
#   ctest_cpu.log   the CPU engine tests against this torch
# It never stops at the first failure: each phase is bounded so the whole script ends before
# BUDGET seconds (default 510, under 9 minutes). Dry run on a CPU machine:
#   PYTHON=~/.cache/pipestudio/torch-2.11.0/bin/python BUILD_DIR=build-torch2 bash tools/gpu_check.sh
set -uo pipefail
OUT=${OUT:-/tmp/gpu_out}; mkdir -p "$OUT"
exec > >(tee "$OUT/gpu_check.log") 2>&1
T0=$(date +%s); BUDGET=${BUDGET:-510}
now() { echo $(( $(date +%s) - T0 )); }
left() { local l=$(( BUDGET - $(now) - ${1:-0} )); (( l < 5 )) && l=5; echo $l; }
cap() { local a=$1 b; b=$(left "$2"); echo $(( a < b ? a : b )); }  # min(a s, the budget left after reserving $2 s)
phase() { echo; echo "=== [$(now)s] $*"; }
B=${BUILD_DIR:-build-gpu}; J=$(nproc); PY=${PYTHON:-python3}

phase "probe"
export PATH=/usr/local/cuda/bin:$PATH
nvidia-smi -L 2>&1 || echo "no nvidia-smi"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>/dev/null
for t in nvcc cmake ninja g++ "$PY"; do printf '%-8s %s\n' "$t" "$(command -v "$t" || echo MISSING)"; done
nvcc --version 2>/dev/null | tail -1; cmake --version | head -1
if ! read -r TV TCU TCMAKE TDIR GPUS < <("$PY" -c 'import torch,os;print(torch.__version__,torch.version.cuda,torch.utils.cmake_prefix_path,os.path.dirname(torch.__file__),torch.cuda.device_count())' 2>/dev/null); then
  echo "FATAL: $PY cannot import torch"; exit 1
fi
SP=$(dirname "$TDIR")
echo "torch=$TV cuda=$TCU gpus=$GPUS site-packages=$SP"

phase "deps (carried Debian 12 -dev packages)"
DEPS=$PWD/.gpu-deps/root
if compgen -G ".gpu-deps/debs/*.deb" >/dev/null; then
  mkdir -p "$DEPS"; for f in .gpu-deps/debs/*.deb; do dpkg -x "$f" "$DEPS"; done; echo "unpacked into $DEPS"
  export CPATH="$DEPS/usr/include${CPATH:+:$CPATH}"  # gloo's headers, for ProcessGroupGloo.hpp
else echo "no .gpu-deps carried: relying on the system's packages"; fi

phase "configure (as the torch2 preset: pip's torch/ first on CMAKE_PREFIX_PATH)"
timeout "$(cap 120 400)" cmake -S . -B "$B" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  "-DCMAKE_PREFIX_PATH=$TDIR;$TCMAKE;$DEPS/usr" -DCMAKE_CUDA_COMPILER="$(command -v nvcc)" \
  -DPIPESTUDIO_BUILD_UI=OFF -DPIPESTUDIO_BUILD_BENCH=OFF -DPIPESTUDIO_BUILD_ENGINE=ON \
  -DTORCH_CUDA_ARCH_LIST=9.0 -DPIPESTUDIO_TORCH_PYTHON="$(command -v "$PY")" \
  -DCMAKE_GTEST_DISCOVER_TESTS_DISCOVERY_MODE=PRE_TEST > "$OUT/configure.log" 2>&1
crc=$?
grep -E 'ps_engine:|PyTorch: |CUDA detected|Found CUDAToolkit|Could NOT|CMake Error' "$OUT/configure.log" | head -20
grep -E '^PS_NCCL|^TORCH_LIBRARY|^c10_LIBRARY' "$B/CMakeCache.txt" 2>/dev/null
[ $crc -eq 0 ] || { tail -40 "$OUT/configure.log"; phase "configure FAILED rc=$crc"; exit 1; }

phase "build (-k 0)"
timeout "$(cap 330 150)" cmake --build "$B" -j "$J" --target pipestudio-cli pipestudio-engine engine_tests -- -k 0 \
  > "$OUT/build.log" 2>&1
brc=$?
grep -aE 'error:|FAILED:|undefined reference' "$OUT/build.log" | head -40
phase "build rc=$brc"

phase "CUDA tests (engine_cuda_test)"
if [ -x "$B/tests/engine_cuda_test" ]; then
  timeout "$(cap 120 90)" "$B/tests/engine_cuda_test" --gtest_output="xml:$OUT/cuda_test.xml" 2>&1 | tail -40
else echo "engine_cuda_test not built"; fi

phase "CLI on cuda"
CLI=$B/app/pipestudio-cli
if [ -x "$CLI" ] && [ -x "$B/app/pipestudio-engine" ]; then
  {
    M=gpt:layers=4,hidden=64,heads=2,seq=16,vocab=64
    for spec in "1f1b 2 4" "zb-h1 2 4" "interleaved-1f1b 2 4" "zb-v 2 4" "dualpipe-v 2 4" "zb-h2 4 8"; do
      set -- $spec
      "$CLI" generate "$1" --devices "$2" --microbatches "$3" -o "/tmp/gpu_$1.pipe"
      echo "--- $1 D=$2 M=$3: f32 gradient check"
      timeout "$(cap 40 60)" "$CLI" run "/tmp/gpu_$1.pipe" --model "$M" --device cuda --check-gradients --iterations 3 --warmup 1; echo "rc=$?"
    done
    echo "--- f64 gradient check (1f1b)"
    timeout "$(cap 40 60)" "$CLI" run /tmp/gpu_1f1b.pipe --model "$M,dtype=f64" --device cuda --check-gradients; echo "rc=$?"
    echo "--- offload and recompute (1f1b with R, OFFLOAD, RELOAD)"
    cat > /tmp/gpu_offload.pipe <<'PIPE'
devices 2
microbatches 2
device 0: F0 F1 OFFLOAD0 RELOAD0 R0 B0 B1
device 1: F0 B0 F1 B1
PIPE
    timeout "$(cap 40 60)" "$CLI" run /tmp/gpu_offload.pipe --model "$M" --device cuda --check-gradients; echo "rc=$?"
    echo "--- TorchScript model scripted by torch 2.11"
    timeout "$(cap 40 60)" "$CLI" run /tmp/gpu_1f1b.pipe --model torchscript:path=tests/data/torchscript/torch-2.11/sequential.pt --device cuda --check-gradients; echo "rc=$?"
    echo "--- a trace, and its comparison with the plan"
    timeout "$(cap 40 60)" "$CLI" run /tmp/gpu_zb-h1.pipe --model "$M" --device cuda --iterations 5 --warmup 2 --trace "$OUT/gpu_trace.json"; echo "rc=$?"
    "$CLI" compare /tmp/gpu_zb-h1.pipe "$OUT/gpu_trace.json"; echo "rc=$?"
    echo "--- 2 ranks on $GPUS GPU(s): with one GPU, a prompt refusal naming NCCL, not a hang"
    timeout "$(cap 60 40)" "$CLI" run /tmp/gpu_1f1b.pipe --model "$M" --device cuda --nproc 2 --timeout 15 --connect-timeout 15; echo "rc=$? (124 = hung)"
  } > "$OUT/gpu_runs.log" 2>&1
  grep -E '^---|rc=|gradient check|makespan|error' "$OUT/gpu_runs.log" | head -80
  grep -E '^---|gradient check|last iteration|peak' "$OUT/gpu_runs.log" > "$OUT/figures.txt"
else echo "CLI/engine not built"; fi

phase "CPU engine tests on torch $TV"
timeout "$(left 8)" ctest --test-dir "$B" -L engine -j "$J" --timeout 60 --output-on-failure > "$OUT/ctest_cpu.log" 2>&1
echo "ctest rc=$?"; grep -E 'tests passed|tests failed|\*\*\*Failed|Timeout' "$OUT/ctest_cpu.log" | head -30
phase "done in $(now)s"
