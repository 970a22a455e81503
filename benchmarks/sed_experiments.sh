#!/usr/bin/env bash
# Seeds 003/004 on the default model, CPU scale (5 ensemble members; the paper's 10 with --members 10):
# the composed pipelines, the side-by-side of our CT with the library's, and the STS lower-bound grid.
# Resumable: finished stages are skipped, interrupted ones resumed. Run again to continue.
set -euo pipefail
# shellcheck disable=SC1091
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
for name in ct ct-flow ct-sed ct-sed-flow nli nli-ct nli-ct-sed-flow; do
  sentune pipeline "$name" --members 5 --out "$runs/sed-$name"
done
run sed-st-ct 005-st-ct
for lb in 0 0.05 0.1 0.15 0.2 0.25 0.3 0.35 0.4 0.45 0.5 0.55 0.6 0.65 0.7 0.75 0.8 0.85 0.9 0.95; do
  run "sed-sts-lb$lb" 005-sts "params.lower_bound=$lb"
done
