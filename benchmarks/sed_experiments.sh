#!/usr/bin/env bash
# Seeds 003/004 on the default model, CPU scale (5 ensemble members; the paper's 10 with --members 10):
# the composed pipelines, the side-by-side of our CT with the library's, and the STS lower-bound grid.
# Resumable: finished stages are skipped, interrupted ones resumed. Run again to continue.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck disable=SC1091
. "$repo/scripts/setup.sh"
cd "$repo"
runs=benchmarks/runs
for name in ct ct-flow ct-sed ct-sed-flow nli nli-ct nli-ct-sed-flow; do
  sentune pipeline "$name" --members 5 --out "$runs/sed-$name"
done
[ -f "$runs/sed-st-ct/results.json" ] || sentune train 005-st-ct --out "$runs/sed-st-ct" $([ -d "$runs/sed-st-ct/checkpoints" ] && echo --resume)
for lb in 0 0.05 0.1 0.15 0.2 0.25 0.3 0.35 0.4 0.45 0.5 0.55 0.6 0.65 0.7 0.75 0.8 0.85 0.9 0.95; do
  out="$runs/sed-sts-lb$lb"
  [ -f "$out/results.json" ] || sentune train 005-sts "params.lower_bound=$lb" --out "$out" $([ -d "$out/checkpoints" ] && echo --resume)
done
