#!/usr/bin/env bash
# Issues 15, 27, 23: `sentune adapt` on the four ready-made pair domains (sick, mrpc, stsb, qqp; EXAMPLES="scifact quora": the retrieval ones) with the default model and the
# default budget (one pass over the corpus per candidate, raced, early stop on the selection pairs) and sentence-transformers'
# SimCSE recipe as the reference row (--reference), resumable: run it again after an interruption and finished candidates
# are read back. EXAMPLES="sick mrpc" runs a subset; BUDGET=300,10m sets --budget. Each domain's
# results.json/.md, report.html and plots are kept in benchmarks/results/adapt/NAME/, and benchmarks/results/adapt.md is
# rendered from them (benchmarks/renderers/render_adapt.py). LOW_MEMORY=1 runs each domain again with --low-memory (gradient
# checkpointing) and without --reference (sentence-transformers' recipe trains at batch 64 × 256 tokens: measured alone by
# benchmarks/speed/training_memory.py) into adapt-NAME-low-memory: the memory an adapt run itself needs (retrieval.md).
# METHODS=... passes --methods (a subset of the candidates); NO_REFERENCE=1 leaves --reference out (retrieval runs report
# BM25 and RRF beside the candidates either way). EXAMPLE_TRAIN=1 runs each domain again in its folder with
# --example-train (the supervised candidates train on the example's labelled train split; every other candidate is read
# back) and keeps its results as NAME-train. TIME=90m passes --time: a run without it is planned for the default 30
# minutes and leaves out what does not fit, so a full run (every candidate all the way) names the time it needs.
set -euo pipefail
# shellcheck disable=SC1091
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"

for example in ${EXAMPLES:-sick mrpc stsb qqp}; do
  if [ -n "${LOW_MEMORY:-}" ]; then
    name=$example-low-memory
    out="$runs/adapt-$name"
    sentune adapt --example "$example" ${BUDGET:+--budget "$BUDGET"} --low-memory --quiet --out "$out"
  else
    name=$example${EXAMPLE_TRAIN:+-train}
    out="$runs/adapt-$example"
    reference=--reference
    [ -n "${NO_REFERENCE:-}" ] && reference=
    sentune adapt --example "$example" ${EXAMPLE_TRAIN:+--example-train} ${BUDGET:+--budget "$BUDGET"} ${METHODS:+--methods "$METHODS"} ${TIME:+--time "$TIME"} $reference --quiet --out "$out"
  fi
  dst=benchmarks/results/adapt/$name
  mkdir -p "$dst"
  for f in results.json results.md report.html scores.png dev_curves.png wise_curve.png; do
    [ -f "$out/$f" ] && cp "$out/$f" "$dst/"
  done
done
python benchmarks/renderers/render_adapt.py --out benchmarks/results/adapt.md
python benchmarks/renderers/render_retrieval.py --out benchmarks/results/retrieval.md  # EXAMPLES="scifact quora": the retrieval domains
