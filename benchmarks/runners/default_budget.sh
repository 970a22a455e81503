#!/usr/bin/env bash
# Issue 72 item 6: `sentune adapt --example NAME` as a user first runs it (no --time, --budget or --reference: the
# default time, sentune.adaptation.time_plan.DEFAULT_TIME), each from scratch into benchmarks/runs/default-budget-NAME, then
# one markdown row per example: its wall and candidate minutes (the candidates' seconds in results.json) and their share
# of the budget, what the default time left out with the --time the run named to include it, what it stopped after a
# first look, the choice with its test score, the best tested candidate and the regret (its test score minus the choice's), and why
# the best tested is not the choice (its confirmation against the unchanged model, beside what the rule confirms at the dev size). Target: each
# within 30 candidate minutes on 2 idle cores. EXAMPLES="quora-clusters scifact" runs a subset (default: every example);
# NAME-train runs `--example NAME --example-train` (its labelled train split as --train, as a user with labels runs it).
set -euo pipefail
# shellcheck disable=SC1091
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"

examples=${EXAMPLES:-$(python -c 'from sentune.adaptation.examples import example_names; print(" ".join(example_names()))')}
rows=()
for example in $examples; do
  out="$runs/default-budget-$example"
  rm -rf "$out"  # from scratch: a resumed run's minutes would count what it read back as nothing
  start=$(date +%s)
  args=(--example "$example")
  [[ $example == *-train ]] && args=(--example "${example%-train}" --example-train)
  sentune adapt "${args[@]}" --quiet --out "$out"
  rows+=("$(python - "$out/results.json" "$example" $(($(date +%s) - start)) <<'EOF'
import json
import re
import sys

sys.path.insert(0, "benchmarks/renderers")
from render_adapt import best_tested, best_tested_confirmation  # the one rule of "best tested" (render_default_budget.py's full-run column too)

results = json.load(open(sys.argv[1]))
planned = results["meta"]["time"]
minutes = sum(c.get("seconds") or 0.0 for c in results["candidates"].values()) / 60
budget = (planned.get("limit_s") or 30 * 60) / 60
def including(name, why):  # planned left out: the plan's --time; left out at its turn: the one its reason names
    found = re.search(r"--time (\d+)m would include it", why)
    return planned["time_to_include_min"].get(name) or (found.group(1) if found else "?")
left = "; ".join(f"{name} ({why.split(';')[0]}, --time {including(name, why)}m)" for name, why in planned["left_out"].items())
back = "; ".join(f"{name} (brought back: {why.split('run with the time left: ')[-1]})" for name, why in planned.get("brought_back", {}).items())
left = "; ".join(part for part in (left, back) if part)
stopped = "; ".join(f"{name} ({why.split(';')[0]})" for name, why in planned.get("stopped", {}).items())
chosen = results["choice"]["name"]
test = (results["candidates"][chosen].get("test") or {}).get("score")
best = best_tested(results)
regret = f"{best[1] - test:.2f}" if best is not None and test is not None else "—"
best_cell = f"`{best[0]}` {best[1]:.2f}" if best is not None else "—"
print(f"| {sys.argv[2]} | {int(sys.argv[3]) / 60:.1f} | {minutes:.1f} | {minutes / budget:.0%} | {left or 'none'} | {stopped or 'none'} | `{chosen}` {'' if test is None else f'{test:.2f}'} | {best_cell} | {regret} | {best_tested_confirmation(results)} |")
EOF
)")
done
page=benchmarks/results/default_budget${EXAMPLES:+-$(echo "$EXAMPLES" | tr ' ' '-')}.md
{
  echo "# \`sentune adapt --example NAME\` without --time: the default plan's minutes"
  echo
  echo "Measured by \`${EXAMPLES:+EXAMPLES=\"$EXAMPLES\" }bash benchmarks/runners/default_budget.sh\` at commit $(git rev-parse --short HEAD), finished $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, load average after $(cut -d' ' -f1-3 /proc/loadavg); conditions: ${CONDITIONS:-not stated}. Target (issue 72): each example within 30 candidate minutes on 2 idle cores."
  echo
  echo "| example | wall minutes | candidate minutes | share of the budget | left out by the default time (expected; the --time that includes it), and those brought back with the time left | stopped after a first look | choice, test | best tested candidate | regret | the best tested's confirmation |"
  echo "|---|---:|---:|---:|---|---|---|---|---:|---|"
  printf '%s\n' "${rows[@]}"
} | tee "$page"
