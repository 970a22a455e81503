"""What a text of a server's batch costs, one forward pass over the whole batch with every torch thread against CPU
lanes (sentune.core.lanes: the batch cut by length into one run a thread, each run on its own thread with one thread),
by batch size, on SciFact's queries. Run it on an idle machine:

    python benchmarks/speed/serve_lanes.py --model benchmarks/runs/serving/minilm --sizes 1,4,6,8,16,32,64
"""

from __future__ import annotations

import argparse
import json
import random
import time
from pathlib import Path

import numpy as np
import torch
from sentence_transformers import SentenceTransformer

from sentune.core.encode import Encoder
from sentune.core.lanes import Lanes


def per_text_ms(encoder: Encoder, texts: list[str], size: int, repeats: int, seed: int) -> float:
    rng = random.Random(seed)
    times = []
    for _ in range(repeats):
        batch = rng.sample(texts, size)
        started = time.perf_counter()
        encoder.encode(batch)
        times.append(time.perf_counter() - started)
    return 1000 * float(np.median(times)) / size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--queries", default="../shared/data/retrieval/scifact/queries.jsonl")
    parser.add_argument("--sizes", default="1,4,6,8,16,32,64")
    parser.add_argument("--repeats", type=int, default=30)
    args = parser.parse_args()
    texts = [json.loads(line)["text"] for line in Path(args.queries).read_text(encoding="utf-8").splitlines() if line.strip()]
    threads = torch.get_num_threads()
    whole_model = SentenceTransformer(args.model, device="cpu")
    laned_model = SentenceTransformer(args.model, device="cpu")
    laned_model.sentune_lanes = Lanes(threads, threads)  # type: ignore[attr-defined]
    whole, laned = Encoder(whole_model, "model", show_progress=False), Encoder(laned_model, "model", show_progress=False)
    whole.encode(["warm up"] * 8), laned.encode(["warm up"] * 8)
    print(f"{threads} torch threads; ms a text, median of {args.repeats} batches of SciFact queries")
    print("| texts in the batch | whole batch, every thread | lanes | whole / lanes |\n|---|---|---|---|")
    for size in (int(s) for s in args.sizes.split(",")):
        a = per_text_ms(whole, texts, size, args.repeats, size)
        b = per_text_ms(laned, texts, size, args.repeats, size)
        print(f"| {size} | {a:.2f} | {b:.2f} | {a / b:.2f} |", flush=True)


if __name__ == "__main__":
    main()
