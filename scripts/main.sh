#!/usr/bin/env bash
# The main job: set up what is missing, then `sentune adapt` on a ready-made domain (MRPC news paraphrases: the unlabelled
# MRPC train sentences as the corpus, 500 labelled pairs of it as dev, MRPC test as test) with the default model
# (all-MiniLM-L6-v2) and a budget that fits about a quarter of an hour on 2 CPU cores: the untuned poolings, whitening,
# three training methods raced against each other, the model fine-tuned on the selection half of the labelled dev pairs
# (cross-fitted; `supervised-stacked`, the same from the best trained one, is left out to keep the quarter of an hour), and
# the best one's weights interpolated with the model's. It ends with
# the candidates table and the choice with its reason; the run folder is runs/main-adapt/ (model/, results.md,
# report.html), and running it again after an interruption resumes it. Extra arguments go to `sentune adapt`.
#
# Seed 001's SG-OPT reproduction, the job this script ran before, is one command: sentune train 001-sg-opt --out runs/sg-opt
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck disable=SC1091
SENTUNE_EXTRAS="${SENTUNE_EXTRAS:-default-model}" . "$repo/scripts/setup.sh"  # the adapt run needs no test, lint or server tools
if [ -z "${SENTUNE_DATA:-}" ]; then
  echo "main: no data directory. Set SENTUNE_DATA, or fetch the canonical sets: sentune data download DIR" >&2
  exit 2
fi
cd "$repo"
started=$SECONDS
sentune adapt --example mrpc --methods poolings,whitening,simcse,mirror,sg-opt,supervised,wise --budget "${MAIN_BUDGET:-120}" --out runs/main-adapt "$@"
echo
echo "main: done in $(( (SECONDS - started) / 60 )) min $(( (SECONDS - started) % 60 )) s; the chosen model: runs/main-adapt/model (SentenceTransformer('runs/main-adapt/model'))"
