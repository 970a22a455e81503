#!/usr/bin/env bash
# Seed 001 on the default model: every training run behind benchmarks/results/sg.md, resumable.
# A run whose results.json exists is skipped; one with checkpoints is resumed. About 10-15 minutes per
# run on 2 CPU cores, so this spans sessions: run it again to continue. JOBS=2 runs two one-thread workers
# (benchmarks/lib.sh); the timing benchmarks at the end then wait for a run with JOBS=1, as timings must be
# taken on an otherwise idle machine. benchmarks/results/sg.md is rendered at the end from the kept results.
set -euo pipefail
# shellcheck disable=SC1091
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"

# Replicates (issue 25): SEEDS seeds of SG and SG-OPT (the paper's 8), ABLATION_SEEDS of each ablation (3).
seeds=${SEEDS:-8}
ablation_seeds=${ABLATION_SEEDS:-3}

# Seed 001's Flow baseline (Table 1, Figure 4; issue 25): BERT-flow on the mean of the last two layers of the untuned
# model, fitted on the STS sentences (target) and on NLI; Table 6 times it (benchmarks/speed/sg_table6.py).
step "$kept/baselines-flow" sentune eval --model default --pooling last2 --flow target --flow nli --tasks sts --quiet
# Table 1: SG-OPT and SG (trained on all STS-B sentences, no labels). `model` (not `run`) where a later step reads the
# run's model: on a fresh checkout it is trained again, unless every step that reads it is kept already.
s1_readers_done() {  # the steps below that read SG-OPT seed 1's model (multilingual, layerwise, t-SNE, Table 6) are kept
  done_step "$kept/sg-opt-s1-multilingual" && grep -q STS17-en-en "$kept/sg-opt-s1-multilingual/results.json" &&
    done_step "$kept/layerwise-sg-opt-s1" && [ -f benchmarks/results/sg-figures/tsne.png ] &&
    grep -q BERT-flow benchmarks/results/sg_table6.md 2>/dev/null
}
if s1_readers_done; then run sg-opt-s1 001-sg-opt training.seed=1; else model sg-opt-s1 001-sg-opt training.seed=1; fi
for seed in $(seq 2 "$seeds"); do run "sg-opt-s$seed" 001-sg-opt "training.seed=$seed"; done
for seed in $(seq 1 "$seeds"); do run "sg-s$seed" 001-sg "training.seed=$seed"; done
# Table 5 ablations (L^opt3 = sg-opt-sN): seed 1 is ablation-NAME, seeds 2.. are ablation-NAME-sSEED.
ablation() {  # ablation NAME override
  local seed
  run "ablation-$1" 001-sg-opt "$2"
  for seed in $(seq 2 "$ablation_seeds"); do run "ablation-$1-s$seed" 001-sg-opt "$2" "training.seed=$seed"; done
}
for objective in opt2 opt1 base; do ablation "$objective" "params.objective=$objective"; done
ablation tau0.1 params.temperature=0.1
ablation tau0.001 params.temperature=0.001
ablation lambda0 params.reg_weight=0
ablation lambda1 params.reg_weight=1
ablation nohead params.head_hidden=null
# Tuning for the default model, chosen on STS-B dev (not part of the paper's tables): BERT_F's views
# mean-pooled (the default model's own pooling), also without the lower layers (A.3's choice), and a
# lower learning rate for an encoder that is already trained.
run tune-meanviews-s1 001-sg-opt params.view_pooling=mean
run tune-a3views-s1 001-sg-opt params.view_pooling=mean "params.layers=[4,5,6]"
run tune-lr2e-5-s1 001-sg-opt training.learning_rate=2e-5
# The tried configuration with the best seed-1 dev score (mean-pooled views, 86.03 vs the defaults' 85.73) gets
# seeds 2 and 3, so the dev choice between it and the defaults compares 3-seed means (benchmarks/renderers/render_sg.py).
for seed in 2 3; do run "tune-meanviews-s$seed" 001-sg-opt params.view_pooling=mean "training.seed=$seed"; done
# Figure 4: trained on NLI sentences instead of STS-B.
run sg-opt-nli 001-sg-opt train_data=nli
# Table 4 (A.3 variant): NLI sentences, mean-pooled views, lower layers left out.
model_for "$kept/sg-opt-a3-mlp $kept/sg-opt-a3-standard" sg-opt-a3 001-sg-opt train_data=nli params.view_pooling=mean "params.layers=[4,5,6]" eval.tasks=sts,transfer
# Table 4's MLP column (one hidden layer of 50, SentEval's classifier): the same A.3 model and the untuned poolings.
step "$kept/sg-opt-a3-mlp" sentune eval --model "$runs/sg-opt-a3/model" --tasks senteval7 --preset fast-mlp --quiet
step "$kept/baselines-transfer-mlp" sentune eval --model default --pooling mean,wk,cls --tasks senteval7 --preset fast-mlp --quiet
# SentEval's `standard` preset (10-fold, as the paper's A.3) for the same A.3 model; the untuned model's is baselines.sh's.
step "$kept/sg-opt-a3-standard" sentune eval --model "$runs/sg-opt-a3/model" --tasks senteval7 --preset standard --quiet

# Tables 2-3 (multilingual STS, English default model), Figure 1 and Figure 5 for SG-OPT seed 1.
sg=$runs/sg-opt-s1/model
# Issue 25: Table 3's en-en column (STS17-en-en, added to the catalog) needs SG-OPT's multilingual run repeated; the old
# run is set aside once and shown beside the new one.
if [ -f "$kept/sg-opt-s1-multilingual/results.json" ] && ! grep -q STS17-en-en "$kept/sg-opt-s1-multilingual/results.json"; then
  set_aside sg-opt-s1-multilingual -before-25
fi
[ -f "$kept/sg-opt-s1-multilingual/results.json" ] || sentune eval --model "$sg" --tasks multilingual,relatedness --quiet --out "$kept/sg-opt-s1-multilingual"
[ -f "$kept/layerwise-sg-opt-s1/layerwise.json" ] || sentune layerwise --model "$sg" --task STS-B --quiet --out "$kept/layerwise-sg-opt-s1"
[ -f benchmarks/results/sg-figures/tsne.png ] || sentune tsne --model default --label "untuned (default model)" --model "$sg" --label "SG-OPT (seed 1)" --out benchmarks/results/sg-figures
sentune report "$kept/layerwise-default" "$kept/layerwise-sg-opt-s1" --out benchmarks/results/sg-report
# Table 6 and the speed of the cached-view path (each measured in one run of its script, machine idle).
if [ -z "${SENTUNE_WORKER:-}" ]; then
  # (a page without the BERT-flow row predates issue 25: measured again, the old numbers shown beside the new)
  grep -q BERT-flow benchmarks/results/sg_table6.md 2>/dev/null || python benchmarks/speed/sg_table6.py --sg-run "$runs/sg-opt-s1" --out benchmarks/results/sg_table6.md
  [ -f benchmarks/results/sg_speed.md ] || python benchmarks/speed/sg_speed.py --out benchmarks/results/sg_speed.md
else
  echo "timing benchmarks skipped in a parallel worker: run this script again with JOBS=1"
fi
python benchmarks/renderers/render_sg.py
