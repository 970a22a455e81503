"""The ready-made domains of `sentune adapt --example NAME`, declared in sentune/data/adapt_examples.yaml: each writes
an unlabelled corpus and dev/test pair files from the data directory, in the formats a user gives `--corpus`, `--dev`
and `--test`, so an example runs exactly as a user's own data would. The files are the record of the example; adapt
takes their data as written (`ExampleFiles.data`: the kinds a read of the files would give) and never reads them back."""

from __future__ import annotations

import random
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml

from sentune.data.beir import Document, Query, RetrievalSet, write_beir_folder
from sentune.data.catalog import load_examples, load_sentences, load_set, load_task, select_tasks
from sentune.data.readers import Source
from sentune.data.text_files import normalise
from sentune.data.user_data import pairs_as_written, write_corpus, write_scored_pairs
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
    train: Path | None = None  # labelled pairs apart from dev and test (`--example-train` hands them to --train)
    # What the files hold as adapt reads them, by option (corpus, dev, test, train): Sentences and ScoredPairs, or a
    # search Corpus and RetrievalSets (sentune.data.kinds).
    data: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)


def examples() -> dict[str, dict]:
    return yaml.safe_load(EXAMPLES_FILE.read_text(encoding="utf-8"))


def example_names(retrieval: bool | None = None) -> list[str]:
    """Every example's name, or only the pair ones (retrieval=False) or only the retrieval ones (True)."""
    return [name for name, spec in examples().items() if retrieval is None or ("retrieval" in spec) == retrieval]


def check_example(name: str) -> dict:
    known = examples()
    if name not in known:
        raise UserError(f"--example {name!r}: unknown; examples: {', '.join(known)}")
    return known[name]


def has_train(name: str, data_dir: Path) -> bool:
    """Whether the example has labelled training data apart from its dev and test (`--example-train`): a pair example's
    `train` set; a retrieval example's unused queries once its `test_task` (BEIR's own test split) is in the data."""
    spec = check_example(name)
    return "train" in spec or _judged(spec.get("retrieval", {}).get("test_task"), data_dir)


def _judged(task: str | None, data_dir: Path) -> bool:
    """A retrieval task's judgements are in the data directory (BEIR's test split may be left out of it)."""
    if task is None:
        return False
    spec = select_tasks(task)[0]
    return all((data_dir / str(spec.dir) / "qrels" / f"{split}.tsv").is_file() for split in spec.subsets)


def _pairs(source: dict, data_dir: Path, taken: set[int] | None = None, allow_modified: bool = False) -> tuple[list[tuple[str, str, float]], set[int]]:
    """The pairs a dev/test entry names, and the indices drawn when it samples (so `rest` can leave them out)."""
    if "task" in source:
        examples = load_task(select_tasks(source["task"])[0], data_dir, allow_modified=allow_modified)
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


def write_example(name: str, data_dir: Path, folder: Path, *, allow_modified: bool = False) -> ExampleFiles:
    """Write the example's corpus.txt, dev.tsv and test.tsv into `folder` (their contents depend only on the data); a
    retrieval example writes BEIR folders dev/ and test/ instead (the documents in dev/corpus.jsonl). `allow_modified`:
    catalogued tasks whose files differ from the catalog are read anyway (--allow-modified-data)."""
    spec = check_example(name)
    folder.mkdir(parents=True, exist_ok=True)
    if "retrieval" in spec:
        return _write_retrieval(name, spec, data_dir, folder, allow_modified)
    from sentune.data.kinds import Sentences

    sentences = load_sentences(spec["corpus"], data_dir, allow_modified=allow_modified)
    dev, taken = _pairs(spec["dev"], data_dir, allow_modified=allow_modified)
    test, _ = _pairs(spec["test"], data_dir, taken, allow_modified)
    corpus = Sentences(list(dict.fromkeys(text for text in map(normalise, sentences) if text)))  # as read_user_corpus reads corpus.txt
    files = ExampleFiles(name, spec["about"], folder / "corpus.txt", folder / "dev.tsv", folder / "test.tsv")
    write_corpus(files.corpus, sentences)
    write_scored_pairs(files.dev, dev)
    write_scored_pairs(files.test, test)
    data = {"corpus": corpus, "dev": pairs_as_written(files.dev, dev), "test": pairs_as_written(files.test, test)}
    if "train" in spec:
        train = _apart(_pairs(spec["train"], data_dir, taken, allow_modified)[0], dev + test)
        write_scored_pairs(folder / "train.tsv", train)
        files = replace(files, train=folder / "train.tsv")
        if train:  # none left apart from dev and test: --example-train refuses (sentune.api.adapt)
            data["train"] = pairs_as_written(folder / "train.tsv", train)
    return replace(files, data=data)


def _apart(rows: list[tuple[str, str, float]], others: list[tuple[str, str, float]]) -> list[tuple[str, str, float]]:
    """The rows that are not also a pair of `others` (either order): a train split may repeat a dev or test pair, and
    adapt refuses a train file that does."""
    seen = {frozenset((a, b)) for a, b, _ in others}
    return [row for row in rows if frozenset(row[:2]) not in seen]


def _write_retrieval(name: str, spec: dict, data_dir: Path, folder: Path, allow_modified: bool) -> ExampleFiles:
    source = spec["retrieval"]
    if "task" in source:
        found = load_task(select_tasks(source["task"])[0], data_dir, allow_modified=allow_modified)
        corpus, queries = found["corpus"], found["queries"]
        size = min(int(source["dev_queries"]), len(queries) // 2)  # a small data directory keeps half for test
        dev_index = set(random.Random(SAMPLE_SEED).sample(range(len(queries)), size))
        dev = [q for i, q in enumerate(queries) if i in dev_index]
        test = [q for i, q in enumerate(queries) if i not in dev_index]
    else:
        corpus, dev, test = _quora(source, data_dir)
    train = None
    if _judged(source.get("test_task"), data_dir):  # BEIR's test split tests; the queries dev left are training data
        train = test
        test = load_task(select_tasks(source["test_task"])[0], data_dir, allow_modified=allow_modified)["queries"]
        seen = {q.text for q in dev + test}  # adapt refuses a train query that is also a dev or test query
        train = [q for q in train if q.text not in seen]
    from sentune.data.beir import Corpus

    # as read_beir_folder reads the folders written: the queries with a relevant document
    sets = {split: RetrievalSet([q for q in queries if q.relevant], corpus) for split, queries in (("dev", dev), ("test", test), ("train", train)) if queries}
    write_beir_folder(folder / "dev", sets["dev"], "dev")
    write_beir_folder(folder / "test", sets["test"], "test")
    files = ExampleFiles(name, spec["about"], folder / "dev" / "corpus.jsonl", folder / "dev", folder / "test", data={"corpus": Corpus(corpus)} | sets)
    if train:
        files = replace(files, about=spec["about_with_test"], train=write_beir_folder(folder / "train", sets["train"], "train"))
    return files


def _quora(source: dict, data_dir: Path) -> tuple[list[Document], list[Query], list[Query]]:
    """BEIR's Quora from labelled question pairs: every distinct question a document (id = its first position); in each
    half, a question with a duplicate (label 1) is a query whose relevant documents are its duplicates (`clusters` N:
    only the questions of a cluster of at least N, its duplicates joined transitively, each judged with the rest of its
    cluster: many judgements a query). Test queries that are also dev queries are dropped; each side is a seeded sample
    of the size asked."""
    halves = {part: load_examples(name, data_dir) for part, name in source["pairs"].items()}
    ids: dict[str, str] = {}
    for pairs in halves.values():
        for pair in pairs:
            for text in (pair.a, pair.b):
                ids.setdefault(text, str(len(ids)))
    corpus = [Document(doc_id, text, Source("quora", int(doc_id) + 1)) for text, doc_id in ids.items()]
    picked: dict[str, list[Query]] = {}
    for part, pairs in halves.items():
        duplicates: dict[str, dict[str, int]] = {}
        for pair in pairs:
            if int(pair.label) == 1 and pair.a != pair.b:
                duplicates.setdefault(pair.a, {})[ids[pair.b]] = 1
                duplicates.setdefault(pair.b, {})[ids[pair.a]] = 1
        if "clusters" in source:
            duplicates = _clusters(duplicates, ids, int(source["clusters"]))
        taken = {q.text for q in picked.get("dev", [])}
        queries = [Query(ids[text], text, Source("quora", int(ids[text]) + 1), relevant) for text, relevant in duplicates.items() if text not in taken]
        size = min(int(source[f"{part}_queries"]), len(queries))
        chosen = set(random.Random(SAMPLE_SEED).sample(range(len(queries)), size))
        picked[part] = [q for i, q in enumerate(queries) if i in chosen]
    return corpus, picked["dev"], picked["test"]


def _clusters(duplicates: dict[str, dict[str, int]], ids: dict[str, str], smallest: int) -> dict[str, dict[str, int]]:
    """Each question of a cluster of at least `smallest` questions (joined by duplicate pairs, transitively) with the
    rest of its cluster as its relevant documents."""
    text_of = {doc_id: text for text, doc_id in ids.items()}
    seen: set[str] = set()
    found: dict[str, dict[str, int]] = {}
    for start in duplicates:
        if start in seen:
            continue
        cluster, todo = {start}, [start]
        while todo:
            for doc_id in duplicates[todo.pop()]:
                if text_of[doc_id] not in cluster:
                    cluster.add(text_of[doc_id])
                    todo.append(text_of[doc_id])
        seen |= cluster
        if len(cluster) >= smallest:
            found |= {text: {ids[other]: 1 for other in cluster if other != text} for text in cluster}
    return found
