#!/usr/bin/env bash
# Table 3 under one model-selection rule: every member and every learner of each SED ensemble evaluated with
# the mean of its last 1, 2 and 3 layers, and sed.md's Table 3b takes, per model, the pooling with the best
# STS-B dev Spearman. Why: the paper evaluates learners with two layers (its layer study, on BERT-Large) and
# members with one; on the default model, trained for last-layer mean pooling, two layers cost points, so
# the fixed rule compares poolings as much as models. Ensembles not trained yet are skipped; resumable;
# called by benchmarks/runners/sed_experiments.sh, runnable alone (JOBS=2 works).
# Also seed 003 Table 3's -Flow groups (issue 25) for the CT and NLI-CT ensembles: each member, the full ensemble and
# each learner, with its own pooling, plus a flow fitted on the STS12-16 sentences as the pipelines' Flow stage fits it.
set -euo pipefail
# shellcheck disable=SC1091
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
# ENSEMBLES: the ensembles (pipeline folder/SED stage) to evaluate; sed_nli_gpu.sh names its own.
for ensemble in ${ENSEMBLES:-sed/ct-sed sed/nli-ct-sed sed-sts/sts-sed}; do
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
  [ "$ensemble" = sed-sts/sts-sed ] && continue  # Table 3 has -Flow groups for the unsupervised and NLI ensembles only
  for model in "${models[@]}" "$runs/$ensemble/full-ensemble"; do
    tag=${model#"$runs"/}
    step "$kept/sed-flow/${tag//\//-}" sentune eval --model "$model/model" --tasks sts \
      --flow tasks:STS12,STS13,STS14,STS15,STS16 --flow-set learning_rate=1e-3 --quiet
  done
done
