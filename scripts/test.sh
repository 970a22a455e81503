#!/usr/bin/env bash
# Set up what is missing, then run the test suite (extra arguments go to pytest). Tests marked
# real_model use the real default model and the data directory, and are skipped when either is absent.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck disable=SC1091
. "$repo/scripts/setup.sh"
cd "$repo"
export HF_HUB_OFFLINE=1
python -m pytest -q "$@"
