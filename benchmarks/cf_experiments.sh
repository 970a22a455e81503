#!/usr/bin/env bash
# Seed 002 on the default model: every run behind benchmarks/results/cf.md, resumable (a finished run is
# skipped, an interrupted one resumed). CPU scale (2000 steps per contrastive stage). Run again to continue.
set -euo pipefail
# shellcheck disable=SC1091
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# Flow on the untuned model, fitted on the target sentences, 3 seeds, next to the same pooling without it.
[ -f "$runs/cf-flow-target/results.json" ] || sentune eval --model default --pooling mean,first-last --flow per-task:1 --flow per-task:2 --flow per-task:3 --tasks sts --out "$runs/cf-flow-target" --quiet
# Table 1: SimCSE, Mirror, BERT-CF (Mirror → flow-joint), and the library's MNRL side by side with our SimCSE.
run cf-simcse 002-simcse
run cf-st-mnrl 002-st-mnrl
run cf-mirror 002-mirror
run cf-bert-cf 002-bert-cf "model=$runs/cf-mirror/model"
# §6.1 ablations.
run cf-simcse-joint 002-bert-cf "model=$runs/cf-simcse/model" params.span_cap=0
run cf-minbert-joint 002-bert-cf "model=$runs/cf-mirror/model" params.freeze_encoder=false training.learning_rate=1.0e-5
run cf-mirror-flow 002-bert-cf "model=$runs/cf-mirror/model" params.lambda_mirror=0
# Multitask fine-tuning of each encoder (supervised dev/test metrics in results.json meta.method_metrics).
for base in default "$runs/cf-simcse/model" "$runs/cf-mirror/model" "$runs/cf-bert-cf/model"; do
  tag=$(basename "$(dirname "$base")"); [ "$base" = default ] && tag=untuned
  run "cf-multitask-$tag" 002-multitask "model=$base"
done
# Table 7: alignment and uniformity on QQP positive pairs.
for base in default "$runs/cf-simcse/model" "$runs/cf-mirror/model" "$runs/cf-bert-cf/model"; do
  tag=$(basename "$(dirname "$base")"); [ "$base" = default ] && tag=untuned
  [ -f "$runs/cf-align-$tag/results.json" ] || sentune eval --model "$base" --tasks STS-B --alignment-pairs qqp --out "$runs/cf-align-$tag" --quiet
done
