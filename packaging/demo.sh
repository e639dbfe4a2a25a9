#!/usr/bin/env bash
# Headless demo (what `make run` shows without a display): generate, validate, simulate,
# find a deadlock, and search, all with pipestudio-cli.
set -euo pipefail
cli=${1:-build/app/pipestudio-cli}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

step "pipestudio-cli generate zb-h1 --devices 4 --microbatches 8"
"$cli" generate zb-h1 --devices 4 --microbatches 8 -o "$tmp/zb-h1.pipe"
cat "$tmp/zb-h1.pipe"

step "pipestudio-cli validate zb-h1.pipe"
"$cli" validate "$tmp/zb-h1.pipe"

step "pipestudio-cli simulate zb-h1.pipe --cost F=1,I=1,W=1 (ZB-H1: 3M + D - 1 = 27)"
"$cli" simulate "$tmp/zb-h1.pipe" --cost F=1,I=1,W=1

step "pipestudio-cli simulate 1f1b with Llama-2 7B costs on 80 GB GPUs"
"$cli" generate 1f1b --devices 4 --microbatches 8 -o "$tmp/1f1b.pipe"
"$cli" simulate "$tmp/1f1b.pipe" --profile "$here/resources/profiles/llama2-7b.json" || true

step "The bundled example (a user-declared ALLREDUCE kind), expanded and simulated"
"$cli" expand "$here/resources/examples/example.pipe" --set microbatches=4
"$cli" simulate "$here/resources/examples/example.pipe" --cost F=1,I=1,W=1

step "A broken order: device 0 runs B0 before F1 is sent on (deadlock)"
cat > "$tmp/deadlock.pipe" <<'PIPE'
devices 2
microbatches 2
device 0: F0 B0 F1 B1
device 1: F1 F0 B0 B1
PIPE
"$cli" validate "$tmp/deadlock.pipe" || true

step "pipestudio-cli search --profile gemma-2b.json --devices 4 --microbatches 8 --time-limit 3"
"$cli" search --profile "$here/resources/profiles/gemma-2b.json" --devices 4 --microbatches 8 \
  --time-limit 3 -o "$tmp/best.pipe" || true

printf '\nOpen the designer with a display: make run (or build/app/pipestudio FILE.pipe)\n'
