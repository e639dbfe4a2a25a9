#!/usr/bin/env bash
# Whole-process timings of docs/benchmarks.md ("pipestudio-cli startup"), with hyperfine:
#   pipestudio-cli --version, validate of a 64-op schedule, and simulate of a 131,072-op
#   PyTorch CSV against bench/python_event_sim.py on the same file, in one hyperfine run.
#   cli_startup.sh [BUILD_DIR] [RUNS]
# Prints hyperfine's table and the medians; JSON in /tmp/pipestudio-bench/.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
build=${1:-build}
runs=${2:-30}
cli="$build/app/pipestudio-cli"
dir=/tmp/pipestudio-bench
mkdir -p "$dir"
"$cli" generate 1f1b --devices 4 --microbatches 8 -o "$dir/1f1b-4x8.pipe"  # 4 x 8 x (F, B) = 64 ops
bash "$here/make_131k_csv.sh" "$cli" "$dir/interleaved-1f1b-8x4096.csv"
csv="$dir/interleaved-1f1b-8x4096.csv"

# Both simulators must agree before they are timed.
ours=$("$cli" simulate "$csv" --cost F=1,I=1,W=1 --comm 0.1 | sed -n 's/^makespan \([0-9.]*\) ms.*/\1/p')
theirs=$(python3 "$here/python_event_sim.py" "$csv" --cost F=1,I=1,W=1 --comm 0.1 | sed -n 's/^makespan \([0-9.]*\) ms.*/\1/p')
echo "makespan: pipestudio-cli $ours ms, python_event_sim.py $theirs ms"
[ "$ours" = "$theirs" ] || { echo "the two simulators disagree" >&2; exit 1; }

hyperfine -N --warmup 3 --runs "$runs" --export-json "$dir/startup.json" \
  "$cli --version" \
  "$cli validate $dir/1f1b-4x8.pipe"
hyperfine -N --warmup 2 --runs "$runs" --export-json "$dir/simulate.json" \
  "$cli simulate $csv --cost F=1,I=1,W=1 --comm 0.1" \
  "python3 $here/python_event_sim.py $csv --cost F=1,I=1,W=1 --comm 0.1"
python3 - "$dir/startup.json" "$dir/simulate.json" <<'PY'
import json, sys
for path in sys.argv[1:]:
    results = json.load(open(path))["results"]
    for r in results:
        print(f"median {1000 * r['median']:8.1f} ms  (user {1000 * r['user']:.1f} ms, system {1000 * r['system']:.1f} ms)  {r['command']}")
    if "simulate" in path:
        print(f"python / pipestudio-cli (medians): {results[1]['median'] / results[0]['median']:.1f}x")
PY
