#!/usr/bin/env bash
# Baselines of the untuned default model: every pooling, whitening, SentEval transfer and the layer-wise
# figure (seed 001, Figure 1). Writes run folders under benchmarks/runs/ (not committed) and renders
# benchmarks/results/baselines.md plus the report with plots in benchmarks/results/baselines-report/.
# About 25-40 minutes on 2 CPU cores.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck disable=SC1091
. "$repo/scripts/setup.sh"
cd "$repo"
runs=benchmarks/runs
poolings=model,cls,mean,max,first-last,last2,last4,wk
sentune eval --model default --pooling "$poolings" --tasks sts --whiten per-task --whiten nli --whiten nli:256 --out "$runs/baselines-sts" --quiet
sentune eval --model default --pooling "$poolings" --tasks transfer --preset fast --out "$runs/baselines-transfer-fast" --quiet
sentune eval --model default --pooling model,cls,mean --tasks transfer --preset standard --out "$runs/baselines-transfer-standard" --quiet
sentune layerwise --model default --task STS-B --out "$runs/layerwise-default" --quiet
sentune report "$runs/baselines-sts" "$runs/baselines-transfer-fast" "$runs/baselines-transfer-standard" "$runs/layerwise-default" --out benchmarks/results/baselines-report
python benchmarks/render_results.py --title "Baselines: the untuned default model" \
  "$runs/baselines-sts" "$runs/baselines-transfer-fast" "$runs/baselines-transfer-standard" "$runs/layerwise-default" \
  --figure baselines-report/layerwise.png --out benchmarks/results/baselines.md
