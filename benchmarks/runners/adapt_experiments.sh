#!/usr/bin/env bash
# Issues 15, 27, 23: `sentune adapt` on the four ready-made pair domains (sick, mrpc, stsb, qqp; EXAMPLES="scifact quora": the retrieval ones) with the default model and the
# default budget (one pass over the corpus per candidate, raced, early stop on the selection pairs) and sentence-transformers'
# SimCSE recipe as the reference row (--reference), resumable: run it again after an interruption and finished candidates
# are read back. EXAMPLES="sick mrpc" runs a subset; BUDGET=300,10m sets --budget. Each domain's
# results.json/.md, report.html and plots are kept in benchmarks/results/adapt/NAME/, and benchmarks/results/adapt.md is
# rendered from them (benchmarks/renderers/render_adapt.py).
set -euo pipefail
# shellcheck disable=SC1091
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"

for example in ${EXAMPLES:-sick mrpc stsb qqp}; do
  out="$runs/adapt-$example"
  sentune adapt --example "$example" ${BUDGET:+--budget "$BUDGET"} --reference --quiet --out "$out"
  dst=benchmarks/results/adapt/$example
  mkdir -p "$dst"
  for f in results.json results.md report.html scores.png dev_curves.png wise_curve.png; do
    [ -f "$out/$f" ] && cp "$out/$f" "$dst/"
  done
done
python benchmarks/renderers/render_adapt.py --out benchmarks/results/adapt.md
python benchmarks/renderers/render_retrieval.py --out benchmarks/results/retrieval.md  # EXAMPLES="scifact quora": the retrieval domains
