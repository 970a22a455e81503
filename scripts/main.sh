#!/usr/bin/env bash
# The main job: set up what is missing, then evaluate the default model (all-MiniLM-L6-v2) on the 7 STS
# tasks under its own pooling and the [CLS]/mean/max baselines, print the table and write runs/main/.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck disable=SC1091
. "$repo/scripts/setup.sh"
if [ -z "${SENTUNE_DATA:-}" ]; then
  echo "main: no data directory. Set SENTUNE_DATA, or fetch the canonical sets: sentune data download DIR" >&2
  exit 2
fi
cd "$repo"
sentune eval --model default --pooling model,cls,mean,max --tasks sts --out runs/main "$@"
