"""Every argument and input-file error of every sentune command answers in under 1.5 s on 2 cores, in one line, with
exit code 2, and leaves no folder behind.

Each case runs `sentune ...` as a fresh process (what a user types: the import time counts) in a scratch folder, and
is checked for exit code 2, exactly one line on stderr that contains the expected message, no traceback, and no
output folder created. The page lists every case with its wall time (the best of --repeats runs, so another process
waking up does not count against a command). The processes run without SENTUNE_DEVICE, as a user's do: --device
auto, whose CUDA question would import torch, is asked only once a command's checks have passed. The machine's load
(`uptime`) when the run started and ended goes on the page. tests/test_cli_errors.py runs the same cases in one process
and checks that none of them imports torch or sentence-transformers.

    python benchmarks/runners/cli_errors.py --out benchmarks/results/cli_errors.md
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from sentune.analysis.pages import command_block, emit

LIMIT_S = 1.5
REPO = str(Path(__file__).resolve().parents[2])


def scratch(root: Path) -> dict[str, Path]:
    """The files the cases point at."""
    files = {
        "corpus": root / "corpus.txt",
        "binary": root / "binary.txt",
        "dev": root / "dev.tsv",
        "malformed": root / "malformed.tsv",
        "words": root / "words.tsv",
        "recipe": root / "bad.yaml",
        "file": root / "a-file",
        "empty_data": root / "empty-data",
    }
    files["corpus"].write_text("".join(f"sentence number {i}\n" for i in range(150)))
    files["binary"].write_bytes(bytes(4096))
    files["dev"].write_text("".join(f"a man {i}\ta guy {i}\t{i % 5}\n" for i in range(120)))
    files["malformed"].write_text("a man\ta guy\t4\nthe dog runs\t3\n")
    files["words"].write_text("a man\ta guy\t4\nthe dog\ta cat\tsimilar\n")
    files["recipe"].write_text("method: simcse\ntraining: {batch_size: -3}\n")
    files["file"].write_text("not a folder\n")
    files["empty_data"].mkdir()
    # a BEIR folder whose judgements name a document the corpus lacks (line 3), and a corpus line that is not JSON
    beir = files["beir"] = root / "beir"
    (beir / "qrels").mkdir(parents=True)
    (beir / "corpus.jsonl").write_text("".join(json.dumps({"_id": f"d{i}", "title": "", "text": f"document {i}"}) + "\n" for i in range(150)))
    (beir / "queries.jsonl").write_text("".join(json.dumps({"_id": f"q{i}", "text": f"query {i}"}) + "\n" for i in range(120)))
    (beir / "qrels" / "dev.tsv").write_text("query-id\tcorpus-id\tscore\nq0\td0\t1\nq1\td999\t1\n")
    files["bad_corpus"] = root / "docs.jsonl"
    files["bad_corpus"].write_text('{"_id": "d0", "text": "fine"}\n{"_id": "d1", "title": "no text"}\n')
    files["train3"] = root / "train3.tsv"  # three labelled pairs: too few to train on
    files["train3"].write_text("".join(f"a dog {i}\ta puppy {i}\t{i}\n" for i in range(3)))
    files["dev01"] = root / "dev01.tsv"  # 0/1 labels
    files["dev01"].write_text("".join(f"a man {i}\ta guy {i}\t{i % 2}\n" for i in range(120)))
    files["graded_train"] = root / "graded-train.tsv"
    files["graded_train"].write_text("".join(f"a cat {i}\ta kitten {i}\t{i % 5}.5\n" for i in range(80)))
    files["finished"] = root / "finished-run"  # a run folder that holds a finished run
    files["finished"].mkdir()
    (files["finished"] / "results.json").write_text("{}\n")
    return files


def cases(f: dict[str, Path], data: str) -> list[tuple[str, list[str], str]]:
    """(what, argv after `sentune`, a part of the one-line message)."""
    out = "out"  # relative to the scratch folder: must not exist afterwards
    missing = "no-such-file.txt"
    adapt = ["adapt", "--corpus", str(f["corpus"]), "--dev", str(f["dev"]), "--out", out]
    return [
        ("eval: unknown task", ["eval", "--tasks", "STS99", "--data", data, "--out", out], "unknown task or group 'STS99'"),
        ("eval: data folder missing", ["eval", "--data", "no-such-data", "--out", out], "does not exist"),
        ("eval: a task's files missing", ["eval", "--tasks", "STS12", "--data", str(f["empty_data"]), "--out", out], "file not found"),
        ("eval: model folder missing", ["eval", "--model", "./no-such-model", "--data", data, "--out", out], "no-such-model"),
        ("eval: unknown device", ["eval", "--device", "tpu", "--data", data, "--out", out], "tpu"),
        ("eval: --out inside a file", ["eval", "--data", data, "--out", str(f["file"] / "x")], "is a file, not a folder"),
        ("eval: bad --flow-set", ["eval", "--data", data, "--flow", "target", "--flow-set", "nope=1", "--out", out], "nope"),
        ("train: unknown recipe", ["train", "no-such-recipe", "--data", data, "--out", out], "no-such-recipe"),
        ("train: bad override", ["train", "001-sg-opt", "training.batch_size=abc", "--data", data, "--out", out], "training.batch_size"),
        ("train: max_steps=0", ["train", "001-sg-opt", "training.max_steps=0", "--data", data, "--out", out], "would train nothing"),
        ("train: bad recipe file", ["train", str(f["recipe"]), "--data", data, "--out", out], "training.batch_size"),
        ("train: unknown params key", ["train", "001-sg-opt", "params.nonexistent=3", "--data", data, "--out", out], "params.nonexistent: unknown key"),
        ("train: --out holds a finished run", ["train", "001-sg-opt", "--data", data, "--out", str(f["finished"])], "holds a finished run"),
        ("pipeline: unknown stage", ["pipeline", "ct-nope", "--data", data, "--out", out], "nope"),
        ("pipeline: bad --set", ["pipeline", "ct-sed", "--set", "ct=1", "--data", data, "--out", out], "STAGE:key=value"),
        (
            "pipeline: the last stage's bad override",
            ["pipeline", "ct-sed", "--set", "sed-learner:params.eval_layers=7", "--data", data, "--out", out],
            "params.eval_layers: expected one of 1, 2, 3, 'dev', got 7",
        ),
        (
            "pipeline: --set for an unknown stage",
            ["pipeline", "ct-flow", "--set", "ctt:training.seed=1", "--data", data, "--out", out],
            "no stage is called ctt",
        ),
        ("adapt: bad --budget", [*adapt, "--budget", "abc"], "--budget"),
        ("adapt: unknown method", [*adapt, "--methods", "bogus"], "--methods"),
        ("adapt: --budget with two step counts", [*adapt, "--budget", "10,20"], "two step counts"),
        ("adapt: --train of 3 pairs", [*adapt, "--train", str(f["train3"])], "3 labelled pairs; the supervised candidates need at least"),
        (
            "adapt: graded --train against 0/1 dev pairs",
            ["adapt", "--corpus", str(f["corpus"]), "--dev", str(f["dev01"]), "--train", str(f["graded_train"]), "--out", out],
            "graded scores, but the dev pairs",
        ),
        ("adapt: --train sharing a pair with --dev", [*adapt, "--train", str(f["dev"])], "are also pairs of --dev"),
        ("adapt: corpus missing", ["adapt", "--corpus", missing, "--dev", str(f["dev"]), "--out", out], "file not found"),
        ("adapt: binary corpus", ["adapt", "--corpus", str(f["binary"]), "--dev", str(f["dev"]), "--out", out], "NUL byte"),
        ("adapt: malformed dev", ["adapt", "--corpus", str(f["corpus"]), "--dev", str(f["malformed"]), "--out", out], "malformed.tsv:2"),
        ("adapt: test label not a number", [*adapt, "--test", str(f["words"])], "words.tsv:2"),
        ("adapt: unknown example", ["adapt", "--example", "bogus", "--out", out], "bogus"),
        ("adapt: qrels name an unknown document", ["adapt", "--dev", str(f["beir"]), "--out", out], "dev.tsv:3: document 'd999' is not in the corpus"),
        ("adapt: a document without text", ["adapt", "--corpus", str(f["bad_corpus"]), "--dev", str(f["beir"]), "--out", out], "docs.jsonl:2: no `text` field"),
        ("index: corpus missing", ["index", "--corpus", missing, "--out", out], "file not found"),
        ("index: a document without text", ["index", "--corpus", str(f["bad_corpus"]), "--out", out], "docs.jsonl:2: no `text` field"),
        ("index: bad --fusion", ["index", "--corpus", str(f["beir"] / "corpus.jsonl"), "--fusion", "convex:2", "--out", out], "--fusion convex:2"),
        ("search: index missing", ["search", "no-such-index", "--query", "a dog"], "no-such-index"),
        ("search: --top 0", ["search", "no-such-index", "--query", "a dog", "--top", "0"], "--top 0"),
        ("search: --run inside a file", ["search", "no-such-index", "--query", "a dog", "--run", str(f["file"] / "run.trec")], "is a file, not a folder"),
        ("export: model missing", ["export", "./no-such-model", "--to", out], "no-such-model"),
        ("export: --keep-fp32 without --quantize", ["export", "default", "--to", out, "--keep-fp32", "ffn-output"], "--keep-fp32 applies to --quantize int8"),
        ("encode: input missing", ["encode", missing, "vectors.npy"], "file not found"),
        ("encode: bad output suffix", ["encode", str(f["corpus"]), "vectors.txt"], ".npy or .jsonl"),
        ("whiten: unknown set", ["whiten", "--fit-on", "nope", "--data", data, "--out", out], "nope"),
        ("flow: unknown set", ["flow", "--fit-on", "nope", "--data", data, "--out", out], "nope"),
        ("layerwise: unknown task", ["layerwise", "--task", "STS99", "--data", data, "--out", out], "STS99"),
        ("tsne: unknown task", ["tsne", "--model", "default", "--task", "STS99", "--data", data, "--out", out], "STS99"),
        ("pairs: unknown task", ["pairs", "--model", "default", "--task", "STS99", "--data", data, "--out", out], "STS99"),
        ("ensemble: member missing", ["ensemble", "--member", "./no-such-model", "--member", "./other", "--out", out], "--member ./no-such-model"),
        ("paraphrase: input missing", ["paraphrase", missing, "pairs.tsv"], "file not found"),
        ("data check: folder missing", ["data", "check", "no-such-data"], "no-such-data"),
        ("data download: unknown source", ["data", "download", out, "--only", "bogus"], "bogus"),
        ("compare: run missing", ["compare", "no-such-run"], "no-such-run"),
        ("report: run missing", ["report", "no-such-run", "--out", out], "no-such-run"),
    ]


def run_case(argv: list[str], folder: Path, repeats: int) -> tuple[float, subprocess.CompletedProcess]:
    best, done = float("inf"), None
    env = {k: v for k, v in os.environ.items() if k != "SENTUNE_DEVICE"} | {"HF_HUB_OFFLINE": "1"}
    for _ in range(repeats):
        started = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "sentune", *argv], cwd=folder, env=env, capture_output=True, text=True, timeout=300)
        best = min(best, time.perf_counter() - started)
    assert done is not None
    return best, done


def load() -> str:
    return ", ".join(f"{value:.2f}" for value in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", help="write the Markdown page here")
    parser.add_argument("--data", default=os.environ.get("SENTUNE_DATA"), help="a data directory (default $SENTUNE_DATA)")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    rows, failures = [], 0
    load_before = load()
    with tempfile.TemporaryDirectory(prefix="sentune-cli-errors-") as root:
        folder = Path(root)
        files = scratch(folder)
        data = args.data or str(files["empty_data"])
        for what, argv, message in cases(files, data):
            seconds, done = run_case(argv, folder, args.repeats)
            err = done.stderr.strip().splitlines()
            problems = []
            if done.returncode != 2:
                problems.append(f"exit {done.returncode}")
            if len(err) != 1 or "Traceback" in done.stderr:
                problems.append(f"{len(err)} stderr lines")
            if message not in done.stderr:
                problems.append(f"no {message!r}")
            if (folder / "out").exists():
                problems.append("left out/ behind")
            if seconds > LIMIT_S:
                problems.append(f"> {LIMIT_S} s")
            failures += bool(problems)
            line = err[-1] if err else ""
            # the page names no path of the machine it ran on: the scratch folder is TMP, the data directory $SENTUNE_DATA,
            # files of the checkout relative to it
            local = lambda text: text.replace(root, "TMP").replace(data, "$SENTUNE_DATA").replace(REPO + "/", "")  # noqa: E731
            shown = local(line).replace("|", "\\|")
            rows.append(f"| {what} | `sentune {' '.join(local(a) for a in argv)}` | {seconds:.2f} | {'; '.join(problems) or 'ok'} | {shown} |")
            print(f"{seconds:5.2f} s  {'; '.join(problems) or 'ok':<12} {what}", flush=True)
    slowest = max(rows, key=lambda row: float(row.split(" | ")[2]))
    lines = [
        "# Argument and input errors answer at once",
        "",
        f"Measured {datetime.now(UTC).date()} on {platform.machine()}, {os.cpu_count()} CPU cores. "
        f"Each case is a fresh `python -m sentune` process (import time included) without SENTUNE_DEVICE, the best of {args.repeats} runs; "
        f"ok = exit code 2, one line on stderr with the expected message, no traceback, no output folder left, under {LIMIT_S} s.",
        "",
        f"Machine load (`uptime`, 1/5/15-minute averages) at the start: {load_before}; at the end: {load()}. "
        "Other processes share these cores unless both read near 0.",
        "",
        *command_block(),
        f"**{len(rows) - failures} of {len(rows)} cases ok.** The slowest: {slowest.split(' | ')[0].lstrip('| ')}, {slowest.split(' | ')[2]} s.",
        "",
        "| case | command | seconds | check | the message |",
        "|---|---|---|---|---|",
        *rows,
    ]
    emit(lines, args.out)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
