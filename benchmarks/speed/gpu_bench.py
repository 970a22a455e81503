"""sentune on a CUDA GPU against the plain ways, every ratio measured in one run on one machine (issue 14).

(a) the 7-task STS evaluation: sentune.tasks.evaluate vs SentenceTransformer.encode of each task's two sentence
    lists (its defaults) and scoring them; target ratio of times <= 0.35.
(b) encoding the tasks' unique sentences: sentune's Encoder vs SentenceTransformer.encode; target >= 1.3x throughput.
(c) training throughput (sentences/s, model-FLOP utilisation) at BERT-base shape of simcse (batch 64, max length 32)
    and sg-opt (batch 16), fp32 and bf16: sentune's trainer vs a minimal hand-written loop with the same model, loss,
    optimizer, schedule and clipping (target: sentune <= 1.10x its time) and vs sentence-transformers' own Trainer
    with MultipleNegativesRankingLoss on (s, s) pairs at the same batch; target bf16 >= 2x fp32.
(e) post-processor fits (the flow, whitening) on the CPU and on the GPU.

Models have random weights and the shapes of all-MiniLM-L6-v2 (6 layers, 384) and BERT-base (12 layers, 768),
built from a config with the default model's tokenizer: speed does not depend on the weights.

Usage: python benchmarks/speed/gpu_bench.py --data DIR [--tokenizer DIR] [--parts a,b,c,e] [--repeats 3] [--out FILE.md]
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import statistics
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import torch
from speed_eval import naive_sts  # its own folder
from transformers import TrainerCallback

from sentune.analysis.pages import command_block, emit, timed
from sentune.core.encode import Encoder
from sentune.core.models import load_model, resolve_model_name
from sentune.data.catalog import load_task, resolve_data_dir, select_tasks
from sentune.tasks.evaluate import evaluate

SHAPES = {
    "MiniLM": {"hidden_size": 384, "num_hidden_layers": 6, "num_attention_heads": 12, "intermediate_size": 1536},
    "BERT-base": {"hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12, "intermediate_size": 3072},
}
# Dense peak rates of the H100 SXM datasheet, for model-FLOP utilisation: bf16 tensor cores, and plain fp32 (PyTorch's
# default float32 matmuls do not use TF32).
PEAK_TFLOPS = {"bf16": 989.4, "fp32": 66.9}
WARM_STEPS, TIMED_STEPS = 10, 50
DEVICE = "cuda"  # --device cpu: a quick check of the script itself on a machine without a GPU (numbers meaningless)


def random_model(shape: str, tokenizer_dir: str, root: Path) -> Path:
    from transformers import AutoTokenizer, BertConfig, BertModel

    folder = root / shape
    if not (folder / "config.json").exists():
        tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
        torch.manual_seed(0)
        BertModel(BertConfig(vocab_size=len(tokenizer), max_position_embeddings=512, **SHAPES[shape])).save_pretrained(folder)
        tokenizer.save_pretrained(folder)
    return folder


def sync() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def median_time(fn, repeats: int):
    times, value = [], None
    for _ in range(repeats):
        sync()
        t, value = timed(fn)
        times.append(t)
    return statistics.median(times), times, value


# ---------------------------------------------------------------- (a) and (b)


def eval_and_encode(folder: Path, data_dir: Path, repeats: int) -> dict:
    model = load_model(str(folder), device=DEVICE)
    tasks = select_tasks("sts")
    model.encode(["warm up the kernels"] * 64)
    Encoder(model, "model", show_progress=False).encode(["warm up the kernels"] * 64)
    naive, naive_times, naive_scores = median_time(lambda: naive_sts(model, tasks, data_dir), repeats)
    ours, ours_times, result = median_time(lambda: evaluate(model, tasks, data_dir, poolings=["model"], show_progress=False), repeats)
    scores = {n: r["all"]["spearman"] for n, r in result["runs"]["model"]["tasks"].items()}
    sentences = [s for spec in tasks for pairs in load_task(spec, data_dir).values() for p in pairs for s in (p.a, p.b)]
    unique = list(dict.fromkeys(sentences))
    st, st_times, theirs = median_time(lambda: model.encode(unique, convert_to_numpy=True), repeats)
    mine, mine_times, vectors = median_time(lambda: Encoder(model, "model", show_progress=False).encode(unique), repeats)
    return {
        "eval_naive_s": naive,
        "eval_sentune_s": ours,
        "eval_times": {"naive": naive_times, "sentune": ours_times},
        "eval_max_score_diff": max(abs(scores[n] - naive_scores[n]) for n in naive_scores),
        "sentences": len(sentences),
        "unique": len(unique),
        "encode_st_per_s": len(unique) / st,
        "encode_sentune_per_s": len(unique) / mine,
        "encode_times": {"st": st_times, "sentune": mine_times},
        "encode_max_abs_diff": float(np.abs(theirs - vectors).max()),
    }


# ---------------------------------------------------------------- (c)


class FlopCounter:
    """Model FLOPs of the trained encoder's forward passes (counted from the padded shapes a hook sees), times 3 for
    forward and backward: 2·N per token for the weight matrices and 4·layers·d·L per token for attention."""

    def __init__(self, model) -> None:
        hf = model[0].model
        self.n = sum(p.numel() for name, p in hf.named_parameters() if not name.startswith(("embeddings.", "pooler.")))
        self.layers, self.dim = hf.config.num_hidden_layers, hf.config.hidden_size
        self.flops, self.counting = 0.0, False
        model[0].register_forward_pre_hook(self._hook)

    def _hook(self, module, args):
        if self.counting and module.training:
            b, length = args[0]["input_ids"].shape
            self.flops += 3 * (2 * self.n * b * length + 4 * self.layers * self.dim * b * length * length)


class TimedSteps(TrainerCallback):
    """Seconds and model FLOPs of steps WARM+1 .. WARM+TIMED of a transformers Trainer run (the GPU synchronised at
    both ends); the FLOP counter goes on the model the Trainer trains when training begins."""

    def __init__(self) -> None:
        self.start = self.end = 0.0
        self.counter: FlopCounter | None = None

    def on_train_begin(self, args, state, control, model=None, **kwargs):
        self.counter = FlopCounter(model)

    def on_step_begin(self, args, state, control, **kwargs):
        assert self.counter is not None
        self.counter.counting = WARM_STEPS <= state.global_step < WARM_STEPS + TIMED_STEPS
        if state.global_step == WARM_STEPS:
            sync()
            self.start = time.perf_counter()

    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step == WARM_STEPS + TIMED_STEPS:
            sync()
            self.end = time.perf_counter()

    def result(self) -> dict:
        assert self.counter is not None
        return {"seconds": self.end - self.start, "flops": self.counter.flops}


def recipe_for(method: str, folder: Path, precision: str):
    from sentune.training.recipe import load_recipe

    batch = 64 if method == "simcse" else 16
    steps = WARM_STEPS + TIMED_STEPS
    overrides = [
        f"model={folder}",
        "train_data=stsb",
        f"training.batch_size={batch}",
        f"training.max_steps={steps}",
        f"training.max_sentences={batch * steps}",
        "training.eval_steps=100000",  # no dev evaluation inside the timed steps
        "training.patience=0",
        "training.logging_steps=10",
        "training.min_words=0",
        f"training.device={DEVICE}",
        f"training.precision={precision}",
        "eval.tasks=STS-B",
    ]
    if method == "simcse":
        overrides.append("training.max_seq_length=32")
    return load_recipe({"simcse": "002-simcse", "sg-opt": "001-sg-opt"}[method], overrides)


def sentune_trainer(recipe, data_dir: Path, root: Path) -> dict:
    from sentune.training.trainer import train

    timer = TimedSteps()
    train(recipe, root / f"run-{time.time_ns()}", data_dir=data_dir, callbacks=[timer])
    return timer.result()


def model_and_loss(recipe, data_dir: Path):
    """The model, the method's record, its training columns and its loss, built as the trainer builds them."""
    from sentune.training.trainer import build_training

    method, model, columns, loss, *_ = build_training(recipe, data_dir, device=DEVICE, show_progress=False)
    return model, method, columns, loss.to(DEVICE).train()


def batch_inputs(model, method, columns, rows) -> tuple[list[dict], torch.Tensor | None]:
    """One batch as the Trainer's collator makes it: each text column tokenized, the `label` column as a tensor."""
    texts = [c for c in method.columns if c != "label"]
    features = [{k: (v.to(DEVICE) if isinstance(v, torch.Tensor) else v) for k, v in model.preprocess([columns[c][i] for i in rows]).items()} for c in texts]
    labels = torch.tensor([columns["label"][i] for i in rows], device=DEVICE) if "label" in method.columns else None
    return features, labels


def hand_loop(recipe, data_dir: Path) -> dict:
    """The same model, loss, optimizer (torch AdamW, the recipe's settings), schedule and clipping, in a plain loop
    that tokenizes each batch as the Trainer's collator does."""
    from transformers import get_scheduler, set_seed

    t = recipe.training
    set_seed(t.seed)
    model, method, columns, loss = model_and_loss(recipe, data_dir)
    counter = FlopCounter(model)
    trainable = [p for p in loss.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(trainable, lr=t.learning_rate, betas=(t.adam_beta1, t.adam_beta2), weight_decay=t.weight_decay)
    steps = WARM_STEPS + TIMED_STEPS
    scheduler = get_scheduler(t.scheduler, optimizer, num_warmup_steps=int(t.warmup_ratio * steps), num_training_steps=steps)
    order = list(range(len(columns[method.columns[0]])))
    random.Random(t.seed).shuffle(order)  # shuffled as the Trainer's sampler does: batches of mixed lengths
    start = 0.0
    for step in range(steps):
        if step == WARM_STEPS:
            sync()
            start = time.perf_counter()
        counter.counting = step >= WARM_STEPS
        features, labels = batch_inputs(model, method, columns, order[step * t.batch_size : (step + 1) * t.batch_size])
        with torch.autocast(DEVICE.split(":")[0], dtype=torch.bfloat16, enabled=t.precision == "bf16"):
            value = loss(features, labels)
        value = sum(value.values()) if isinstance(value, dict) else value
        value.backward()
        torch.nn.utils.clip_grad_norm_(trainable, t.max_grad_norm)
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad(set_to_none=True)
    sync()
    return {"seconds": time.perf_counter() - start, "flops": counter.flops}


def st_mnrl(recipe, data_dir: Path, root: Path) -> dict:
    """sentence-transformers' own Trainer and MultipleNegativesRankingLoss on (s, s) pairs: its SimCSE recipe."""
    from datasets import Dataset
    from sentence_transformers import SentenceTransformerTrainer, SentenceTransformerTrainingArguments
    from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss

    from sentune.data.catalog import load_sentences
    from sentune.methods.base import subset
    from sentune.modules.build import with_pooling

    t = recipe.training
    model = with_pooling(load_model(recipe.model, device=DEVICE), "mean")
    model.max_seq_length = t.max_seq_length
    sentences = subset(load_sentences("stsb", data_dir), t.max_sentences)  # the sentences sentune's runs train on
    timer = TimedSteps()

    args = SentenceTransformerTrainingArguments(
        output_dir=str(root / f"st-{time.time_ns()}"),
        per_device_train_batch_size=t.batch_size,
        learning_rate=t.learning_rate,
        max_steps=WARM_STEPS + TIMED_STEPS,
        bf16=t.precision == "bf16",
        use_cpu=DEVICE == "cpu",
        save_strategy="no",
        eval_strategy="no",
        report_to="none",
        disable_tqdm=True,
        seed=t.seed,
    )
    dataset = Dataset.from_dict({"anchor": sentences, "positive": sentences})
    trainer = SentenceTransformerTrainer(model=model, args=args, train_dataset=dataset, loss=MultipleNegativesRankingLoss(model), callbacks=[timer])
    trainer.train()
    return timer.result()


def training_rows(folder: Path, data_dir: Path, root: Path) -> list[dict]:
    rows = []
    for method in ("simcse", "sg-opt"):
        for precision in ("fp32", "bf16"):
            recipe = recipe_for(method, folder, precision)
            batch = recipe.training.batch_size
            for loop, run in (("sentune", lambda r=recipe: sentune_trainer(r, data_dir, root)), ("hand loop", lambda r=recipe: hand_loop(r, data_dir))):
                rows.append({"method": method, "precision": precision, "loop": loop, "batch": batch, **run()})
            rows.append({"method": "st MNRL", "precision": precision, "loop": "sentence-transformers", "batch": batch, **st_mnrl(recipe, data_dir, root)})
            if precision == "bf16":  # cuDNN's attention builds a plan per new shape; batches of mixed lengths keep making them
                torch.backends.cuda.enable_cudnn_sdp(False)
                try:
                    rows.append(
                        {
                            "method": method,
                            "precision": precision,
                            "loop": "sentune, cuDNN attention off",
                            "batch": batch,
                            **sentune_trainer(recipe, data_dir, root),
                        }
                    )
                finally:
                    torch.backends.cuda.enable_cudnn_sdp(True)
            print(json.dumps(rows[-3:]), flush=True)
    for row in rows:
        row["sentences_per_s"] = row["batch"] * TIMED_STEPS / row["seconds"]
        row["mfu"] = row["flops"] / row["seconds"] / (PEAK_TFLOPS[row["precision"]] * 1e12)
    return rows


def profile_step(folder: Path, data_dir: Path, method_name: str, precision: str) -> None:
    """Where a training step's time goes: each part timed with the GPU synchronised around it, then the profiler's
    top operators (a diagnostic: `--parts p`)."""
    from torch.profiler import ProfilerActivity, profile

    recipe = recipe_for(method_name, folder, precision)
    t = recipe.training
    model, method, columns, loss = model_and_loss(recipe, data_dir)
    trainable = [p for p in loss.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(trainable, lr=t.learning_rate)
    parts: dict[str, list[float]] = {}

    def part(name, fn):
        sync()
        start = time.perf_counter()
        value = fn()
        sync()
        parts.setdefault(name, []).append(time.perf_counter() - start)
        return value

    def step(i):
        rows = range(i * t.batch_size, (i + 1) * t.batch_size)
        features, labels = part("tokenize + copy", lambda: batch_inputs(model, method, columns, rows))
        with torch.autocast(DEVICE.split(":")[0], dtype=torch.bfloat16, enabled=precision == "bf16"):
            value = part("forward + loss", lambda: loss(features, labels))
        value = sum(value.values()) if isinstance(value, dict) else value
        part("backward", value.backward)
        part("clip", lambda: torch.nn.utils.clip_grad_norm_(trainable, t.max_grad_norm))
        part("optimizer", optimizer.step)
        optimizer.zero_grad(set_to_none=True)

    for i in range(12):
        step(i)
    print(f"## profile: {method_name} {precision}, median seconds of steps 3-12 per part")
    for name, times in parts.items():
        print(f"{name}: {statistics.median(times[2:]) * 1000:.1f} ms")
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for i in range(12, 15):
            step(i)
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=25, max_name_column_width=60))
    print(prof.key_averages().table(sort_by="self_device_time_total", row_limit=12, max_name_column_width=60))


# ---------------------------------------------------------------- (e)


def postprocessor_fits() -> list[dict]:
    from sentune.postprocess.flow import Flow
    from sentune.postprocess.whitening import Whitening

    rng = np.random.default_rng(0)
    x = rng.standard_normal((20000, 768)).astype(np.float32)
    big = rng.standard_normal((200000, 768)).astype(np.float32)
    rows = []
    for device in dict.fromkeys(("cpu", DEVICE)):
        Flow(max_steps=5, device=device).fit(x[:1000])  # warm-up
        seconds, _ = timed(lambda d=device: Flow(max_steps=200, device=d).fit(x))
        rows.append({"fit": "flow, 200 steps of batch 16, d = 768", "device": device, "seconds": seconds})
        seconds, _ = timed(lambda d=device: Whitening(device=d).fit(big))
        rows.append({"fit": "whitening, 200,000 × 768", "device": device, "seconds": seconds})
    return rows


# ---------------------------------------------------------------- report


def main() -> None:
    global DEVICE, WARM_STEPS, TIMED_STEPS
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data")
    parser.add_argument("--tokenizer", default=None, help="a folder with the default model's tokenizer (default: the installed default model)")
    parser.add_argument("--parts", default="a,b,c,e")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out")
    parser.add_argument("--json")
    parser.add_argument("--device", default="cuda", help="cuda; cpu only checks that the script runs")
    parser.add_argument("--shapes", default=",".join(SHAPES))
    parser.add_argument("--steps", default=f"{WARM_STEPS},{TIMED_STEPS}", help="warm-up and timed training steps")
    parser.add_argument("--train-shape", default="BERT-base")
    args = parser.parse_args()
    DEVICE = args.device
    WARM_STEPS, TIMED_STEPS = (int(n) for n in args.steps.split(","))
    if DEVICE.startswith("cuda") and not torch.cuda.is_available():
        raise SystemExit("gpu_bench.py needs a CUDA device")
    data_dir = resolve_data_dir(args.data)
    parts = set(args.parts.split(","))
    tokenizer = args.tokenizer or resolve_model_name("default")
    root = Path(tempfile.mkdtemp(prefix="gpu-bench-"))
    found: dict = {}
    if parts & {"a", "b"}:
        found["eval"] = {shape: eval_and_encode(random_model(shape, tokenizer, root), data_dir, args.repeats) for shape in args.shapes.split(",")}
        print(json.dumps(found["eval"]), flush=True)
    if "c" in parts:
        found["training"] = training_rows(random_model(args.train_shape, tokenizer, root), data_dir, root)
        found["train_shape"] = args.train_shape
    if "p" in parts:
        for method, precision in (("simcse", "bf16"), ("sg-opt", "fp32")):
            profile_step(random_model(args.train_shape, tokenizer, root), data_dir, method, precision)
    if "e" in parts:
        found["fits"] = postprocessor_fits()
    if args.json:
        Path(args.json).write_text(json.dumps(found, indent=1))
    emit(render(found, args), args.out)


def render(found: dict, args) -> list[str]:
    import sentence_transformers
    import transformers

    lines = [
        "# sentune on a GPU",
        "",
        f"Date: {datetime.now(UTC).date()} · device: {torch.cuda.get_device_name(0) if DEVICE.startswith('cuda') else DEVICE} · torch {torch.__version__} (CUDA {torch.version.cuda}) · "
        f"transformers {transformers.__version__} · sentence-transformers {sentence_transformers.__version__} · {platform.machine()} · "
        f"median of {args.repeats} run(s) for (a) and (b)",
        "",
        *command_block(),
    ]
    if "eval" in found:
        lines += [
            "## (a) 7-task STS evaluation and (b) encoding, random weights",
            "",
            "| shape | (a) naive s | (a) sentune s | (a) ratio (target ≤ 0.35) | (b) ST sent/s | (b) sentune sent/s | (b) ratio (target ≥ 1.3) |",
            "|---|---|---|---|---|---|---|",
        ]
        for shape, r in found["eval"].items():
            lines.append(
                f"| {shape} | {r['eval_naive_s']:.2f} | {r['eval_sentune_s']:.2f} | {r['eval_sentune_s'] / r['eval_naive_s']:.3f} | "
                f"{r['encode_st_per_s']:.0f} | {r['encode_sentune_per_s']:.0f} | {r['encode_sentune_per_s'] / r['encode_st_per_s']:.2f} |"
            )
        r = next(iter(found["eval"].values()))
        lines += [
            "",
            f"(a) naive: `SentenceTransformer.encode` (batch 32) of each task's two sentence lists, then the same scoring; sentune: "
            f"`sentune.tasks.evaluate` (data checks, unique sentences once, token-budget batches). Both include reading the "
            f"task files. {r['sentences']} sentences, {r['unique']} unique. Largest difference of a task's 'all' Spearman "
            f"(×100) between the two: " + ", ".join(f"{s} {v['eval_max_score_diff']:.4f}" for s, v in found["eval"].items()) + "; largest "
            "absolute difference of an embedding in (b): " + ", ".join(f"{s} {v['encode_max_abs_diff']:.2e}" for s, v in found["eval"].items()) + ".",
            "",
        ]
    if "training" in found:
        rows = found["training"]
        lines += [
            f"## (c) training throughput at {found['train_shape']} shape, random weights ({TIMED_STEPS} steps timed after {WARM_STEPS})",
            "",
            "| method | batch | precision | loop | sentences/s | s/step | MFU | time vs hand loop (target ≤ 1.10) |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for row in rows:
            hand = next((h for h in rows if h["loop"] == "hand loop" and h["precision"] == row["precision"] and h["batch"] == row["batch"]), None)
            hand = hand if row["method"] != "st MNRL" else None  # another loss: no ratio
            ratio = f"{row['seconds'] / hand['seconds']:.3f}" if hand else "—"
            lines.append(
                f"| {row['method']} | {row['batch']} | {row['precision']} | {row['loop']} | {row['sentences_per_s']:.0f} | "
                f"{row['seconds'] / TIMED_STEPS * 1000:.1f} ms | {row['mfu'] * 100:.1f} % | {ratio} |"
            )
        lines += ["", "bf16 over fp32 throughput (target ≥ 2):", ""]
        for method in ("simcse", "sg-opt", "st MNRL"):
            for loop in ("sentune", "hand loop", "sentence-transformers"):
                pair = {r["precision"]: r for r in rows if r["method"] == method and r["loop"] == loop}
                if len(pair) == 2:
                    lines.append(f"- {method}, {loop}: {pair['bf16']['sentences_per_s'] / pair['fp32']['sentences_per_s']:.2f}×")
        lines += [
            "",
            "MFU: model FLOPs (3 × forward: 2·N per token for the encoder's weight matrices, 4·layers·d·L per token for attention; "
            f"heads and the optimizer not counted) over the datasheet's dense peak ({PEAK_TFLOPS['bf16']} TFLOP/s bf16, "
            f"{PEAK_TFLOPS['fp32']} TFLOP/s fp32 without TF32). simcse: two dropout passes of the batch; sg-opt: one pass "
            "(BERT_F's views come from the cache) plus the projection head and the regulariser; st MNRL: anchor and positive "
            "passes, its defaults otherwise.",
            "",
        ]
    if "fits" in found:
        lines += ["## (e) post-processor fits", "", "| fit | device | seconds |", "|---|---|---|"]
        lines += [f"| {r['fit']} | {r['device']} | {r['seconds']:.2f} |" for r in found["fits"]]
        lines.append("")
    return lines


if __name__ == "__main__":
    main()
