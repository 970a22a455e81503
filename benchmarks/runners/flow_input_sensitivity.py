"""Issue 25: why a flow fitted without the null-direction noise does not reproduce an earlier run of itself.

cf.md's `null_noise=0` flows (the fit before the fix) differ from the kept 2026-11-22 run by up to about a point per
task although they take the same sentences in the same order, while flows on first-last pooling (no null directions)
reproduce it to within 0.01 per task (2026-11-25, seed 1: `sentune eval --model default --pooling mean,first-last
--flow per-task:1 --flow-set null_noise=0 --tasks sts,dev`, the earlier run's task set). The suspect: the embeddings. sentence-transformers sorts what it encodes by length
and pads each batch, so a sentence's vector depends, in the last float bits, on which other sentences were encoded
with it (the earlier run encoded the STS-B dev sentences too); a fit that does not converge (embeddings on fewer
dimensions than they have: no maximum-likelihood density) may amplify that. This script encodes each task's
sentences twice, alone and in the company of another task's, and fits flows of several seeds on each encoding, with
the noise (the default now) and without it, scoring each on the task (Spearman ×100 of cosines over all its pairs,
the pages' 'all' aggregation). Flow settings as `sentune eval --flow per-task:SEED` (the defaults). CPU, one thread.

    python benchmarks/runners/flow_input_sensitivity.py --out benchmarks/results/flow_input_sensitivity.md
"""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np

from sentune.analysis.pages import command_block, emit, parser_for, task_sentences


def main() -> None:
    parser = parser_for(__doc__)
    parser.add_argument("--tasks", default="STS13,STS16", help="tasks whose own sentences the flows are fitted on (as per-task)")
    parser.add_argument("--company", default="STS-B-dev", help="the task whose sentences share the batches in the second encoding")
    parser.add_argument("--pooling", default="mean", help="the pooling the flows are fitted on (cf.md's target flows: mean)")
    parser.add_argument("--seeds", default="1,2,3", help="flow seeds")
    args = parser.parse_args()

    import torch

    from sentune.core.encode import Encoder
    from sentune.core.models import load_model
    from sentune.data.catalog import load_task, resolve_data_dir, select_tasks
    from sentune.postprocess.flow import Flow

    torch.set_num_threads(1)
    data = resolve_data_dir(args.data)
    encoder = Encoder(load_model(args.model), args.pooling, show_progress=False)
    _, company = task_sentences(select_tasks(args.company), data)
    seeds = [int(s) for s in args.seeds.split(",")]
    lines = [
        "# A flow without the null-direction noise amplifies float rounding in its input (issue 25)",
        "",
        f"Date: {datetime.now(UTC).date()} · model `{args.model}`, pooling `{args.pooling}` · flows fitted on each task's own "
        f"sentences (as `--flow per-task:SEED`), encoded alone and with the {len(company)} {args.company} sentences in the "
        "batches · CPU, one thread",
        "",
        *command_block(),
        "| task | flow seed | fit | null directions | Spearman, encoded alone | Spearman, encoded with company | difference |",
        "|---|---|---|---|---|---|---|",
    ]
    notes, spread = [], {"with noise (now)": [], "without (before)": []}
    for spec in select_tasks(args.tasks):
        _, own = task_sentences([spec], data)
        alone = encoder.encode(own).astype(np.float32)
        mixed = encoder.encode(own + company)[: len(own)].astype(np.float32)
        difference = np.abs(alone - mixed)
        notes.append(
            f"- {spec.name}: {len(own)} sentences; the two encodings differ in {(difference.max(1) > 0).sum()} of them, "
            f"by at most {difference.max():.1e} (largest |value| {np.abs(alone).max():.2g})."
        )
        pairs = [p for subset in load_task(spec, data).values() for p in subset]
        index = {s: i for i, s in enumerate(own)}
        a, b = [index[p.a] for p in pairs], [index[p.b] for p in pairs]
        gold = [p.score for p in pairs]

        for seed in seeds:
            for label, noise in (("with noise (now)", 1e-2), ("without (before)", 0.0)):
                scores, found = [], 0
                for vectors in (alone, mixed):
                    flow = Flow(seed=seed, null_noise=noise).fit(vectors)
                    scores.append(cosine_spearman(flow.transform(vectors), a, b, gold))
                    found = flow.null_directions_
                spread[label].append(abs(scores[1] - scores[0]))
                lines.append(f"| {spec.name} | {seed} | {label} | {found} | {scores[0]:.2f} | {scores[1]:.2f} | {scores[1] - scores[0]:+.2f} |")
    lines += ["", *notes, ""]
    lines += [f"- {label}: largest |difference| {max(v):.2f}, mean {np.mean(v):.2f} over {len(v)} fits." for label, v in spread.items()]
    emit(lines, args.out)


def cosine_spearman(vectors: np.ndarray, a: list[int], b: list[int], gold: list[float]) -> float:
    """Spearman ×100 of the cosines of rows a[i], b[i] against the gold scores (every pair of the task: 'all'), with
    the evaluation's own scoring (sentune.tasks.sts)."""
    from sentune.tasks.sts import correlations, cosine_scores

    return correlations(cosine_scores(vectors[a], vectors[b]), np.asarray(gold))["spearman"]


if __name__ == "__main__":
    main()
