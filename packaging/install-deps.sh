#!/usr/bin/env bash
# Installs the Debian packages in apt-packages.txt that are missing; does nothing (fast) when
# all are present. Works as root or through sudo.
#   --check   only report missing packages: installs nothing, needs no root, exit 1 if any
#             are missing (CI runs it after the build: tests/CMakeLists.txt, install_deps_check).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
check=0
case "${1:-}" in
  --check) check=1 ;;
  "") ;;
  *) echo "usage: install-deps.sh [--check]" >&2; exit 2 ;;
esac
list=${PIPESTUDIO_APT_LIST:-$here/apt-packages.txt}  # another list: the script's own test
mapfile -t wanted < <(grep -vE '^\s*(#|$)' "$list")
missing=()
for p in "${wanted[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done
if [ $check -eq 1 ]; then
  if [ ${#missing[@]} -eq 0 ]; then
    echo "install-deps: all ${#wanted[@]} packages of $(basename "$list") are installed"
    exit 0
  fi
  echo "install-deps: missing packages: ${missing[*]}" >&2
  exit 1
fi
[ ${#missing[@]} -eq 0 ] && exit 0
echo "install-deps: installing ${missing[*]}"
sudo=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null; then sudo="sudo"; else
    echo "install-deps: missing packages (${missing[*]}) and not root; install them or run as root" >&2
    exit 1
  fi
fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
