#!/usr/bin/env bash
# The main job: set up what is missing, then `sentune adapt` on a ready-made domain (MRPC news paraphrases: the unlabelled
# MRPC train sentences as the corpus, 500 labelled pairs of it as dev, MRPC test as test, and MRPC's labelled train pairs
# kept apart from both as --train) with the default model (all-MiniLM-L6-v2), in the time a user gives it (`--time`, 6
# minutes here, on top of the set-up): adapt measures what a text costs the model on this machine, plans the candidates
# with the best expected gain a second that fit (the untuned poolings, the model fine-tuned on the train pairs, the
# training methods raced against each other, WiSE-FT's interpolation; each training at most MAIN_BUDGET steps), says
# which it leaves out and why, and keeps to the plan. It ends with the candidates table and the choice with its reason;
# the run folder is runs/main-adapt/ (model/, results.md, report.html), and running it again after an interruption
# resumes it. Extra arguments go to `sentune adapt`.
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
sentune adapt --example mrpc --example-train --budget "${MAIN_BUDGET:-120}" --time "${MAIN_TIME:-6m}" --out runs/main-adapt "$@"
echo
echo "main: done in $(( (SECONDS - started) / 60 )) min $(( (SECONDS - started) % 60 )) s; the chosen model: runs/main-adapt/model (SentenceTransformer('runs/main-adapt/model'))"
