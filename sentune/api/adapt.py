"""`sentune.adapt`: adapt a model to a domain from Python, as `sentune adapt` does from files (the command parses its
options and calls `run` here), and the run's outcome as an object: the chosen model, why, the candidates as a table, the
search index of a search run."""

from __future__ import annotations

import shutil
import tempfile
import time as clock
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sentune.api import given
from sentune.api.common import Model, check_models, check_out, refused_leaves_nothing, resolve, saved_model
from sentune.core.progress import say
from sentune.errors import UserError, names_python_arguments

if TYPE_CHECKING:
    import pandas
    from sentence_transformers import SentenceTransformer

    from sentune.api.index import Index


INPUT_MODEL = "input-model"  # OUT/input-model: a model given in memory, saved for the run to load by path
MARKS = ("adapt.json",)  # what marks a folder as an adapt run's (sentune.adaptation.inputs)
WRITTEN_FIRST = (INPUT_MODEL, "example", "data")  # what a run may write before its settings
# the options of `sentune adapt` that are not a parameter of the same name
OPTIONS = {"no-labels": "labels=False", "allow-modified-data": "allow_modified", "quiet": "show_progress=False", "prune": "prune"}


@dataclass
class AdaptResult:
    """What `sentune.adapt` returns: the run's folder and results (results.json's content), the chosen model loaded on
    first use, the candidates as a table. A run made in a temporary folder (`out=None`) keeps it while this object lives;
    `save(path)` copies it."""

    out: Path
    results: dict
    _tmp: tempfile.TemporaryDirectory | None = field(default=None, repr=False)
    _model: Any = field(default=None, repr=False)

    @property
    def choice(self) -> str:
        """The chosen candidate's name (`unchanged`: the model as given was kept)."""
        return self.results["choice"]["name"]

    @property
    def reason(self) -> str:
        """Why it was chosen, in a sentence (the same as results.md's)."""
        return self.results["choice"]["reason"]

    @property
    def model(self) -> SentenceTransformer:
        """The chosen model (OUT/model), loaded on the CPU on first use."""
        if self._model is None:
            from sentence_transformers import SentenceTransformer

            self._model = SentenceTransformer(str(self.out / "model"), device="cpu")
        return self._model

    @property
    def candidates(self) -> pandas.DataFrame:
        """One row per candidate: its kind, its score with the 95 % interval on the selection and confirmation halves of the
        dev set and on the test set (NaN where it was not scored), the difference from the unchanged model, minutes,
        whether it could be chosen and whether it was."""
        import pandas

        rows = []
        for name, c in self.results["candidates"].items():
            row: dict[str, Any] = {"candidate": name, "kind": c.get("kind")}
            for part in ("select", "confirm", "test"):
                scored = c.get(part) or {}
                versus = scored.get("vs_unchanged") or {}
                row[part] = scored.get("score", float("nan"))
                row[f"{part}_low"], row[f"{part}_high"] = scored.get("low", float("nan")), scored.get("high", float("nan"))
                row[f"{part}_vs_unchanged"] = versus["candidate"] - versus["baseline"] if versus else float("nan")
            row |= {"minutes": c.get("seconds", 0.0) / 60, "eligible": bool(c.get("eligible")), "chosen": bool(c.get("chosen"))}
            row["stopped"] = (c.get("stopped") or {}).get("reason")
            rows.append(row)
        return pandas.DataFrame(rows).set_index("candidate")

    @property
    def index(self) -> Index | None:
        """A search run's index of the chosen system over the documents (None for pairs). A run in a temporary folder
        (`out=None`): the index keeps the folder while it lives, as this object does, so it outlives the result."""
        from sentune.api.index import Index
        from sentune.search.folder import IndexFolder
        from sentune.search.index import SearchIndex

        if not IndexFolder(self.out).has_index():
            return None
        return Index(self.out, SearchIndex.open(self.out, model_argument="model="), tmp=self._tmp)

    def save(self, path: str | Path) -> Path:
        """Copy the run's folder (model, results, report, candidates) to `path`, a new folder; returns it."""
        target = Path(path)
        if target.resolve() != self.out.resolve():
            shutil.copytree(self.out, target)
        return target

    def _repr_html_(self) -> str:
        import html

        return (
            f"<p><b>sentune adapt</b>: chose <code>{html.escape(self.choice)}</code>: {html.escape(self.reason)}</p>"
            + self.candidates.to_html(float_format=lambda x: f"{x:.2f}", na_rep="—")
            + f"<p>folder: <code>{html.escape(str(self.out))}</code></p>"
        )

    def __repr__(self) -> str:
        return f"AdaptResult(choice={self.choice!r}, out={str(self.out)!r})"


@names_python_arguments(OPTIONS)
def adapt(
    model: Model = "default",
    corpus: given.Given = None,
    dev: given.Given = None,
    train: given.Given = None,
    test: given.Given = None,
    methods: str | Sequence[str] | None = None,
    time: str | float | None = None,
    out: str | Path | None = None,
    *,
    dev_qrels: given.Given = None,
    test_qrels: given.Given = None,
    queries_from: given.Given = None,
    corpus_column: str | None = None,
    columns: Mapping[str, str] | None = None,
    example: str | None = None,
    example_train: bool = False,
    labels: bool = True,
    budget: str | None = None,
    sed_members: int = 3,
    reference: bool = False,
    low_memory: bool = False,
    seed: int = 0,
    data: str | Path | None = None,
    backend: str = "torch",
    device: str | None = None,
    prune: bool = False,
    allow_modified: bool = False,
    show_progress: bool = False,
    command: str | None = None,
    started: float | None = None,
) -> AdaptResult:
    """Adapt `model` to a domain: every candidate method tried on `corpus`, each scored on the `dev` set (half selects,
    half confirms), the model kept unless a candidate is confirmed better; the same run as `sentune adapt` (docs/adapt.md).

    Args:
        model: a name (`"default"`: all-MiniLM-L6-v2, a Hugging Face id), a folder, or a `SentenceTransformer` in memory
            (saved into OUT/input-model for the run to load). Search: `"A,B"` adapts A and fuses B with it and BM25
            (the `multi-dense` candidate).
        corpus: unlabelled text: a path (.txt, .jsonl, .csv), a list of strings, or (a search run) BEIR-style documents
            `{"_id", "title", "text"}`; a `datasets.Dataset` or pandas DataFrame of either.
        dev: scored pairs, a path or `(text1, text2, score)` rows (at least 100); for search, queries (a dict of
            id → text, or a BEIR folder) with `dev_qrels`. None: STS-B dev from the data directory.
        train: labelled pairs the supervised candidates train on; for search, queries with judgements: a BEIR folder,
            `(queries, qrels)` or a `sentune.data.kinds.RetrievalSet`.
        test: scored pairs (or queries with `test_qrels`), scored for every candidate and reported, never chosen on.
        methods: the candidates, a list or a comma-separated string (None: the defaults).
        time: the time the whole run may take, seconds or `"30m"`, `"1.5h"` (default: 30 minutes, what it leaves out named).
        out: the run's folder (run again with the same arguments to resume); None: a temporary folder, kept while the
            returned object lives.
        dev_qrels, test_qrels: judgements, a path, a dict query id → {document id: grade}, or (query, document, grade) rows.
        columns: a DataFrame's or Dataset's column names mapped to sentune's (`{"question1": "sentence1", "question2":
            "sentence2", "is_duplicate": "score"}`), as pandas' `rename(columns=...)`, for every table given; without
            it, sentune's names are read, and sentence-transformers' (`label` for the score).
        example: a ready-made domain (sick, qqp, mrpc, stsb, scifact, quora) built from the data directory `data`.
        Others: as the options of `sentune adapt` of the same name.

    `command`: the command line that made the run, recorded in results.json; `started`: when `time` starts counting
    (a `time.monotonic()` value; default: now).

    Data given as objects are read into sentune's data kinds (sentune.api.given) and handed to the run as they are;
    a path is read into the same kinds (sentune.adaptation.inputs.prepare). What the run used is written once under OUT/data,
    its record, never read back. Progress lines are log records of the `sentune.progress` logger (INFO,
    sentune.core.progress); `show_progress` adds progress bars.
    """
    started = clock.monotonic() if started is None else started
    from sentune.adaptation.budget import Budget
    from sentune.adaptation.candidates import parse_methods
    from sentune.adaptation.time_plan import parse_time

    methods_text = methods if methods is None or isinstance(methods, str) else ",".join(methods)
    parsed_methods, parsed_budget = parse_methods(methods_text), Budget.parse(budget)  # checked before any file is read
    time_limit = float(time) if isinstance(time, int | float) else parse_time(time)
    if sed_members < 2:
        raise UserError(f"--sed-members {sed_members}: an ensemble needs at least 2 members")
    if example_train and (not example or train is not None):
        raise UserError("--example-train: give it with --example, instead of --train")
    from sentune.adaptation.candidates.multi_dense import split_models

    if out is not None:
        check_out(Path(out), MARKS, "an adapt run", WRITTEN_FIRST)
    model, more_models = split_models(model)  # `--model A,B`: B fused with A by the multi-dense candidate
    check_models(model, *more_models)  # a mistyped name, before anything is written
    tmp = tempfile.TemporaryDirectory(prefix="sentune-adapt-") if out is None else None
    folder = Path(tmp.name if tmp is not None else out)  # type: ignore[arg-type]
    data_dir = None
    if example:
        from sentune.adaptation.examples import check_example

        check_example(example)  # the name, before the data directory it is built from
    if example or dev is None:  # the data directory is read only for an example or the default dev pairs
        from sentune.data.catalog import resolve_data_dir

        data_dir = resolve_data_dir(str(data) if data is not None else None)
    if example_train:
        from sentune.adaptation.examples import has_train

        assert data_dir is not None and example is not None
        if not has_train(example, data_dir):
            raise UserError(f"--example-train: the example {example} has no labelled train split apart from its dev and test in {data_dir}")
    with refused_leaves_nothing(folder, tmp.cleanup if tmp is not None else None):  # a refused run leaves nothing behind
        files = _data(corpus, dev, train, test, dev_qrels, test_qrels, queries_from, columns)
        names: dict[str, str] = {}
        if example:
            from sentune.adaptation.examples import write_example

            assert data_dir is not None
            written = write_example(example, data_dir, folder / "example", allow_modified=allow_modified)
            say(f"example {example}: {written.about}")
            # the example's data as written (its files under OUT/example are the record, not read back)
            files |= {"dev_qrels": None, "test_qrels": None} | {part: written.data[part] for part in ("corpus", "dev", "test")}
            names = {"corpus": str(written.corpus), "dev": str(written.dev), "test": str(written.test)}
            if example_train:
                files["train"], names["train"] = written.data.get("train"), str(written.train)
                if files["train"] is None:  # every pair or query dev left is also a dev or test one
                    raise UserError(f"--example-train: the example {example} leaves no train query apart from its dev and test in {data_dir}")
        if files["corpus"] is None and not (isinstance(files["dev"], Path) and files["dev"].is_dir()):
            raise UserError("--corpus FILE (or --example NAME) is required")
        from dataclasses import replace

        from sentune.adaptation.inputs import AdaptConfig, prepare

        config = AdaptConfig(
            corpus=files["corpus"],
            model=saved_model(model, folder / INPUT_MODEL),
            more_models=more_models,
            corpus_column=corpus_column,
            dev=files["dev"],
            test=files["test"],
            dev_qrels=files["dev_qrels"],
            test_qrels=files["test_qrels"],
            queries_from=files["queries_from"],
            train=files["train"],
            labels=labels,
            methods=parsed_methods,
            budget=parsed_budget,
            time_limit=time_limit,
            sed_members=sed_members,
            reference=reference,
            low_memory=low_memory,
            seed=seed,
            example=example,
            show_progress=show_progress,
            backend=backend,
            allow_modified=allow_modified,
            names=names,
        )
        inputs = prepare(config, folder, data_dir)  # every file read and checked before torch loads
        if more_models and not inputs.task.search:  # multi-dense fuses them with BM25: a search run's candidate
            raise UserError(f"--model {','.join([config.model, *more_models])}: several models are fused for search data only; give one")
    config = replace(config, device=resolve(device))
    from sentune.adaptation.run import adapt as run_adapt
    from sentune.adaptation.run import prune as prune_candidates

    results = run_adapt(config, folder, data_dir=data_dir, command=command, inputs=inputs, started=started)
    if prune:
        removed = prune_candidates(folder, results["choice"]["name"])
        say(f"--prune: removed {len(removed)} model folders of candidates not chosen")
    return AdaptResult(folder, results, tmp)


def _data(corpus, dev, train, test, dev_qrels, test_qrels, queries_from, columns: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Each input as adapt takes it (sentune.adaptation.inputs.AdaptConfig): a path as given, objects as their data kind
    (sentune.api.given), each bad row one error naming the option."""
    from sentune.data.beir import RetrievalSet
    from sentune.data.kinds import Pairs, ScoredPairs, Sentences

    def kind(value, of: type, option: str):
        return None if value is None else Path(value) if given.is_path(value) else given.as_kind(of, value, option, columns)

    generated = {"queries_from": kind(queries_from, Pairs, "--queries-from")}
    documents = corpus is not None and not given.is_path(corpus) and given.is_documents(corpus)
    if documents or dev_qrels is not None or test_qrels is not None or isinstance(dev, Mapping | RetrievalSet):  # a search run
        train_split = train if train is None or given.is_path(train) or isinstance(train, RetrievalSet) else tuple(train)
        splits = {"dev": (dev, dev_qrels), "test": (test, test_qrels)}
        splits["train"] = train_split if isinstance(train_split, tuple) else (train_split, None)
        return given.search_kinds(corpus, splits, columns) | generated
    return generated | {
        "corpus": kind(corpus, Sentences, "--corpus"),
        "dev": kind(dev, ScoredPairs, "--dev"),
        "test": kind(test, ScoredPairs, "--test"),
        "train": kind(train, ScoredPairs, "--train"),
        "dev_qrels": None,
        "test_qrels": None,
    }
