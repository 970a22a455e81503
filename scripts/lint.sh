#!/usr/bin/env bash
# Set up what is missing, then the static checks CI runs: ruff (lint and format) and mypy on sentune/.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck disable=SC1091
. "$repo/scripts/setup.sh"
cd "$repo"
ruff check sentune tests benchmarks docs
ruff format --check sentune tests benchmarks docs
mypy
