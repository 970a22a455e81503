#!/usr/bin/env bash
# Table 3 under one model-selection rule: every member and every learner of each SED ensemble evaluated with
# the mean of its last 1, 2 and 3 layers, and sed.md's Table 3b takes, per model, the pooling with the best
# STS-B dev Spearman. Why: the paper evaluates learners with two layers (its layer study, on BERT-Large) and
# members with one; on the default model, trained for last-layer mean pooling, two layers cost points, so
# the fixed rule compares poolings as much as models. Ensembles not trained yet are skipped; resumable;
# called by benchmarks/runners/sed_experiments.sh, runnable alone (JOBS=2 works).
set -euo pipefail
# shellcheck disable=SC1091
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
for ensemble in sed/ct-sed sed/nli-ct-sed sed-sts/sts-sed; do
  members_file=$runs/$ensemble/members.json
  [ -f "$members_file" ] || { echo "skip $ensemble (no members.json yet)"; continue; }
  pipeline=$runs/${ensemble%%/*}  # members.json paths are relative to the pipeline folder
  models=()
  while IFS= read -r member; do models+=("$pipeline/$member"); done < <(python -c 'import json, sys; print("\n".join(json.load(open(sys.argv[1]))))' "$members_file")
  for learner in "$runs/$ensemble"/learner-*; do [ -f "$learner/results.json" ] && models+=("$learner"); done
  for model in "${models[@]}"; do
    tag=${model#"$runs"/}
    step "$kept/sed-pool/${tag//\//-}" sentune eval --model "$model/model" --pooling mean,last2,last3 --tasks sts,dev --quiet
  done
done
