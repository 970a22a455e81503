#!/usr/bin/env bash
# Baselines of the untuned default model: every pooling, whitening, SentEval transfer (fast preset for
# every pooling, standard for three), SentEval's supervised relatedness, multilingual STS and the
# layer-wise figure (seed 001, Figure 1). Evaluation folders hold only results (results.json/.md,
# layerwise.json), so they are written straight to benchmarks/results/runs/ and committed; a step whose
# results exist is skipped, so the script can be re-run after an interruption. The page is rendered to
# benchmarks/results/baselines.md, with the report and plots in benchmarks/results/baselines-report/.
# About 45-60 minutes on 2 CPU cores (the standard-preset step alone about 30).
set -euo pipefail
# shellcheck disable=SC1091
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
poolings=model,cls,mean,max,first-last,last2,last4,wk


step "$kept/baselines-sts" sentune eval --model default --pooling "$poolings" --tasks sts --whiten per-task --whiten nli --whiten nli:256 --quiet
step "$kept/baselines-transfer-fast" sentune eval --model default --pooling "$poolings" --tasks transfer --preset fast --quiet
step "$kept/baselines-relatedness-multilingual" sentune eval --model default --pooling model,cls,mean,first-last --tasks relatedness,multilingual --alignment-pairs qqp --quiet
step "$kept/layerwise-default" sentune layerwise --model default --task STS-B --quiet
if [ "${SKIP_STANDARD:-0}" != 1 ]; then
  step "$kept/baselines-transfer-standard" sentune eval --model default --pooling model,cls,mean --tasks transfer --preset standard --quiet
fi
folders=()
for name in baselines-sts baselines-transfer-fast baselines-transfer-standard baselines-relatedness-multilingual layerwise-default; do
  if [ -d "$kept/$name" ]; then folders+=("$kept/$name"); fi
done
sentune report "${folders[@]}" --out benchmarks/results/baselines-report
python benchmarks/renderers/render_results.py --title "Baselines: the untuned default model" "${folders[@]}" \
  --figure baselines-report/layerwise.png --figure baselines-report/sts_average.png --out benchmarks/results/baselines.md
