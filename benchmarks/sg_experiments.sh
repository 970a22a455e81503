#!/usr/bin/env bash
# Seed 001 on the default model: every training run behind benchmarks/results/sg.md, resumable.
# A run whose results.json exists is skipped; one with checkpoints is resumed. About 10-15 minutes per
# run on 2 CPU cores, so this spans sessions: run it again to continue. Then render:
#   python benchmarks/render_seeds.py benchmarks/runs/sg-opt-s{1,2,3} ... --title ... --out ...
set -euo pipefail
# shellcheck disable=SC1091
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

# Table 1: SG-OPT and SG, 3 seeds each (trained on all STS-B sentences, no labels).
for seed in 1 2 3; do run "sg-opt-s$seed" 001-sg-opt "training.seed=$seed"; done
for seed in 1 2 3; do run "sg-s$seed" 001-sg "training.seed=$seed"; done
# Table 5 ablations (seed 1; L^opt3 = sg-opt-s1).
for objective in opt2 opt1 base; do run "ablation-$objective" 001-sg-opt "params.objective=$objective"; done
run ablation-tau0.1 001-sg-opt params.temperature=0.1
run ablation-tau0.001 001-sg-opt params.temperature=0.001
run ablation-lambda0 001-sg-opt params.reg_weight=0
run ablation-lambda1 001-sg-opt params.reg_weight=1
run ablation-nohead 001-sg-opt params.head_hidden=null
# Figure 4: trained on NLI sentences instead of STS-B.
run sg-opt-nli 001-sg-opt train_data=nli
# Table 4 (A.3 variant): NLI sentences, mean-pooled views, lower layers left out.
run sg-opt-a3 001-sg-opt train_data=nli params.view_pooling=mean "params.layers=[4,5,6]" eval.tasks=sts,transfer
