#!/usr/bin/env bash
# Run once on the build machine, in the repository root, before going to a GPU machine.
# The GPU machines (Python 3.12 with torch 2.11.0+cu130, nvcc 13.0, cmake, ninja) have no
# Debian -dev packages and no network. This puts the project's build dependencies, and Debian's
# gloo headers (pip's torch ships none), into the ignored folder .gpu-deps/, which the device
# tool carries with the tree (carry: [".gpu-deps"]). About 3 MB of .debs.
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
grep -qx '/.gpu-deps/' .git/info/exclude 2>/dev/null || echo '/.gpu-deps/' >> .git/info/exclude
rm -rf .gpu-deps && mkdir -p .gpu-deps/debs
cd .gpu-deps/debs
apt-get update -qq
apt-get download nlohmann-json3-dev libfmt-dev libfmt9 libcli11-dev libsqlite3-dev libsqlite3-0 \
  libgtest-dev libgmock-dev libgloo-dev
du -sh .
