"""What a text of a server's batch costs, one forward pass over the whole batch with every torch thread against CPU
lanes (sentune.core.lanes: the batch cut by length into one run a thread, each run on its own thread with one thread)
and against the model's exact ONNX graph (`--backend onnx`, fp32; with ONNX Runtime installed), by batch size, on
SciFact's queries. `sentune serve` runs batches of up to sentune.core.runtime.SMALL_BATCH_TEXTS texts on the graph and
larger ones in lanes: this is where that number comes from. Run it on an idle machine:

    python benchmarks/speed/serve_lanes.py --model benchmarks/runs/serving/minilm --sizes 1,2,3,4,6,8,16,32,64
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import random
import time
from pathlib import Path

import numpy as np
import torch
from sentence_transformers import SentenceTransformer

from sentune.core.encode import Encoder
from sentune.core.lanes import Lanes
from sentune.core.onnx_runtime import backend_runtime
from sentune.core.runtime import Runtime


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
    parser.add_argument("--sizes", default="1,2,3,4,6,8,16,32,64")
    parser.add_argument("--repeats", type=int, default=30)
    args = parser.parse_args()
    texts = [json.loads(line)["text"] for line in Path(args.queries).read_text(encoding="utf-8").splitlines() if line.strip()]
    threads = torch.get_num_threads()
    model = SentenceTransformer(args.model, device="cpu")
    whole, laned = Encoder(model, "model", show_progress=False), Encoder(model, "model", show_progress=False, runtime=Runtime(lanes=Lanes(threads, threads)))
    graph = None
    if importlib.util.find_spec("onnxruntime") is not None:
        graph = Encoder(model, "model", show_progress=False, runtime=backend_runtime(model, "onnx", source=args.model))
    for encoder in (whole, laned, graph):
        if encoder is not None:
            encoder.encode(["warm up"] * 8)
    print(f"{threads} torch threads; ms a text, median of {args.repeats} batches of SciFact queries")
    print("| texts in the batch | whole batch, every thread | lanes | exact ONNX graph | fastest |\n|---|---|---|---|---|")
    for size in (int(s) for s in args.sizes.split(",")):
        times = {"whole": per_text_ms(whole, texts, size, args.repeats, size), "lanes": per_text_ms(laned, texts, size, args.repeats, size)}
        if graph is not None:
            times["graph"] = per_text_ms(graph, texts, size, args.repeats, size)
        shown = " | ".join(f"{times[name]:.2f}" if name in times else "—" for name in ("whole", "lanes", "graph"))
        print(f"| {size} | {shown} | {min(times, key=times.__getitem__)} |", flush=True)


if __name__ == "__main__":
    main()
