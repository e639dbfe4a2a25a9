#!/usr/bin/env bash
# Headless demo: generate, validate and summarise a schedule with the CLI.
set -euo pipefail
cli=${1:-build/app/pipestudio-cli}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "== pipestudio-cli generate 1f1b --devices 4 --microbatches 8"
"$cli" generate 1f1b --devices 4 --microbatches 8 -o "$tmp/1f1b.pipe"
cat "$tmp/1f1b.pipe"
echo "== pipestudio-cli validate"
"$cli" validate "$tmp/1f1b.pipe" && echo "valid"
if "$cli" --help | grep -q '^  simulate'; then
  echo "== pipestudio-cli simulate --cost F=1,I=1,W=1"
  "$cli" simulate "$tmp/1f1b.pipe" --cost F=1,I=1,W=1
fi
