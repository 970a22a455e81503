# Shared by the experiment runners: set up, then `run NAME RECIPE [overrides]` trains a recipe into
# benchmarks/runs/NAME (not committed: models, checkpoints), skipping a finished run and resuming an
# interrupted one, and keeps its results (results.json/.md, metrics.jsonl, config.yaml) in
# benchmarks/results/runs/NAME, which is committed and read by the renderers.
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck disable=SC1091
. "$repo/scripts/setup.sh"
cd "$repo"
runs=benchmarks/runs
kept=benchmarks/results/runs
export SENTUNE_CACHE=${SENTUNE_CACHE:-$repo/$runs/.cache}  # content-keyed: seeds and ablations reuse e.g. SG's views

keep() {  # keep NAME: copy a finished run's small result files where they are committed
  local src="$runs/$1" dst="$kept/$1"
  mkdir -p "$dst"
  for f in results.json results.md metrics.jsonl config.yaml layerwise.json; do
    [ -f "$src/$f" ] && cp "$src/$f" "$dst/"
  done
  return 0
}

run() {
  local name=$1; shift
  local out="$runs/$name"
  if [ -f "$kept/$name/results.json" ]; then echo "skip $name (done)"; return; fi
  if [ -f "$out/results.json" ]; then keep "$name"; return; fi
  if [ -d "$out/checkpoints" ]; then sentune train "$@" --out "$out" --resume; else sentune train "$@" --out "$out"; fi
  keep "$name"
}

keep_tree() {  # keep_tree SRC NAME: keep every finished stage under SRC (pipelines) as NAME/<stage path>
  local src=$1 name=$2 f rel
  while IFS= read -r f; do
    rel=$(dirname "${f#"$src"/}")
    mkdir -p "$kept/$name/$rel"
    for g in results.json results.md metrics.jsonl config.yaml stage.json; do
      [ -f "$(dirname "$f")/$g" ] && cp "$(dirname "$f")/$g" "$kept/$name/$rel/"
    done
  done < <(find "$src" -name results.json -not -path "*/checkpoints/*" -not -path "*/model/*")
  cp "$src"/pipeline-*.json "$kept/$name/" 2>/dev/null || true
  find "$src" -name members.json -not -path "*/model/*" | while IFS= read -r f; do
    rel=$(dirname "${f#"$src"/}"); mkdir -p "$kept/$name/$rel"; cp "$f" "$kept/$name/$rel/"
  done
}
