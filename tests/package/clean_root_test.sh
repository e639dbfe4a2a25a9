#!/usr/bin/env bash
# make package-test-root: installs the Debian packages of a build directory into a fresh Debian 12
# root (debootstrap --variant=minbase, nothing else) with apt resolving every dependency, and
# uses PipeStudio there as a user would, from the installed paths only:
#   pipestudio-cli --version (the engine found in /usr/libexec/pipestudio), a gradient-checked
#   run, a simulate with the profile a .pipe header names, `session list` leaving nothing beside
#   the user's session, the GUI's --help with no display and a screenshot of the bundled example;
# then purges both packages and checks that nothing of them is left. Prints the time of each
# phase. Needs root (debootstrap, chroot, mounts) and the network to reach a Debian mirror.
#   clean_root_test.sh BUILD_DIR [OUT_DIR]   (OUT_DIR: where the screenshot and logs are kept)
#   PIPESTUDIO_DEBIAN_MIRROR   the mirror (default http://deb.debian.org/debian)
set -euo pipefail
build=$(cd "${1:?usage: clean_root_test.sh BUILD_DIR [OUT_DIR]}" && pwd)
out=${2:-$build/clean-root}
mirror=${PIPESTUDIO_DEBIAN_MIRROR:-http://deb.debian.org/debian}
[ "$(id -u)" -eq 0 ] || { echo "clean_root_test: needs root (debootstrap, chroot)" >&2; exit 1; }
command -v debootstrap >/dev/null || { echo "clean_root_test: debootstrap is missing (apt-get install debootstrap)" >&2; exit 1; }
mkdir -p "$out"
out=$(cd "$out" && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/ps-clean-root.XXXXXX")
root=$work/root
mounted=()
cleanup() {
  for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do umount -l "${mounted[$i]}" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "clean_root_test: FAIL: $*" >&2; exit 1; }
t0=$(date +%s)
phase_start=$t0
phase() {
  local now
  now=$(date +%s)
  echo "clean_root_test: [$((now - phase_start)) s] $1"
  echo "$1: $((now - phase_start)) s" >>"$out/times.txt"
  phase_start=$now
}
: >"$out/times.txt"
in_root() { chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 "$@"; }
as_user() {
  chroot --userspec=tester:tester "$root" /usr/bin/env -i PATH=/usr/bin:/bin HOME=/home/tester \
    LANG=C.UTF-8 OMP_NUM_THREADS=1 "$@"
}

cpack --config "$build/CPackConfig.cmake" -G DEB -B "$work/debs" >"$out/cpack.log" 2>&1 ||
  { tail -20 "$out/cpack.log" >&2; fail "cpack -G DEB failed"; }
ls "$work"/debs/*.deb >/dev/null 2>&1 || fail "cpack wrote no package"
phase "cpack -G DEB: $(cd "$work/debs" && ls *.deb | tr '\n' ' ')"

debootstrap --variant=minbase bookworm "$root" "$mirror" >"$out/debootstrap.log" 2>&1 ||
  { tail -20 "$out/debootstrap.log" >&2; fail "debootstrap failed"; }
phase "debootstrap --variant=minbase bookworm ($(chroot "$root" dpkg-query -f '.\n' -W | wc -l) packages)"

# What a Debian 12 system has: the release, its updates and security updates; a user to run as.
cat >"$root/etc/apt/sources.list" <<SOURCES
deb $mirror bookworm main
deb $mirror bookworm-updates main
deb ${PIPESTUDIO_DEBIAN_SECURITY_MIRROR:-http://deb.debian.org/debian-security} bookworm-security main
SOURCES
cp /etc/resolv.conf "$root/etc/resolv.conf"
for m in proc sys dev; do
  case $m in
    proc) mount -t proc proc "$root/proc" ;;
    sys) mount -t sysfs sys "$root/sys" ;;
    dev) mount --rbind /dev "$root/dev" ;;
  esac
  mounted+=("$root/$m")
done
in_root useradd --create-home --shell /bin/bash tester
before=$(chroot "$root" dpkg-query -f '${Package}\n' -W | sort)
mkdir -p "$root/tmp/debs"
cp "$work"/debs/*.deb "$root/tmp/debs/"
debs=$(cd "$root/tmp/debs" && ls pipestudio_*.deb pipestudio-engine_*.deb | sed 's|^|/tmp/debs/|')
in_root apt-get update -qq >"$out/apt.log" 2>&1 || { tail "$out/apt.log" >&2; fail "apt-get update"; }
# Both packages: pipestudio would bring the engine anyway (it is recommended).
# shellcheck disable=SC2086 # two file names without spaces
in_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q $debs >>"$out/apt.log" 2>&1 ||
  { tail -30 "$out/apt.log" >&2; fail "apt-get install"; }
after=$(chroot "$root" dpkg-query -f '${Package}\n' -W | sort)
added=$(comm -13 <(echo "$before") <(echo "$after") | wc -l)
phase "apt-get install ./pipestudio_*.deb ./pipestudio-engine_*.deb: $added packages installed"

# --- as a user, from the installed paths
as_user pipestudio-cli --version >"$out/version.txt" || fail "pipestudio-cli --version: $(cat "$out/version.txt")"
cat "$out/version.txt"
grep -q "^pipestudio-engine .* at /usr/libexec/pipestudio/pipestudio-engine$" "$out/version.txt" ||
  fail "the CLI does not find the installed engine"

as_user pipestudio-cli generate zb-h1 --devices 2 --microbatches 4 -o /home/tester/zb.pipe
as_user pipestudio-cli run /home/tester/zb.pipe --model mlp:layers=4,hidden=32 --check-gradients \
  --session /home/tester/work.session >"$out/run.txt" 2>&1 ||
  { cat "$out/run.txt" >&2; fail "the gradient-checked run failed"; }
grep -q "gradient check: passed" "$out/run.txt" || { cat "$out/run.txt" >&2; fail "no passed gradient check"; }
phase "pipestudio-cli run --check-gradients: $(grep -o 'gradient check: [^,]*' "$out/run.txt")"

as_user pipestudio-cli generate 1f1b --devices 4 --microbatches 8 -o /home/tester/plain.pipe
{ echo 'profile "llama2-7b.json"'; cat "$root/home/tester/plain.pipe"; } >"$root/home/tester/named.pipe"
chroot "$root" chown tester:tester /home/tester/named.pipe
set +e
as_user sh -c 'cd /home/tester && pipestudio-cli simulate named.pipe' >"$out/simulate.txt" 2>&1
rc=$?
set -e
[ $rc -le 1 ] || { cat "$out/simulate.txt" >&2; fail "simulate with the header's profile exited $rc"; }
grep -q "; profile llama2-7b$" "$out/simulate.txt" || { cat "$out/simulate.txt" >&2; fail "simulate did not use llama2-7b"; }
as_user pipestudio-cli session list /home/tester/work.session >"$out/session.txt" ||
  fail "session list: $(cat "$out/session.txt")"
for f in work.session-wal work.session-shm; do
  [ ! -e "$root/home/tester/$f" ] || fail "session list left /home/tester/$f"
done
phase "simulate (profile from the .pipe header), session list"

as_user pipestudio --help >"$out/gui-help.txt" 2>&1 || fail "pipestudio --help without a display: $(tail -3 "$out/gui-help.txt")"
as_user pipestudio --screenshot /tmp/shot.png /usr/share/pipestudio/examples/example.pipe >"$out/gui.txt" 2>&1 ||
  fail "pipestudio --screenshot: $(tail -5 "$out/gui.txt")"
cp "$root/tmp/shot.png" "$out/screenshot.png"
left=$(cd "$root/home/tester" && find . -mindepth 1 ! -name 'zb.pipe' ! -name 'plain.pipe' ! -name 'named.pipe' \
  ! -name 'work.session' ! -name '.bashrc' ! -name '.profile' ! -name '.bash_logout')
[ -z "$left" ] || fail "the GUI left files in the home folder: $left"
phase "pipestudio --help, --screenshot ($(du -h "$out/screenshot.png" | cut -f1))"

# --- purge: nothing of either package is left (directories other packages share may stay)
in_root dpkg -L pipestudio pipestudio-engine | sort -u | while read -r f; do
  if [ -f "$root$f" ] || [ -L "$root$f" ]; then echo "$f"; fi
done >"$work/files.txt"
in_root env DEBIAN_FRONTEND=noninteractive apt-get purge -y -q pipestudio pipestudio-engine >>"$out/apt.log" 2>&1 ||
  fail "apt-get purge"
while read -r f; do
  [ ! -e "$root$f" ] || fail "purge left $f"
done <"$work/files.txt"
for d in /usr/share/pipestudio /usr/libexec/pipestudio /usr/share/doc/pipestudio /usr/share/doc/pipestudio-engine; do
  [ ! -e "$root$d" ] || fail "purge left $d"
done
phase "apt-get purge pipestudio pipestudio-engine: none of its $(wc -l <"$work/files.txt") files left"
echo "clean_root_test: ok in $(($(date +%s) - t0)) s (times in $out/times.txt, screenshot $out/screenshot.png)"
