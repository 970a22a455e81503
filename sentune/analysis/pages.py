"""What every measured results page needs (the benchmark scripts under benchmarks/ write them): the command that
produced it, Markdown tables, the common options of a measuring script, and kept run results read back (KeptRuns) for
pages rendered from them."""

from __future__ import annotations

import platform
import shlex
import sys
import time
from collections.abc import Callable
from pathlib import Path


def timed(fn):
    """(seconds, value) of one call."""
    start = time.perf_counter()
    value = fn()
    return time.perf_counter() - start, value


def sts7_average(run: dict, metric: str = "spearman", aggregation: str = "all") -> float:
    """A run's 7-task STS average (×100) as `sentune eval` summarised it in results.json (summary.avg_<aggregation>_<metric>);
    aggregation 'all' (every pair of a task in one correlation) or 'wmean' (its subsets' correlations weighted by size)."""
    from sentune.data.catalog import group_tasks

    assert run["summary"]["sts_tasks"] == list(group_tasks("sts")), f"a run without the 7 STS tasks: {run['summary']['sts_tasks']}"
    return float(run["summary"][f"avg_{aggregation}_{metric}"])


def parser_for(doc: str, model: bool = True):
    """The benchmark scripts' command line: --data (the data folder), --model (default: the default model), --out (the
    Markdown page to write), the script's docstring as its help; a script adds its own options to it."""
    import argparse

    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data")
    if model:
        parser.add_argument("--model", default="default")
    parser.add_argument("--out")
    return parser


def task_sentences(tasks, data_dir) -> tuple[list[str], list[str]]:
    """Every sentence of the tasks' pairs, in order, and the unique ones (what sentune's evaluation encodes)."""
    from sentune.data.catalog import load_task

    sentences = [s for spec in tasks for pairs in load_task(spec, data_dir).values() for p in pairs for s in (p.a, p.b)]
    return sentences, list(dict.fromkeys(sentences))


def cpu_name() -> str:
    """The processor's model name (what a speed or memory page states it ran on)."""
    for line in Path("/proc/cpuinfo").read_text().splitlines() if Path("/proc/cpuinfo").is_file() else []:
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown CPU"


def command_line() -> str:
    """The command that is running this script, as a page or a kept results.json shows it (quoted: it runs as shown)."""
    return "python " + shlex.join(sys.argv)


def machine_conditions(path: Path) -> list[str]:
    """A results page's line from a conditions file beside a kept run (written by whoever ran it: what else the machine
    did meanwhile, so that a reader can weigh its minutes); none when the file is absent."""
    return [f"Machine conditions (as recorded by the person who ran it): {path.read_text().strip()}"] if path.is_file() else []


def command_block() -> list[str]:
    """The Markdown lines that show the command which produced a result page."""
    return ["Command:", "", "```", command_line(), "```", ""]


def emit(lines: list[str], out: str | None) -> None:
    """Print the Markdown result and, when asked, write it to `out`."""
    text = "\n".join(lines) + "\n"
    print(text)
    if out:
        Path(out).write_text(text, encoding="utf-8")


def markdown_table(header: list[str], rows: list[list[str]]) -> list[str]:
    """A Markdown table's lines from its header and rows of cells (the renderers keep rows as data, cells as text)."""
    return ["| " + " | ".join(header) + " |", "|" + "---|" * len(header), *("| " + " | ".join(row) + " |" for row in rows)]


BEFORE_25 = "-before-25"  # the suffix of a kept run measured by an earlier version of its code, kept beside its repeat (lib.sh set_aside)


class KeptRuns:
    """Kept run results (benchmarks/lib.sh keep / keep_tree) as a renderer reads them: `get` returns a run's
    results.json or None, remembering which runs were used (for the commands list) and which are missing."""

    def __init__(self, root: Path):
        self.root = Path(root)
        self.missing: list[str] = []  # runs asked for and not kept (listed on the page as not measured yet)
        self.used: list[str] = []  # runs read (their commands listed on the page)

    def get(self, rel: str | None, optional: bool = False) -> dict | None:
        """optional: a run that need not exist (e.g. an old run kept beside its repeat) is not listed as missing."""
        import json

        if rel is None:
            return None
        path = self.root / rel / "results.json"
        if not path.is_file():
            if not optional:
                self.missing.append(rel)
            return None
        self.used.append(rel)
        return json.loads(path.read_text())

    def write_page(self, parts: list[str], out: str, runner: str) -> None:
        """Append the command of every run used and what is still missing, then write the page."""
        import json

        parts = parts + ["## Commands of the runs", ""]
        for rel in sorted(set(self.used)):
            meta = json.loads((self.root / rel / "results.json").read_text())["meta"]
            parts.append(f"- {rel}: `{meta.get('command')}` ({meta['date']})")
        if self.missing:
            parts += ["", f"Not measured yet (run `bash {runner}` to continue): " + ", ".join(sorted(set(self.missing)))]
        Path(out).write_text("\n".join(parts) + "\n", encoding="utf-8")
        print(f"wrote {out}")


def render_kept_page(
    description: str,
    default_out: str,
    title: str,
    source: str,
    sections: Callable[[KeptRuns, Path], list[str]],
    runner: str,
    intro: Callable[[KeptRuns], str] = lambda runs: "",
) -> None:
    """The one `main` of the pages rendered from kept runs (render_cf.py, render_sed.py): --runs and --out, the title,
    the line saying when, by which command and from which runner's results the page was rendered (`source`, then the
    page's `intro`), the page's sections, and KeptRuns.write_page's list of the runs used and those still missing."""
    import argparse
    from datetime import UTC, datetime

    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--runs", default="benchmarks/results/runs", help="kept run results (benchmarks/lib.sh keep/keep_tree)")
    parser.add_argument("--out", default=default_out)
    args = parser.parse_args()
    runs = KeptRuns(Path(args.runs))
    head = [f"# {title}", "", f"Rendered {datetime.now(UTC).date()} by `python {' '.join(sys.argv)}` from the kept results of `{source}`" + intro(runs), ""]
    runs.write_page(head + sections(runs, Path(args.out)), args.out, runner)
