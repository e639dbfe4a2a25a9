#!/usr/bin/env bash
# Writes the 131,072-op PyTorch CSV of docs/benchmarks.md ("pipestudio-cli startup"):
# interleaved 1F1B, 8 devices x 2 chunks (16 stages), 4096 micro-batches, compute_only:
# 16 stages x 4096 micro-batches x (F, B) = 131,072 ops.
#   make_131k_csv.sh [CLI] [OUT.csv]
set -euo pipefail
cli=${1:-build/app/pipestudio-cli}
out=${2:-/tmp/pipestudio-bench/interleaved-1f1b-8x4096.csv}
mkdir -p "$(dirname "$out")"
"$cli" generate interleaved-1f1b --devices 8 --microbatches 4096 -o "$out"
ops=$(tr ',' '\n' <"$out" | grep -c .)
[ "$ops" -eq 131072 ] || { echo "make_131k_csv: expected 131072 ops, got $ops" >&2; exit 1; }
echo "$out: $ops ops"
