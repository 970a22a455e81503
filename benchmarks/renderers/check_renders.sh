#!/usr/bin/env bash
# Re-render every kept results page from its kept run results and fail if any number changed: the pages
# are rewritten in place and compared with git, ignoring only their "Rendered <date> by ..." line. Every renderer runs
# through audit_reads.py, and a tracked file under benchmarks/results/runs that none of them read fails the check too.
# Run from the repository root on a clean checkout; `git checkout benchmarks/results` restores the dates.
set -euo pipefail
cd "$(dirname "$0")/../.."
kept=benchmarks/results/runs
reads=$(mktemp)
trap 'rm -f "$reads"' EXIT
audit() { python benchmarks/renderers/audit_reads.py "$reads" "$@" >/dev/null; }
audit benchmarks/renderers/render_sg.py
audit benchmarks/renderers/render_cf.py
audit benchmarks/renderers/render_sed.py
audit benchmarks/renderers/render_adapt.py
audit benchmarks/renderers/render_retrieval.py --out benchmarks/results/retrieval.md
audit benchmarks/renderers/render_second_model.py
audit benchmarks/renderers/render_gpu_adapt.py
audit benchmarks/renderers/render_gpu_adapt.py --gpu benchmarks/results/gpu_adapt/rebuilt --out benchmarks/results/gpu_adapt/rebuilt.md
audit benchmarks/renderers/render_search_train.py
audit benchmarks/renderers/render_default_budget.py  # from the default_budget-NAME.md pages its runner wrote
audit benchmarks/runners/adapt_shuffled_null.py --render-only  # its page and the calibration page's real-null section
audit benchmarks/runners/adapt_shuffled_null.py --render-only --train-pairs 100  # the null with a train set: its own page
if [ -f "$kept/serving/load.json" ]; then  # benchmarks/runners/serving.sh, once it has been run
  audit benchmarks/renderers/render_serving.py "$kept/serving/load.json" --screenshot serving_page.png --out benchmarks/results/serving.md
fi
folders=()  # as benchmarks/runners/baselines.sh renders them: every baselines run that is kept
for name in baselines-sts baselines-transfer-fast baselines-transfer-standard baselines-relatedness-multilingual layerwise-default; do
  if [ -d "$kept/$name" ]; then folders+=("$kept/$name"); fi
done
audit benchmarks/renderers/render_results.py --title "Baselines: the untuned default model" "${folders[@]}" --figure baselines-report/layerwise.png \
  --figure baselines-report/sts_average.png --out benchmarks/results/baselines.md
audit -m sentune report "${folders[@]}" --out benchmarks/results/baselines-report
audit -m sentune report "$kept/layerwise-default" "$kept/layerwise-sg-opt-s1" --out benchmarks/results/sg-report
unread=$(comm -23 <(git ls-files "$kept" | sort) <(sort -u "$reads"))
if [ -n "$unread" ]; then
  echo "$unread" | head -20 >&2
  echo "check_renders: $(echo "$unread" | wc -l) tracked file(s) under $kept that no renderer reads: remove them, or render them" >&2
  exit 1
fi
# The exit status from a plain diff: with --stat, git (2.39) answers 0 under -I even when lines changed.
if git diff --quiet -I '^Rendered ' -- '*.md'; then
  echo "check_renders: every kept page re-renders with the same numbers"
else
  git diff --stat -I '^Rendered ' -- '*.md' >&2
  echo "check_renders: a page changed (git diff -I '^Rendered ' -- benchmarks/results)" >&2
  exit 1
fi
