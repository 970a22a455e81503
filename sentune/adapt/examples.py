"""The ready-made domains of `sentune adapt --example NAME`, declared in sentune/data/adapt_examples.yaml: each writes
an unlabelled corpus and dev/test pair files from the data directory, in the formats a user gives `--corpus`, `--dev`
and `--test`, so an example runs exactly as a user's own data would."""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path

import yaml

from sentune.data.catalog import load_sentences, load_set, load_task, select_tasks
from sentune.data.user_data import write_corpus, write_scored_pairs
from sentune.errors import UserError

EXAMPLES_FILE = Path(__file__).parents[1] / "data" / "adapt_examples.yaml"
SAMPLE_SEED = 0  # the dev sample of a set never changes between runs or machines


@dataclass(frozen=True)
class ExampleFiles:
    name: str
    about: str
    corpus: Path
    dev: Path
    test: Path
    dev_qrels: Path | None = None  # retrieval examples: dev and test are queries files with their judgements
    test_qrels: Path | None = None


def examples() -> dict[str, dict]:
    return yaml.safe_load(EXAMPLES_FILE.read_text(encoding="utf-8"))


def example_names() -> list[str]:
    return list(examples())


def check_example(name: str) -> dict:
    known = examples()
    if name not in known:
        raise UserError(f"--example {name!r}: unknown; examples: {', '.join(known)}")
    return known[name]


def _pairs(source: dict, data_dir: Path, taken: set[int] | None = None) -> tuple[list[tuple[str, str, float]], set[int]]:
    """The pairs a dev/test entry names, and the indices drawn when it samples (so `rest` can leave them out)."""
    if "task" in source:
        examples = load_task(select_tasks(source["task"])[0], data_dir)
    else:
        examples = load_set(source["set"], data_dir)
    items = [ex for split in examples.values() for ex in split]
    rows = [(ex.a, ex.b, float(ex.score if hasattr(ex, "score") else ex.label)) for ex in items]
    chosen = set(range(len(rows)))
    if "sample" in source:
        chosen = set(random.Random(SAMPLE_SEED).sample(range(len(rows)), min(int(source["sample"]), len(rows))))
    if source.get("rest") and taken is not None:
        chosen = set(range(len(rows))) - taken
    return [rows[i] for i in sorted(chosen)], chosen


def write_example(name: str, data_dir: Path, folder: Path) -> ExampleFiles:
    """Write the example's corpus.txt, dev.tsv and test.tsv into `folder` (their contents depend only on the data)."""
    spec = check_example(name)
    folder.mkdir(parents=True, exist_ok=True)
    files = ExampleFiles(name, spec["about"], folder / "corpus.txt", folder / "dev.tsv", folder / "test.tsv")
    write_corpus(files.corpus, load_sentences(spec["corpus"], data_dir))
    dev, taken = _pairs(spec["dev"], data_dir)
    test, _ = _pairs(spec["test"], data_dir, taken)
    write_scored_pairs(files.dev, dev)
    write_scored_pairs(files.test, test)
    return files
