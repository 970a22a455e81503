# Shared by the experiment runners: set up, then `run NAME RECIPE [overrides]` trains a recipe into
# benchmarks/runs/NAME (not committed: models, checkpoints), skipping a finished run and resuming an
# interrupted one, and keeps what the renderers read of it (results.json; layerwise.json, pairs.md of those commands) in
# benchmarks/results/runs/NAME, which is committed (check_renders.sh fails on a kept file no renderer reads).
#
# JOBS=2 runs the calling script as two workers of one thread each (on 2 cores more steps per second in
# total than one two-thread run: benchmarks/results/parallel_speed.md). Workers share the work through
# locks (util-linux flock): a run another worker holds is skipped, `need NAME` waits for one, and
# pipelines lock their own stages. Each worker logs to benchmarks/runs/worker-N.log.
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# SENTUNE_NO_SETUP=1: the environment is ready as it is (a lent GPU machine's Python with carried wheels:
# benchmarks/runners/sed_nli_gpu.sh), so no .venv is built.
# shellcheck disable=SC1091
[ -n "${SENTUNE_NO_SETUP:-}" ] || . "$repo/scripts/setup.sh"
cd "$repo"
runs=benchmarks/runs
kept=benchmarks/results/runs
export SENTUNE_CACHE=${SENTUNE_CACHE:-$repo/$runs/.cache}  # content-keyed: seeds and ablations reuse e.g. SG's views
mkdir -p "$runs/.locks"

if [ "${JOBS:-1}" -gt 1 ] && [ -z "${SENTUNE_WORKER:-}" ]; then
  command -v flock >/dev/null || { echo "JOBS=${JOBS} needs flock (util-linux); run with JOBS=1" >&2; exit 2; }
  pids=()
  for i in $(seq 1 "$JOBS"); do
    SENTUNE_WORKER=$i OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} bash "$0" "$@" > "$runs/worker-$i.log" 2>&1 &
    pids+=($!)
    echo "worker $i: pid ${pids[-1]}, log $runs/worker-$i.log"
    sleep 5  # let the first worker take the first run
  done
  status=0
  for pid in "${pids[@]}"; do wait "$pid" || status=1; done
  exit $status
fi

keep() {  # keep NAME: copy a finished run's small result files where they are committed
  local src="$runs/$1" dst="$kept/$1"
  mkdir -p "$dst"
  for f in results.json layerwise.json pairs.md; do
    [ -f "$src/$f" ] && cp "$src/$f" "$dst/"
  done
  return 0
}

exclusive() {  # exclusive NAME command...: run the command holding NAME's lock; skip if another worker holds it
  local name=$1; shift
  local rc=0
  ( flock -n 9 || exit 75; "$@" ) 9>"$runs/.locks/$name" || rc=$?
  if [ "$rc" = 75 ]; then echo "skip $name (another worker has it)"; return 0; fi
  return "$rc"
}

need() {  # need NAME...: wait until no worker holds NAME, then fail unless its results exist
  local name
  for name in "$@"; do
    flock "$runs/.locks/$name" true
    if [ ! -f "$runs/$name/results.json" ] && [ ! -f "$kept/$name/results.json" ]; then
      echo "$name has not finished (needed next); run it first" >&2
      return 1
    fi
  done
}

_train() {  # train NAME's run unless its results are here; keep them unless kept results exist (see model)
  local name=$1; shift
  local out="$runs/$name"
  if [ ! -f "$out/results.json" ]; then
    # Explicit status checks: inside `exclusive`'s subshell errexit is off (it is tested with ||).
    local resume=()
    [ -d "$out/checkpoints" ] && resume=(--resume)
    sentune train "$@" --out "$out" "${resume[@]}" || return $?
  fi
  [ -f "$kept/$name/results.json" ] || keep "$name"
}

run() {  # run NAME RECIPE [overrides]: train into benchmarks/runs/NAME unless done, keep the results
  if [ -f "$kept/$1/results.json" ]; then echo "skip $1 (done)"; return; fi
  exclusive "$1" _train "$@"
}

model() {  # model NAME RECIPE [overrides]: like run, for a run whose model a later step reads: when its results are
  # kept but its model is not here (a fresh checkout keeps results, never models), it is trained again into
  # benchmarks/runs/NAME; the kept results are left as they were (compare them with that run's results.json).
  if [ -f "$kept/$1/results.json" ] && [ -d "$runs/$1/model" ]; then echo "skip $1 (done, model here)"; return; fi
  exclusive "$1" _train "$@"
}

set_aside() {  # set_aside NAME SUFFIX: move a kept run measured the old way to NAME+SUFFIX (once), so its page shows it
  # beside the new run, and NAME runs again
  local name=$1 suffix=$2
  if [ -d "$kept/$name" ] && [ ! -e "$kept/$name$suffix" ]; then
    mv "$kept/$name" "$kept/$name$suffix"
    [ -d "$runs/$name" ] && mv "$runs/$name" "$runs/$name$suffix"
    echo "kept $name set aside as $name$suffix"
  fi
  return 0
}

done_step() {  # done_step OUT_DIR: an evaluation step's result is there
  [ -f "$1/results.json" ] || [ -f "$1/layerwise.json" ] || [ -f "$1/pairs.json" ]
}

model_for() {  # model_for "OUT_DIR..." NAME RECIPE [overrides]: `model` while a step in OUT_DIR... (the evaluations that read
  # NAME's model) has no result, else `run`: a fresh checkout does not train a model again for steps already kept
  local outs=$1 out; shift
  for out in $outs; do
    done_step "$out" || { model "$@"; return; }
  done
  run "$@"
}

step() {  # step OUT_DIR command...: an evaluation-only step, run with --out OUT_DIR unless its result exists
  local out=$1; shift
  if done_step "$out"; then echo "skip $out (done)"; return; fi
  exclusive "step${out//\//_}" "$@" --out "$out"  # locked by its whole path: sed-pool/X and sed-flow/X are two steps
}

same_scores() {  # same_scores A B: two results.json whose 7-task averages agree to the pages' two decimals
  python3 - "$1" "$2" <<'PY'
import json, sys
a, b = ((json.load(open(p)).get("runs", {}).get("model") or {}).get("summary", {}).get("avg_all_spearman") for p in sys.argv[1:3])
sys.exit(0 if a is None or b is None or abs(a - b) < 0.005 else 1)
PY
}

keep_tree() {  # keep_tree SRC NAME [SUFFIX]: keep every finished stage under SRC (pipelines) as NAME/<stage path>. A stage
  # trained again (a fresh checkout retrains a stage whose model a later stage reads) keeps its kept results when its
  # scores agree with them (as `model` does); when they differ, the kept run is set aside once as <stage>SUFFIX (default
  # -before-25) and the repeat is kept, so that a later stage is always read beside the model it was trained or fitted on.
  local src=$1 name=$2 suffix=${3:--before-25} f rel
  while IFS= read -r f; do
    rel=$(dirname "${f#"$src"/}")
    if [ -f "$kept/$name/$rel/results.json" ]; then
      if same_scores "$kept/$name/$rel/results.json" "$f" || [ -e "$kept/$name/$rel$suffix" ]; then continue; fi
      echo "kept $name/$rel differs from its repeat: set aside as $name/$rel$suffix"
      mv "$kept/$name/$rel" "$kept/$name/$rel$suffix"
    fi
    mkdir -p "$kept/$name/$rel"
    cp "$f" "$kept/$name/$rel/"
    # a stage set aside beside its repeat: sed.md shows where their training losses part (both metrics.jsonl)
    if [ -e "$kept/$name/$rel$suffix" ] && [ -f "$(dirname "$f")/metrics.jsonl" ]; then cp "$(dirname "$f")/metrics.jsonl" "$kept/$name/$rel/"; fi
  done < <(find "$src" -name results.json -not -path "*/checkpoints/*" -not -path "*/model/*")
  find "$src" -name members.json -not -path "*/model/*" | while IFS= read -r f; do
    rel=$(dirname "${f#"$src"/}"); mkdir -p "$kept/$name/$rel"; cp "$f" "$kept/$name/$rel/"
  done
}
