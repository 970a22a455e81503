#!/usr/bin/env bash
# The main job: set up what is missing, train SG-OPT (seed 001, recipe 001-sg-opt) on the default model
# (all-MiniLM-L6-v2) with every STS-B sentence, select the checkpoint on STS-B dev, evaluate it on the 7
# STS tasks and print the table. About 10 minutes on 2 CPU cores. The run folder is runs/main-sg-opt/
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
resume=()
if [ -d "$out/checkpoints" ] && [ ! -f "$out/results.json" ]; then resume=(--resume); fi
if [ -f "$out/results.json" ]; then
  echo "main: $out is complete; its results:"
  cat "$out/results.md"
  exit 0
fi
sentune train 001-sg-opt "$@" --out "$out" "${resume[@]}"
echo
echo "untuned baselines of the same model for comparison: sentune eval --model default --pooling cls,model --tasks sts"
