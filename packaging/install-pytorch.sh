#!/usr/bin/env bash
# The project's PyTorch environment: a virtual environment with tests/pytorch/requirements.txt
# (torch 2.11.0, ~5 GB), created once and reused; `make test` and `make test-torch2` call this.
#   PIPESTUDIO_TORCH_VENV   where it lives (default ~/.cache/pipestudio/torch-2.11.0)
#   --print                 print its path, creating it if needed (quiet otherwise)
# Nothing is downloaded when the environment already holds exactly these requirements.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
req=$here/tests/pytorch/requirements.txt
venv=${PIPESTUDIO_TORCH_VENV:-${HOME:-/root}/.cache/pipestudio/torch-2.11.0}
print=0
case "${1:-}" in
  --print) print=1 ;;
  "") ;;
  *) echo "usage: install-pytorch.sh [--print]" >&2; exit 2 ;;
esac
stamp=$venv/.pipestudio-requirements
if ! cmp -s "$req" "$stamp" 2>/dev/null || [ ! -x "$venv/bin/python" ]; then
  mkdir -p "$(dirname "$venv")"
  exec 9>"$venv.lock"
  flock 9  # two builds at once: the second waits for the first one's download
  if ! cmp -s "$req" "$stamp" 2>/dev/null || [ ! -x "$venv/bin/python" ]; then
    py=/usr/bin/python3
    [ -x "$py" ] || py=$(command -v python3)
    echo "install-pytorch: creating $venv with $(grep -vE '^\s*(#|$)' "$req" | tr '\n' ' ')(downloads about 3 GB once)" >&2
    rm -rf "$venv"
    "$py" -m venv "$venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check -r "$req" >&2
    "$venv/bin/python" -c 'import torch, torch.distributed as d; assert d.is_gloo_available(); print("install-pytorch: torch", torch.__version__)' >&2
    cp "$req" "$stamp"
  fi
fi
[ $print -eq 1 ] && echo "$venv"
exit 0
