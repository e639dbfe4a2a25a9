#!/usr/bin/env bash
# ctest package_deb (label package): builds the Debian package of this build directory with
# `cpack -G DEB`, unpacks it with `dpkg -x` into a temporary root, and checks that the
# unpacked pipestudio-cli finds the unpacked engine: --version and a small 2-device 1F1B run.
# Needs a full build (cpack packages every installed target).
set -euo pipefail
build=$(cd "${1:?usage: deb_test.sh BUILD_DIR}" && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ps-deb-test.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail() { echo "deb_test: FAIL: $*" >&2; exit 1; }

for t in app/pipestudio-cli app/pipestudio-engine; do
  [ -x "$build/$t" ] || fail "$build/$t is not built (build everything before the package test)"
done

if ! cpack --config "$build/CPackConfig.cmake" -G DEB -B "$tmp/out" >"$tmp/cpack.log" 2>&1; then
  cat "$tmp/cpack.log" >&2
  fail "cpack -G DEB failed"
fi
deb=$(ls "$tmp"/out/*.deb 2>/dev/null | head -1)
[ -n "$deb" ] || fail "cpack wrote no .deb (log: $(tail -3 "$tmp/cpack.log"))"
echo "deb_test: built $(basename "$deb") ($(du -h "$deb" | cut -f1))"

depends=$(dpkg-deb -f "$deb" Depends)
echo "deb_test: Depends: $depends"
for d in libopenblas0-pthread libtorch libsqlite3; do
  grep -q "$d" <<<"$depends" || fail "Depends lacks $d"
done

root="$tmp/root"
dpkg -x "$deb" "$root"
for f in usr/bin/pipestudio-cli usr/libexec/pipestudio/pipestudio-engine \
         usr/share/pipestudio/examples/example.pipe usr/share/pipestudio/schedules \
         usr/share/pipestudio/profiles usr/share/applications/pipestudio.desktop \
         usr/share/metainfo/io.pipestudio.PipeStudio.metainfo.xml; do
  [ -e "$root/$f" ] || fail "the package lacks /$f"
done
cli="$root/usr/bin/pipestudio-cli"
engine="$root/usr/libexec/pipestudio/pipestudio-engine"
if ldd "$cli" | grep -q torch; then fail "the packaged pipestudio-cli links libtorch"; fi

unset PIPESTUDIO_ENGINE
version=$("$cli" --version) || fail "pipestudio-cli --version failed: $version"
echo "$version"
grep -q "^pipestudio-cli .*(run-event protocol [0-9]*)$" <<<"$version" || fail "no CLI line in --version"
grep -q "^pipestudio-engine .* at $engine\$" <<<"$version" || fail "--version does not name the unpacked engine $engine"

"$cli" generate 1f1b --devices 2 --microbatches 2 -o "$tmp/1f1b.pipe"
set +e
timeout 120 "$cli" run "$tmp/1f1b.pipe" --model mlp:layers=2,hidden=16 --threads 1 --events jsonl \
  >"$tmp/events.jsonl" 2>"$tmp/run.err"
rc=$?
set -e
[ $rc -eq 0 ] || { cat "$tmp/run.err" >&2; fail "run through the unpacked CLI exited $rc"; }
grep -q '"type":"started"' "$tmp/events.jsonl" || fail "no started event"
[ "$(grep -c '"type":"op"' "$tmp/events.jsonl")" -eq 8 ] || fail "expected 8 op events (2 devices x 2 micro-batches x F,B)"
grep -q '"status":"finished"' "$tmp/events.jsonl" || fail "the run did not finish: $(tail -2 "$tmp/events.jsonl")"
echo "deb_test: ok ($(grep -c . "$tmp/events.jsonl") events)"
