"""Issue 25: why a flow fitted on seed 003's supervised STS model wrecked its scores, and what the fix does.

The model's embeddings (mean of the last layer, no Normalize module) span fewer dimensions than they have over the
flow's fit sentences (the STS12-16 sentences, as every -Flow row of sed.md). This script encodes those sentences and
STS-B test once, prints the covariance spectrum's smallest eigenvalues, then fits flows with several seeds twice:
with the noise Flow now adds in the null directions (its default) and without it (`null_noise=0`, the old fit), and
scores each on STS-B test (Spearman ×100 of cosines). Same settings as the pipelines' Flow stage (learning rate 1e-3,
one epoch, batch 16). One thread, CPU; about 10 minutes.

    python benchmarks/runners/flow_null_directions.py --model benchmarks/runs/sed-sts-lb0.1-s1/model \
        --out benchmarks/results/flow_null_directions.md
"""

from __future__ import annotations

import time
from datetime import UTC, datetime

import numpy as np

from sentune.analysis.pages import command_block, emit, parser_for, task_sentences


def main() -> None:
    parser = parser_for(__doc__)
    parser.add_argument("--seeds", type=int, default=4, help="flow seeds 0..N-1")
    args = parser.parse_args()

    import torch
    from scipy.stats import spearmanr

    from sentune.core.encode import Encoder
    from sentune.core.models import load_model
    from sentune.data.catalog import load_task, resolve_data_dir, select_tasks
    from sentune.postprocess.flow import Flow

    torch.set_num_threads(1)
    data = resolve_data_dir(args.data)
    encoder = Encoder(load_model(args.model), "model", show_progress=False)
    _, fit_sentences = task_sentences(select_tasks("sts12-16"), data)
    fit = encoder.encode(fit_sentences).astype(np.float32)
    test = load_task(select_tasks("STS-B")[0], data)["test"]
    a, b = encoder.encode([p.a for p in test]), encoder.encode([p.b for p in test])
    gold = [p.score for p in test]

    def spearman(u, v) -> float:
        cosine = (u * v).sum(1) / np.linalg.norm(u, axis=1) / np.linalg.norm(v, axis=1)
        return 100 * spearmanr(cosine, gold).statistic

    eigenvalues = np.linalg.eigvalsh(np.cov(fit.T.astype(np.float64)))
    lines = [
        "# A flow on embeddings that span fewer dimensions than they have (issue 25)",
        "",
        f"Date: {datetime.now(UTC).date()} · model `{args.model}` · {len(fit_sentences)} fit sentences (STS12-16, each once), "
        f"{fit.shape[1]} dimensions · STS-B test: {len(test)} pairs · CPU, one thread",
        "",
        *command_block(),
        f"Covariance of the fit embeddings: largest eigenvalue {eigenvalues[-1]:.3g}; the five smallest "
        + ", ".join(f"{v:.2g}" for v in eigenvalues[:5])
        + f". STS-B test Spearman of the model alone: {spearman(a, b):.2f}.",
        "",
        "| flow seed | fit | null directions found | loss, first 50 steps | loss, last 50 steps | STS-B test Spearman | seconds |",
        "|---|---|---|---|---|---|---|",
    ]
    scores: dict[str, list[float]] = {"with noise (now)": [], "without (before)": []}
    for seed in range(args.seeds):
        for label, noise in (("with noise (now)", 1e-2), ("without (before)", 0.0)):
            start = time.perf_counter()
            flow = Flow(seed=seed, learning_rate=1e-3, null_noise=noise).fit(fit)
            score = spearman(flow.transform(a), flow.transform(b))
            scores[label].append(score)
            history = flow.history_
            lines.append(
                f"| {seed} | {label} | {flow.null_directions_} | {np.mean(history[:50]):.1f} | {np.mean(history[-50:]):.1f} | "
                f"{score:.2f} | {time.perf_counter() - start:.0f} |"
            )
    lines += [""] + [f"- {label}: STS-B Spearman {min(v):.2f} to {max(v):.2f} over {len(v)} seeds." for label, v in scores.items()]
    emit(lines, args.out)


if __name__ == "__main__":
    main()
