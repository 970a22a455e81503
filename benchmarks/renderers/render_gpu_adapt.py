"""Renders benchmarks/results/gpu_adapt.md: `sentune adapt --example mrpc` and `--example scifact` timed on a lent GPU,
beside the same examples' runs on 2 CPU cores (benchmarks/results/adapt/NAME/results.json).

Reads, from the GPU run's folder: NAME.json (the run's results.json), machine.txt (the machine, the versions and each
run's wall seconds, as the device script wrote them) and gpu_usage.csv (nvidia-smi's memory readings every 2 s).
Usage: python benchmarks/renderers/render_gpu_adapt.py [--gpu benchmarks/results/gpu_adapt/current] [--out PAGE]
"""

from __future__ import annotations

import argparse
import json
import os
import re
from datetime import datetime
from pathlib import Path

from render_adapt import minutes  # benchmarks/renderers/render_adapt.py: the candidate minutes adapt.md reports

RESULTS = Path(__file__).resolve().parents[1] / "results"
EXAMPLES = ("mrpc", "scifact")


def load(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def walls(machine: str) -> dict[str, tuple[int, str]]:
    """Each example's wall seconds and start time, from the lines `NAME exit 0 wall N s (...; started HH:MM:SS)`."""
    found = re.findall(r"^(\S+) exit 0 wall (\d+) s .*started (\d\d:\d\d:\d\d)\)", machine, flags=re.M)
    return {name: (int(seconds), start) for name, seconds, start in found}


def peak_memory_mib(usage: Path, start: str, seconds: int) -> int:
    """The highest GPU memory reading between a run's start and its end (readings are `YYYY/MM/DD HH:MM:SS.mmm, N MiB, U %`)."""
    peak = 0
    for line in usage.read_text().splitlines():
        stamp, memory, _ = (part.strip() for part in line.split(","))
        clock = datetime.strptime(stamp.split(" ")[1].split(".")[0], "%H:%M:%S")
        offset = (clock - datetime.strptime(start, "%H:%M:%S")).total_seconds()
        if 0 <= offset <= seconds:
            peak = max(peak, int(memory.split()[0]))
    return peak


def code_line(folder: Path) -> list[str]:
    """The commit whose working tree the device ran (code_commit.txt), when recorded: the device's copy of the
    repository keeps the git metadata of an earlier session, so machine.txt's commit line names an older commit."""
    found = folder / "code_commit.txt"
    if not found.is_file():
        return []
    commit = found.read_text(encoding="utf-8").strip()
    return [
        f"The code it ran: this repository's working tree at commit {commit}, as the device copied it (its copy keeps the git",
        "metadata of an earlier session, so machine.txt's commit line names an older commit).",
        "",
    ]


def chosen(results: dict) -> tuple[str, float]:
    name = results["choice"]["name"]
    return name, results["candidates"][name]["test"]["score"]


def summary(gpu: dict[str, dict], cpu: dict[str, dict], machine: str, usage: Path) -> list[str]:
    timed = walls(machine)
    rows = [
        "| example | GPU: wall | GPU: candidate minutes | GPU: peak GPU memory | GPU: chosen, test | 2 CPU cores: candidate minutes | 2 CPU cores: chosen, test |",
        "|---|---|---|---|---|---|---|",
    ]
    for name in EXAMPLES:
        seconds, start = timed[name]
        g_name, g_test = chosen(gpu[name])
        c_name, c_test = chosen(cpu[name])
        rows.append(
            f"| {name} | {seconds} s ({seconds / 60:.1f} min) | {minutes(gpu[name], reference=False):.1f} | "
            f"{peak_memory_mib(usage, start, seconds):,} MiB | `{g_name}` {g_test:.2f} | {minutes(cpu[name], reference=False):.1f} | `{c_name}` {c_test:.2f} |"
        )
    return rows


def per_candidate(name: str, gpu: dict, cpu: dict) -> list[str]:
    rows = [f"| `{name}` candidate | GPU seconds | 2 CPU cores, minutes |", "|---|---|---|"]
    for candidate, record in gpu["candidates"].items():
        on_cpu = cpu["candidates"].get(candidate)
        rows.append(
            f"| `{candidate}` | {record['seconds']:.1f} | {on_cpu['seconds'] / 60:.1f} |" if on_cpu else f"| `{candidate}` | {record['seconds']:.1f} | — |"
        )
    return rows


def render(gpu_dir: Path, out: Path) -> str:
    links = os.path.relpath(RESULTS / "gpu_adapt", out.resolve().parent)  # the earlier runs' pages, from where this one is written
    gpu = {name: load(gpu_dir / f"{name}.json") for name in EXAMPLES}
    cpu = {name: load(RESULTS / "adapt" / name / "results.json") for name in EXAMPLES}
    machine = (gpu_dir / "machine.txt").read_text(encoding="utf-8")
    folder = gpu_dir.relative_to(RESULTS)
    lines = [
        "# `sentune adapt` on a GPU: the MRPC and SciFact examples",
        "",
        f"Rendered by `python benchmarks/renderers/render_gpu_adapt.py --gpu benchmarks/results/{folder}` from the GPU runs'",
        f"results.json files (`{folder}/NAME.json`) and the 2-core runs' (`adapt/NAME/results.json`, their commands and dates",
        "on `adapt.md` and `retrieval.md`).",
        "",
        "The machine, as its script recorded it (`machine.txt`: commit, GPU, cores, torch / transformers /",
        "sentence-transformers versions, CUDA present, start):",
        "",
        "```",
        machine.strip(),
        "```",
        "",
        *code_line(gpu_dir),
        "Commands, on the machine (`SENTUNE_DATA` pointing at a copy of the data files the two examples read, `--model` at",
        "the default model's own weights, checked there by SHA-256), one after the other, each alone on the GPU, every",
        "default candidate included:",
        "",
        "```",
        *(f"sentune adapt --example {name} --model MODEL --out OUT --quiet" for name in EXAMPLES),
        "```",
        "",
        "Candidate minutes are the sum of every candidate's own seconds (training, fitting, scoring), as on `adapt.md`; the",
        "wall time adds the process start (importing torch and sentence-transformers), the data and the report.",
        "Peak GPU memory is nvidia-smi's highest reading during the run (every 2 s, `gpu_usage.csv`).",
        "",
        *summary(gpu, cpu, machine, gpu_dir / "gpu_usage.csv"),
        "",
        *[line for name in EXAMPLES for line in (*per_candidate(name, gpu[name], cpu[name]), "")],
        *(memory_section(gpu_dir) if (gpu_dir / "jax_check.txt").is_file() else []),
        *earlier_runs(links, out),
        "",
    ]
    return "\n".join(lines)


def earlier_runs(links: str, out: Path) -> list[str]:
    """Links to the earlier GPU runs' pages, leaving out the page being written."""
    rebuilt = (
        ""
        if out.resolve() == (RESULTS / "gpu_adapt" / "rebuilt.md").resolve()
        else f"[gpu_adapt/rebuilt.md]({links}/rebuilt.md) (commit 2d47db7, with the GPU memory check) and, "
    )
    return [
        f"Earlier runs: {rebuilt}before adapt was rebuilt (commit 07eaf9b, both examples at once on the one GPU): [gpu_adapt/before_rebuild.md]({links}/before_rebuild.md)."
    ]


def memory_section(gpu_dir: Path) -> list[str]:
    """What the run that found bm25s's jax import recorded: the memory check after the fix and the gpu tests' logs."""
    return [
        "## GPU memory",
        "",
        "At the measured commit, SciFact's peak is not the model's: bm25s runs a jax top-k when it is imported, and where",
        "jax is installed (it is on this machine) that starts jax's GPU backend, which takes 75 % of the GPU's memory by",
        "XLA's default. sentune now imports bm25s with jax hidden (`sentune/search/lexical.py`, `_jax_hidden`; test:",
        "`tests/test_lexical_fit.py::test_bm25s_is_imported_without_starting_jax_and_jax_stays_importable`). Checked on",
        "the same kind of machine after the change (`jax_check.txt`: torch's first tensor, then a BM25 index built through",
        "sentune, then nvidia-smi):",
        "",
        "```",
        (gpu_dir / "jax_check.txt").read_text(encoding="utf-8").strip(),
        "```",
        "",
        "The gpu-marked tests there: `gpu_tests_one_process.log` (`-n 0`, `JAX_PLATFORMS=cpu`, at the measured commit) and",
        "`gpu_tests_xdist.log` (the default 16 xdist workers, after the change, tests/conftest.py keeping the tests' own",
        "bm25s imports off jax's GPU backend).",
        "",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpu", type=Path, default=RESULTS / "gpu_adapt" / "current")
    parser.add_argument("--out", type=Path, default=RESULTS / "gpu_adapt.md")
    args = parser.parse_args()
    args.out.write_text(render(args.gpu.resolve(), args.out), encoding="utf-8")


if __name__ == "__main__":
    main()
