#!/usr/bin/env bash
# Issue 25 (1) on a CUDA machine: seed 003's NLI-CT-SED as the paper describes it (each of the MEMBERS members runs
# NLI, then CT, with its own seed; the learners start from the pre-trained model), its Flow stage and every evaluation
# sed.md reads for it (Table 3's NLI-CT group and -Flow group, Table 7's SentEval, Table 8's layers). Why a GPU: on
# the 2-core CPU the pipeline takes about 3.5 h of both cores, longer than a working session, and run folders do not
# outlive one. Same settings as benchmarks/runners/sed_experiments.sh, fp32, into a pipeline folder of its own
# (sed-gpu) so that the CPU pipeline's kept results stay as they were and sed.md shows the two beside each other.
# Resumable like the other runners: run it again to continue. Needs `sentune` on PATH, SENTUNE_DATA, and (where no
# .venv should be built) SENTUNE_NO_SETUP=1.
set -euo pipefail
# shellcheck disable=SC1091
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
members=${MEMBERS:-5}; learners=${LEARNERS:-3}
root=$runs/sed-gpu
sentune pipeline nli-ct-sed-flow --members "$members" --learners "$learners" --fit-on tasks:STS12,STS13,STS14,STS15,STS16 \
  --set flow:learning_rate=1e-3 --set sed-learner:training.max_sentences=20000 --out "$root"
keep_tree "$root" sed-gpu
# STS-only evaluations first (seconds each on an H100); SentEval last: its classifiers run on the CPU (about a minute
# per task on the lent machine, 2026-11-25) and an interrupted step starts again from its first task.
step "$kept/sed-layers-gpu-nli-ct-sed-learner-1" sentune eval --model "$root/nli-ct-sed/learner-1/model" --pooling mean,last2,last3 \
  --tasks sts --flow tasks:STS12,STS13,STS14,STS15,STS16 --flow-set learning_rate=1e-3 --quiet
ENSEMBLES=sed-gpu/nli-ct-sed bash benchmarks/runners/sed_pooling.sh
for stage in nli-ct-sed/learner-1 nli-ct-sed-flow; do
  step "$kept/sed-senteval-gpu-${stage//\//-}" sentune eval --model "$root/$stage/model" --tasks transfer,relatedness --preset fast --quiet
done
