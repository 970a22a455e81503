#!/usr/bin/env bash
# Issue 72 item 3: the search candidates that need no training, `prf` (Rocchio + RM3, fused) and `multi-dense` (the
# default model, all-mpnet-base-v2 from ../shared/tools/second-model.sh, and BM25), on the SciFact example (and quora
# with EXAMPLES="scifact quora"), for benchmarks/results/retrieval.md. Each example runs twice in one folder: first
# `--methods hybrid` with the default model (unchanged, hybrid, prf, the baselines), then the same with
# `--model default,MPNET`, which reads the first run's candidates back and scores `multi-dense` (the second model
# encodes every document and query: slow on a CPU). Prints each run's wall time, peak memory and the rows of the
# candidates compared. Run it on an idle machine; it writes benchmarks/runs/search-candidates-EXAMPLE and keeps each
# run's results in benchmarks/results/adapt/search-candidates/EXAMPLE-{one-model,two-models} for retrieval.md
# (`python benchmarks/renderers/render_retrieval.py --out benchmarks/results/retrieval.md`).
set -euo pipefail
# shellcheck disable=SC1091
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"

second=${MODEL:-$(bash ../shared/tools/second-model.sh)}
for example in ${EXAMPLES:-scifact}; do
  out=$runs/search-candidates-$example
  for models in default "default,$second"; do
    tag=$([ "$models" = default ] && echo one-model || echo two-models)
    echo "== $example, --model $models ($(date -u +%FT%TZ), load $(cut -d' ' -f1 /proc/loadavg))"
    /usr/bin/time -v sentune adapt --example "$example" --model "$models" --methods hybrid --quiet --out "$out" > "$out.$tag.log" 2> "$out.$tag.time" || {
      tail -n 5 "$out.$tag.time"
      exit 1
    }
    grep -E "Elapsed \(wall|Maximum resident" "$out.$tag.time"
    cp "$out/results.json" "$out.$tag.results.json"
    # what benchmarks/renderers/render_retrieval.py reads (its section on these candidates); conditions.md is written by hand
    keep=benchmarks/results/adapt/search-candidates/$example-$tag
    mkdir -p "$keep"
    cp "$out/results.json" "$keep/results.json"
    [ ! -f "$out/results.md" ] || cp "$out/results.md" "$keep/results.md"
    python - "$out.$tag.results.json" <<'EOF'
import json, sys

results = json.load(open(sys.argv[1]))
print("choice:", results["choice"]["name"])
for name in ("unchanged", "bm25-fitted", "rrf", "hybrid", "prf", "multi-dense"):
    c = results["candidates"].get(name)
    if c is None or c.get("skipped"):
        print(f"{name}: {'skipped: ' + c['skipped'] if c else 'not run'}")
        continue
    part = lambda key: (c.get(key) or {}).get("score")  # noqa: E731
    print(f"{name}: selection {part('select')}, confirmation {part('confirm')}, test {part('test')}, minutes {c.get('seconds', 0) / 60:.1f}")
EOF
  done
done
