#!/usr/bin/env bash
# Writes a program's man page from its --help text with help2man, gzip -9n compressed as Debian
# installs man pages. For pipestudio-cli every command's own --help becomes a subsection of
# COMMANDS (run and profile answer through the engine when it is built; their one-line summary
# otherwise).
#   make_man.sh PROGRAM VERSION SUMMARY INCLUDE.h2m OUT.1.gz
set -euo pipefail
program=${1:?usage: make_man.sh PROGRAM VERSION SUMMARY INCLUDE.h2m OUT.1.gz}
version=$2 summary=$3 include=$4 out=$5
dir=$(cd "$(dirname "$program")" && pwd)
name=$(basename "$program")
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ps-man.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
# Preformatted help text as roff: backslashes escaped, no line read as a request.
roff() { sed -e 's/\\/\\e/g' -e 's/^\([.'"'"']\)/\\\&\1/'; }

cp "$include" "$tmp/include.h2m"
if [ "$name" = pipestudio-cli ]; then
  echo "[COMMANDS]" >>"$tmp/include.h2m"
  "$program" --help | sed -n '/^commands:/,/^$/p' | sed 1d | while read -r cmd summary_line; do
    [ -n "$cmd" ] || continue
    {
      echo ".SS $cmd"
      echo ".nf"
      if ! "$program" "$cmd" --help 2>/dev/null | roff; then
        echo "$summary_line" | roff
      fi
      echo ".fi"
    } >>"$tmp/include.h2m"
  done
fi
# Run by name from PATH, so that the usage lines name the program and not the build tree.
PATH="$dir:$PATH" QT_QPA_PLATFORM= help2man --no-info --version-string="$version" --name="$summary" \
  --include="$tmp/include.h2m" --output="$tmp/$name.1" "$name"
gzip -9n -c "$tmp/$name.1" >"$out.tmp"
mv "$out.tmp" "$out"
