#!/usr/bin/env bash
# The main job: set up what is missing, train SG-OPT (seed 001, recipe 001-sg-opt) on the default model
# (all-MiniLM-L6-v2) with every STS-B sentence, select the checkpoint on STS-B dev, evaluate it on the 7
# STS tasks, evaluate the untuned model the same way, and print both side by side. The run folder is runs/main-sg-opt/
# (model/, results.md); re-running after an interruption resumes it. Extra arguments are recipe
# overrides, e.g. training.seed=2.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck disable=SC1091
. "$repo/scripts/setup.sh"
if [ -z "${SENTUNE_DATA:-}" ]; then
  echo "main: no data directory. Set SENTUNE_DATA, or fetch the canonical sets: sentune data download DIR" >&2
  exit 2
fi
cd "$repo"
out=runs/main-sg-opt
baselines=runs/main-untuned
started=$SECONDS
if [ -f "$out/results.json" ]; then
  echo "main: $out is complete (remove it to train again)"
else
  resume=()
  if [ -d "$out/checkpoints" ]; then resume=(--resume); fi
  sentune train 001-sg-opt "$@" --out "$out" "${resume[@]}"
fi
# The untuned model under the pooling SG-OPT trains ([CLS]) and under its own (mean + normalise), for comparison.
if [ ! -f "$baselines/results.json" ]; then
  echo
  echo "main: evaluating the untuned model for comparison"
  sentune eval --model default --pooling cls,model --tasks sts --out "$baselines" --quiet > /dev/null
fi
echo
echo "STS Spearman x100 ('all'), the untuned default model against SG-OPT trained from it:"
sentune compare "untuned [CLS]=$baselines#cls" "untuned, its own pooling (mean)=$baselines#model" "SG-OPT seed 1 ([CLS])=$out"
echo
echo "main: done in $(( (SECONDS - started) / 60 )) min $(( (SECONDS - started) % 60 )) s; model: $out/model (SentenceTransformer('$out/model'))"
