#!/usr/bin/env bash
# Builds the example session (resources/examples/example.session): three versions of one
# schedule, an interleaved variant, a schedule that deadlocks, their simulated runs with the
# bundled GPT-3 1.3B profile, and a few notes. Only pipestudio-cli is needed; sqlite3, when
# installed, switches the result to rollback-journal mode so it can be read from a read-only
# directory.
#   usage: make_example_session.sh PIPESTUDIO_CLI [OUT]
set -euo pipefail
cli=$(realpath "${1:?usage: make_example_session.sh PIPESTUDIO_CLI [OUT]}")
here=$(cd "$(dirname "$0")" && pwd)
final=$(realpath -m "${2:-$here/example.session}")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# Work in the temporary directory with short relative names: they are what the runs'
# configurations record.
cp "$here/../profiles/gpt3-1.3b.json" "$tmp/"
cd "$tmp"
out=example.session
profile=gpt3-1.3b.json

sim() {  # sim FILE NAME [FLAGS...]: simulate and record; a failing schedule is recorded too
  local file=$1 name=$2
  shift 2
  "$cli" simulate "$file" --profile "$profile" --session "$out" --session-name "$name" "$@" >/dev/null || true
}

# One schedule, three versions: GPipe, then 1F1B, then zero-bubble ZB-H1.
"$cli" generate gpipe --devices 4 --microbatches 8 -o pipeline.pipe
sim pipeline.pipe pipeline
"$cli" generate 1f1b --devices 4 --microbatches 8 -o pipeline.pipe
sim pipeline.pipe pipeline
sim pipeline.pipe pipeline --comm 0.5
"$cli" generate zb-h1 --devices 4 --microbatches 8 -o pipeline.pipe
sim pipeline.pipe pipeline

"$cli" generate interleaved-1f1b --devices 4 --microbatches 8 -o interleaved.pipe
sim interleaved.pipe interleaved

# Device 1 runs F1 before F0: F1 on stage 1 waits for device 0, which waits in B0 for device 1.
cat > deadlock.pipe <<'PIPE'
name "deadlock"
devices 2
stages 2
microbatches 2
placement linear

device 0: F0 B0 F1 B1
device 1: F1 F0 B0 B1
PIPE
sim deadlock.pipe deadlock 2>/dev/null

"$cli" session note "$out" --schedule 1 "GPipe baseline: every forward first, long drain" >/dev/null
"$cli" session note "$out" --schedule 3 "ZB-H1 fills the cool-down with weight gradients" >/dev/null
"$cli" session note "$out" --run 2 --device 0 --time 0 "device 0 starts with 3 warm-up forwards" >/dev/null

if command -v sqlite3 >/dev/null; then
  sqlite3 "$out" "PRAGMA journal_mode = DELETE; VACUUM;" >/dev/null
fi
mv -f "$out" "$final"
rm -f "$final-wal" "$final-shm"
"$cli" session list "$final"
