#!/usr/bin/env bash
# Set up what is missing, then run the whole test suite, slow tests included (extra arguments go to pytest). Tests marked
# real_model use the real default model and the data directory, and are skipped when either is absent.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck disable=SC1091
. "$repo/scripts/setup.sh"
cd "$repo"
export HF_HUB_OFFLINE=1
python -m pytest -q --slow "$@"  # --slow: the tests marked slow too (plain `pytest -q` leaves them out)
