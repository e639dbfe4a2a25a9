#!/usr/bin/env bash
# Runs each libFuzzer target for a while on a scratch copy of its seed corpus (the corpora in
# the repository are not written). A crash, leak, timeout or out-of-memory fails the run and
# leaves its input under BUILD/fuzz-artifacts/ (add it to tests/ as a regression test).
# usage: tests/fuzz/run.sh BUILD_DIR SECONDS_PER_TARGET TARGET...
set -euo pipefail
build=$1; seconds=$2; shift 2
here="$(cd "$(dirname "$0")" && pwd)"
dict_of() {
  case "$1" in
    dsl) echo dsl.dict ;;
    pytorch_csv) echo pytorch_csv.dict ;;
    session|session_write) echo session.dict ;;
    hosts) echo hosts.dict ;;
    *) echo json.dict ;;
  esac
}
# session_write starts from the session target's seeds.
corpus_of() {
  case "$1" in
    session_write) echo session ;;
    *) echo "$1" ;;
  esac
}
status=0
for t in "$@"; do
  bin="$build/tests/fuzz/fuzz_$t"
  if [ ! -x "$bin" ]; then echo "fuzz $t: $bin not built" >&2; status=1; continue; fi
  work="$build/fuzz-corpus/$t"
  mkdir -p "$work" "$build/fuzz-artifacts"
  log="$build/fuzz-artifacts/$t.log"
  # -timeout: one input; -rss_limit_mb: the memory a hostile file may cost (issue 16: 2 GB).
  if "$bin" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=16384 \
      -dict="$here/$(dict_of "$t")" -artifact_prefix="$build/fuzz-artifacts/$t-" -print_final_stats=1 \
      "$work" "$here/corpus/$(corpus_of "$t")" >"$log" 2>&1; then
    echo "fuzz $t: ok ($(grep -m1 -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$') runs in ${seconds}s)"
  else
    echo "fuzz $t: FAILED, see $log" >&2
    tail -n 40 "$log" >&2
    status=1
  fi
done
exit $status
