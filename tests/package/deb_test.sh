#!/usr/bin/env bash
# ctest package_deb (label package): builds the Debian packages of this build directory with
# `cpack -G DEB` and checks them as a Debian packager would, without installing them:
#   - the control fields (version with its Debian revision, section, maintainer, homepage,
#     extended descriptions) and the split: pipestudio links no libtorch and recommends
#     pipestudio-engine, which depends on pipestudio of the same version and on libtorch;
#   - lintian: no error and no warning (packaging/README.md says which tags are overridden, why);
#   - the layout: programs, data, documentation with copyright and changelog, man pages, MIME
#     type, icons, desktop entry and AppStream data, which pass desktop-file-validate,
#     appstreamcli validate and update-mime-database;
#   - no path of the source or build tree in any installed file (strings on the programs);
#   - the unpacked programs (dpkg -x): the CLI finds its engine and runs a schedule, finds a
#     profile a .pipe header names in the installed data; without pipestudio-engine it names the
#     package; the GUI answers --help and --version with no display and renders a screenshot
#     that leaves the home folder untouched.
# tests/package/clean_root_test.sh installs the same packages into a fresh Debian root.
# Needs a full build (cpack packages every installed target), lintian, desktop-file-utils,
# appstream and shared-mime-info (packaging/apt-packages.txt).
set -euo pipefail
build=$(cd "${1:?usage: deb_test.sh BUILD_DIR}" && pwd)
source_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ps-deb-test.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail() { echo "deb_test: FAIL: $*" >&2; exit 1; }
step() { echo "deb_test: $*"; }

for t in app/pipestudio-cli app/pipestudio-engine; do
  [ -x "$build/$t" ] || fail "$build/$t is not built (build everything before the package test)"
done
for tool in lintian desktop-file-validate appstreamcli update-mime-database strings; do
  command -v "$tool" >/dev/null || fail "$tool is missing (bash packaging/install-deps.sh installs it)"
done

if ! cpack --config "$build/CPackConfig.cmake" -G DEB -B "$tmp/out" >"$tmp/cpack.log" 2>&1; then
  cat "$tmp/cpack.log" >&2
  fail "cpack -G DEB failed"
fi
main=$(ls "$tmp"/out/pipestudio_*.deb 2>/dev/null | head -1)
engine=$(ls "$tmp"/out/pipestudio-engine_*.deb 2>/dev/null | head -1)
[ -n "$main" ] || fail "cpack wrote no pipestudio_*.deb: $(ls "$tmp/out")"
[ -n "$engine" ] || fail "cpack wrote no pipestudio-engine_*.deb: $(ls "$tmp/out")"
step "built $(basename "$main") ($(du -h "$main" | cut -f1)), $(basename "$engine") ($(du -h "$engine" | cut -f1))"

# --- control fields
field() { dpkg-deb -f "$1" "$2"; }
project_version=$(sed -n 's/^project(PipeStudio VERSION \([0-9.]*\).*/\1/p' "$source_dir/CMakeLists.txt")
changelog_version=$(sed -n '1s/^pipestudio (\([^)]*\)).*/\1/p' "$source_dir/packaging/debian/changelog")
version=$(field "$main" Version)
[ "$version" = "$changelog_version" ] ||
  fail "package version $version is not the changelog's top entry $changelog_version"
[[ $version == "$project_version"-[0-9]* ]] || fail "version $version is not $project_version-REVISION"
for deb in "$main" "$engine"; do
  name=$(field "$deb" Package)
  [ "$(field "$deb" Version)" = "$version" ] || fail "$name: version $(field "$deb" Version), not $version"
  [ "$(field "$deb" Section)" = science ] || fail "$name: section $(field "$deb" Section)"
  [[ $(field "$deb" Maintainer) =~ ^[^\<]+\ \<[^@\>]+@[^\>]+\>$ ]] ||
    fail "$name: maintainer without an e-mail address: $(field "$deb" Maintainer)"
  [ -n "$(field "$deb" Homepage)" ] || fail "$name: no Homepage"
  [ "$(field "$deb" Description | sed 1d | grep -c .)" -ge 3 ] || fail "$name: no extended description"
done
main_depends=$(field "$main" Depends)
engine_depends=$(field "$engine" Depends)
step "pipestudio Depends: $main_depends"
step "pipestudio-engine Depends: $engine_depends"
for d in libsqlite3 libqt6widgets6; do
  grep -q "$d" <<<"$main_depends" || fail "pipestudio's Depends lacks $d"
done
if grep -q torch <<<"$main_depends"; then fail "pipestudio depends on libtorch (only the engine needs it)"; fi
[ "$(field "$main" Recommends)" = "pipestudio-engine (= $version)" ] ||
  fail "pipestudio recommends '$(field "$main" Recommends)', not pipestudio-engine (= $version)"
for d in "pipestudio (= $version)" libopenblas0-pthread libtorch; do
  grep -qF "$d" <<<"$engine_depends" || fail "pipestudio-engine's Depends lacks $d"
done

# --- lintian: errors and warnings fail (overrides ship in the packages, with their reasons)
set +e
lintian --fail-on error,warning --display-info --tag-display-limit 0 "$main" "$engine" >"$tmp/lintian.txt" 2>&1
rc=$?
# The overridden tags, shown for the record, in a run of their own: lintian 2.116 counts an
# overridden warning it shows (--show-overrides) towards --fail-on warning (exit 2).
lintian --show-overrides --tag-display-limit 0 "$main" "$engine" 2>/dev/null | grep '^O:' >>"$tmp/lintian.txt"
set -e
sed 's/^/deb_test: lintian: /' "$tmp/lintian.txt"
[ $rc -eq 0 ] || fail "lintian reports errors or warnings (exit $rc)"
step "lintian: no errors, no warnings ($(grep -c '^[IP]:' "$tmp/lintian.txt" || true) info and pedantic notes)"

# --- layout
root="$tmp/root"
dpkg -x "$main" "$root"
dpkg -x "$engine" "$root"
for f in usr/bin/pipestudio usr/bin/pipestudio-cli usr/libexec/pipestudio/pipestudio-engine \
         usr/share/pipestudio/examples/example.pipe usr/share/pipestudio/examples/example.session \
         usr/share/pipestudio/schedules/1f1b.pipe usr/share/pipestudio/profiles/llama2-7b.json \
         usr/share/doc/pipestudio/copyright usr/share/doc/pipestudio/changelog.Debian.gz \
         usr/share/doc/pipestudio/gui.md usr/share/doc/pipestudio/cli.md usr/share/doc/pipestudio/images/designer.png \
         usr/share/doc/pipestudio-engine/copyright usr/share/doc/pipestudio-engine/changelog.Debian.gz \
         usr/share/man/man1/pipestudio.1.gz usr/share/man/man1/pipestudio-cli.1.gz \
         usr/share/mime/packages/pipestudio.xml usr/share/applications/pipestudio.desktop \
         usr/share/metainfo/io.pipestudio.PipeStudio.metainfo.xml \
         usr/share/icons/hicolor/scalable/apps/pipestudio.svg usr/share/icons/hicolor/48x48/apps/pipestudio.png \
         usr/share/icons/hicolor/128x128/apps/pipestudio.png; do
  [ -e "$root/$f" ] || fail "the packages lack /$f"
done
if dpkg-deb -c "$main" | grep -q 'usr/libexec/pipestudio/pipestudio-engine'; then
  fail "pipestudio carries the engine"
fi
[ "$(dpkg-deb -c "$engine" | grep -c -- '-rwx')" -eq 1 ] || fail "pipestudio-engine carries more than the engine"
gzip -dc "$root/usr/share/doc/pipestudio/changelog.Debian.gz" | head -1 | grep -qF "pipestudio ($version)" ||
  fail "changelog.Debian.gz does not start with pipestudio ($version)"

desktop-file-validate "$root/usr/share/applications/pipestudio.desktop" || fail "desktop-file-validate"
appstreamcli validate --no-net "$root/usr/share/metainfo/io.pipestudio.PipeStudio.metainfo.xml" >"$tmp/as.txt" 2>&1 ||
  { cat "$tmp/as.txt" >&2; fail "appstreamcli validate"; }
for tag in '<release ' '<content_rating' '<url type="homepage">' '<developer_name>' '<screenshot '; do
  grep -q "$tag" "$root/usr/share/metainfo/io.pipestudio.PipeStudio.metainfo.xml" || fail "the metainfo lacks $tag"
done
# The desktop entry's MIME type is defined (by this package) and maps *.pipe to it.
mkdir -p "$tmp/mime/packages"
cp /usr/share/mime/packages/freedesktop.org.xml "$root/usr/share/mime/packages/pipestudio.xml" "$tmp/mime/packages/"
update-mime-database "$tmp/mime" >/dev/null 2>&1 || fail "update-mime-database rejects pipestudio.xml"
mime_type=$(sed -n 's/^MimeType=\([^;]*\);.*/\1/p' "$root/usr/share/applications/pipestudio.desktop")
grep -qx "50:$mime_type:\*.pipe" "$tmp/mime/globs2" || fail "no glob *.pipe for $mime_type"
# Man pages: generated from --help, with every CLI command.
for cmd in generate validate simulate convert search session run; do
  gzip -dc "$root/usr/share/man/man1/pipestudio-cli.1.gz" | grep -q "^\.SS $cmd\$" ||
    fail "pipestudio-cli(1) has no section for $cmd"
done
gzip -dc "$root/usr/share/man/man1/pipestudio.1.gz" | grep -q -- 'screenshot' || fail "pipestudio(1) lacks --screenshot"

# --- nothing of the build machine: no source or build tree path in any installed file
for f in $(cd "$root" && find . -type f); do
  case $f in
    *.gz) gzip -dc "$root/$f" ;;
    *) strings -a "$root/$f" ;;
  esac | grep -F -e "$source_dir" -e "$build" >"$tmp/paths.txt" &&
    fail "/${f#./} names the build machine's tree: $(head -2 "$tmp/paths.txt")"
done
step "no source or build tree path in the $(cd "$root" && find . -type f | wc -l) installed files"

# --- the unpacked programs
cli="$root/usr/bin/pipestudio-cli"
unset PIPESTUDIO_ENGINE PIPESTUDIO_RESOURCES
if ldd "$cli" | grep -q torch; then fail "the packaged pipestudio-cli links libtorch"; fi
version_text=$("$cli" --version) || fail "pipestudio-cli --version failed: $version_text"
echo "$version_text"
grep -q "^pipestudio-cli .*(run-event protocol [0-9]*)$" <<<"$version_text" || fail "no CLI line in --version"
grep -q "^pipestudio-engine .* at $root/usr/libexec/pipestudio/pipestudio-engine\$" <<<"$version_text" ||
  fail "--version does not name the unpacked engine"

"$cli" generate 1f1b --devices 2 --microbatches 2 -o "$tmp/1f1b.pipe"
set +e
timeout 120 "$cli" run "$tmp/1f1b.pipe" --model mlp:layers=2,hidden=16 --threads 1 --events jsonl \
  >"$tmp/events.jsonl" 2>"$tmp/run.err"
rc=$?
set -e
[ $rc -eq 0 ] || { cat "$tmp/run.err" >&2; fail "run through the unpacked CLI exited $rc"; }
[ "$(grep -c '"type":"op"' "$tmp/events.jsonl")" -eq 8 ] || fail "expected 8 op events (2 devices x 2 micro-batches x F,B)"
grep -q '"status":"finished"' "$tmp/events.jsonl" || fail "the run did not finish: $(tail -2 "$tmp/events.jsonl")"
step "run: ok ($(grep -c . "$tmp/events.jsonl") events)"

# A profile the .pipe header names by file name: found in the installed data.
mkdir -p "$tmp/work"
"$cli" generate 1f1b --devices 4 --microbatches 8 -o "$tmp/work/plain.pipe"
{ echo 'profile "gpt3-1.3b.json"'; cat "$tmp/work/plain.pipe"; } >"$tmp/work/named.pipe"
set +e
(cd / && "$cli" simulate "$tmp/work/named.pipe" --json) >"$tmp/sim.json" 2>"$tmp/sim.err"
rc=$?
set -e
[ $rc -le 1 ] || fail "simulate with the header's profile exited $rc: $(head -3 "$tmp/sim.err")"
grep -q '"makespan"' "$tmp/sim.json" || fail "simulate printed no makespan: $(head -3 "$tmp/sim.err")"
step "simulate with the profile a .pipe header names: ok"

# Without the engine package: the CLI says which package brings it.
bare="$tmp/bare"
dpkg -x "$main" "$bare"
"$bare/usr/bin/pipestudio-cli" --version >"$tmp/bare-version.txt" || fail "--version without the engine failed"
grep -q "^pipestudio-engine: not installed (run and profile need the pipestudio-engine package)$" "$tmp/bare-version.txt" ||
  fail "--version without the engine says: $(cat "$tmp/bare-version.txt")"
set +e
"$bare/usr/bin/pipestudio-cli" run "$tmp/1f1b.pipe" --model mlp:layers=2,hidden=16 2>"$tmp/bare-run.err"
rc=$?
set -e
[ $rc -eq 4 ] || fail "run without the engine exited $rc"
grep -q "install the pipestudio-engine package" "$tmp/bare-run.err" || fail "run without the engine: $(cat "$tmp/bare-run.err")"
step "without pipestudio-engine: --version says so, run names the package"

# The GUI: --help and --version with no display; a screenshot that leaves the home untouched.
bash "$source_dir/tests/ui/gui_command_line_test.sh" "$root/usr/bin/pipestudio" \
  "$root/usr/share/pipestudio/examples/example.pipe"
step "ok"
