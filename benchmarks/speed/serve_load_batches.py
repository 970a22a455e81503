"""What one batch of `sentune serve` costs per text when it is cut into length buckets: wall and CPU milliseconds a text
of the model's forward passes over random batches of SciFact's queries (the texts serve_load.py sends), as the server
builds its Encoder (one call: the texts sorted by length, padded to the longest of the call when it fits the Encoder's
4,096-token budget) and with smaller token budgets (sorted, then cut where the padded size passes the budget), in turn,
the variants interleaved. Run it on an idle machine: on a busy one the model's two threads wait for each other at every
operation, and more (smaller) forward passes look much worse than they are.

    python benchmarks/speed/serve_load_batches.py --model benchmarks/runs/serving/minilm --sizes 16,64 --rounds 20

Why: /v1/embeddings at 64 connections serves fewer requests a second than at 16 (benchmarks/results/serving.md), and a
batch of 64 short queries padded to its longest holds about twice the tokens of its texts (1.7 times at 16).
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True, help="the served model's folder")
    parser.add_argument("--queries", help="queries.jsonl (default: SciFact's under SENTUNE_DATA)")
    parser.add_argument("--sizes", default="16,64", help="texts in one batch (the connections of serve_load.py)")
    parser.add_argument("--budgets", default="0,512,1024,2048", help="token budgets a forward pass (0: the server's own)")
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--threads", type=int, default=2, help="torch's threads (the server's: the cores)")
    args = parser.parse_args()
    import torch
    from sentence_transformers import SentenceTransformer

    from sentune.core.encode import Encoder

    torch.set_num_threads(args.threads)
    queries = Path(args.queries or Path(os.environ["SENTUNE_DATA"]) / "retrieval/scifact/queries.jsonl")
    texts = [json.loads(line)["text"] for line in queries.read_text().splitlines() if line.strip()]
    model = SentenceTransformer(args.model, device="cpu")
    budgets = [int(b) for b in args.budgets.split(",")]
    encoders = {b: Encoder(model, "model", show_progress=False, **({"max_tokens": b} if b else {})) for b in budgets}
    rng = np.random.default_rng(0)
    for size in (int(s) for s in args.sizes.split(",")):
        spent = {b: [0.0, 0.0] for b in budgets}
        for encoder in encoders.values():  # warm-up
            encoder.encode(texts[:size])
        for _ in range(args.rounds):
            batch = [texts[i] for i in rng.choice(len(texts), size)]
            for b in rng.permutation(budgets):
                cpu, wall = time.process_time(), time.perf_counter()
                encoders[int(b)].encode(batch)
                spent[int(b)][0] += time.process_time() - cpu
                spent[int(b)][1] += time.perf_counter() - wall
        for b, (cpu, wall) in spent.items():
            texts_done = size * args.rounds
            row = {"batch": size, "token_budget": b or "server's", "wall_ms_per_text": round(1000 * wall / texts_done, 3)}
            print(json.dumps(row | {"cpu_ms_per_text": round(1000 * cpu / texts_done, 3), "load_average": os.getloadavg()[0]}))


if __name__ == "__main__":
    main()
