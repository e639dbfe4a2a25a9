#!/usr/bin/env bash
# ctest ui_gui_command_line (label ui): the GUI executable's command line where there is no
# display (over ssh): --help and --version answer and exit 0; --screenshot renders offscreen and
# leaves nothing in the home folder (no settings file, no recent files, no caches).
set -euo pipefail
gui=${1:?usage: gui_command_line_test.sh PIPESTUDIO SCHEDULE.pipe}
schedule=${2:?usage: gui_command_line_test.sh PIPESTUDIO SCHEDULE.pipe}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ps-gui-cli.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail() { echo "gui_command_line_test: FAIL: $*" >&2; exit 1; }
mkdir -p "$tmp/home"
# A login over ssh: no display, no Qt platform chosen, none of the caller's XDG folders.
bare() {
  env -u DISPLAY -u WAYLAND_DISPLAY -u QT_QPA_PLATFORM -u XDG_CONFIG_HOME -u XDG_DATA_HOME \
    -u XDG_CACHE_HOME -u XDG_STATE_HOME -u XDG_RUNTIME_DIR HOME="$tmp/home" "$@"
}

set +e
bare "$gui" --help >"$tmp/help.txt" 2>"$tmp/help.err"
rc=$?
set -e
[ $rc -eq 0 ] || fail "pipestudio --help without a display exited $rc: $(head -3 "$tmp/help.err")"
grep -q -- "--screenshot <OUT.png>" "$tmp/help.txt" || fail "--help does not list --screenshot"

set +e
version=$(bare "$gui" --version 2>"$tmp/version.err")
rc=$?
set -e
[ $rc -eq 0 ] || fail "pipestudio --version without a display exited $rc: $(head -3 "$tmp/version.err")"
grep -Eq "^PipeStudio [0-9]+\.[0-9]+\.[0-9]+$" <<<"$version" || fail "--version printed '$version'"

bare "$gui" --screenshot "$tmp/shot.png" --size 800x500 "$schedule" >"$tmp/shot.log" 2>&1 ||
  fail "--screenshot failed: $(tail -3 "$tmp/shot.log")"
[ -s "$tmp/shot.png" ] || fail "--screenshot wrote no image"
left=$(cd "$tmp/home" && find . -mindepth 1 | head -5)
[ -z "$left" ] || fail "--screenshot left files in the home folder: $left"
echo "gui_command_line_test: ok"
