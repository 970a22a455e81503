#!/usr/bin/env bash
# Regenerates benchmarks/results/gpu.md on a CUDA machine in one go: the benchmark (gpu_bench.py: rows a, b, c, e),
# then the whole test suite, whose closing line and device are appended to the page.
# Usage: bash benchmarks/speed/gpu_session.sh DATA_DIR TOKENIZER_DIR OUT_DIR   (DATA_DIR: at least senteval/STS and SICK)
set -uo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
# Paths as the benchmark sees them from benchmarks/speed/: relative, so the page's command names no machine's folders.
data=$(realpath --relative-to="$repo/benchmarks/speed" "$1") tokenizer=$(realpath --relative-to="$repo/benchmarks/speed" "$2") out=$3
export HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1 SENTUNE_CACHE="${SENTUNE_CACHE:-$(mktemp -d)}"
cd "$repo/benchmarks/speed"
timeout "${BENCH_TIMEOUT:-330}" python3 gpu_bench.py --data "$data" --tokenizer "$tokenizer" --repeats 2 --out gpu.md --json gpu.json 2>"$out/bench.err" >/dev/null
mv gpu.md gpu.json "$out/"
echo "benchmark exit $?"
cd "$repo"

workers=${SUITE_WORKERS:+-n $SUITE_WORKERS}  # pytest-xdist workers, when asked (6 did not finish the suite within 150 s there)
timeout "${SUITE_TIMEOUT:-480}" python3 -m pytest -q -p no:cacheprovider $workers --durations=15 >"$out/suite.log" 2>&1
echo "suite exit $?"
{
  echo
  echo "## The test suite on this machine"
  echo
  echo "Command: \`python3 -m pytest -q $workers\` (tests/, with CUDA present: the gpu-marked tests run; the tiny-model tests stay on the CPU), on $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1), $(date -u +%F):"
  echo
  echo '```'
  grep -E "passed|failed" "$out/suite.log" | tail -1
  echo '```'
} >>"$out/gpu.md"
tail -25 "$out/gpu.md"
