# Shared by the experiment runners: set up, then `run NAME RECIPE [overrides]` trains a recipe into
# benchmarks/runs/NAME, skipping a finished run and resuming an interrupted one.
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck disable=SC1091
. "$repo/scripts/setup.sh"
cd "$repo"
runs=benchmarks/runs
run() {
  local name=$1; shift
  local out="$runs/$name"
  if [ -f "$out/results.json" ]; then echo "skip $name (done)"; return; fi
  if [ -d "$out/checkpoints" ]; then sentune train "$@" --out "$out" --resume; else sentune train "$@" --out "$out"; fi
}
