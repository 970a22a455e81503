#!/usr/bin/env bash
# Build the API reference from the docstrings (pdoc; docs/development.md says why) into build/api (or the folder given),
# failing on any warning pdoc gives: scripts/api_reference.py, run in the project's environment.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck disable=SC1091
. "$repo/scripts/setup.sh"
cd "$repo"
export HF_HUB_OFFLINE=1
python scripts/api_reference.py "${1:-build/api}"
