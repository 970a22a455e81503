"""The settings of one `sentune adapt` run (AdaptConfig) and the user's data as read, checked and split (Inputs):
everything that can be wrong with the options and files is found here, before torch or any model loads, so a mistake
answers in a second and leaves nothing on disk (sentune.adaptation.run does the work).

The data come as sentune's data kinds (sentune.data.kinds: `Sentences` or a search `Corpus`, `ScoredPairs` or a
`RetrievalSet`, `Pairs`) or as the paths of files, which `prepare` reads into those kinds first (every bad line one
error naming file:line): from then on one path, on objects. What the run used is written once under OUT/data, as the
record of the run, and never read back within it."""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar, Literal

import numpy as np

from sentune.adaptation.budget import AdaptError, Budget
from sentune.adaptation.decide import MIN_DEV_PAIRS, DevSplit, split_dev
from sentune.adaptation.evidence import kind_shift
from sentune.adaptation.names import RULE
from sentune.data.beir import Corpus, Document, RetrievalSet, write_beir_folder
from sentune.data.catalog import load_task, select_tasks, sha256_of
from sentune.data.kinds import Pairs, Sentences
from sentune.data.readers import read_paraphrase_pairs
from sentune.data.text_files import normalise
from sentune.data.user_data import ScoredPairs, pairs_as_written, read_scored_pairs, read_user_corpus, write_corpus, write_scored_pairs
from sentune.training.runs import claim

logger = logging.getLogger(__name__)

if TYPE_CHECKING:
    from sentune.tasks.user_pairs import Scorer
    from sentune.tasks.user_queries import QueryScorer


@dataclass(frozen=True)
class AdaptConfig:
    # The data: each a path (read by prepare) or its kind in memory (sentune.adaptation.api passes Python data so).
    corpus: Path | Sentences | Corpus | None  # None only for retrieval with a BEIR folder as --dev (its corpus.jsonl)
    model: str = "default"
    more_models: tuple[str, ...] = ()  # search: the models --model names after the first (A,B), fused with it (multi-dense)
    corpus_column: str | None = None
    dev: Path | ScoredPairs | RetrievalSet | None = None  # None: STS-B dev from the data directory
    test: Path | ScoredPairs | RetrievalSet | None = None
    dev_qrels: Path | None = None  # retrieval: --dev is then a queries file (sentune.adaptation.retrieval_inputs)
    test_qrels: Path | None = None
    queries_from: Path | Pairs | None = None  # retrieval: generated `query<TAB>passage` pairs, the GenQ candidate's training data
    train: Path | ScoredPairs | RetrievalSet | None = (
        None  # labelled pairs the supervised candidates train on, apart from dev and test (those they never read also judge)
    )
    labels: bool = True  # False (--no-labels): the label-free candidates only
    methods: tuple[str, ...] | None = None  # None: the task's defaults (sentune.adaptation.names.default_methods)
    budget: Budget = field(default_factory=Budget)
    time_limit: float | None = None  # --time, seconds: the candidates planned to fit (sentune.adaptation.time_plan); not a claimed setting
    sed_members: int = 3
    reference: bool = False  # also train sentence-transformers' SimCSE recipe, reported beside the candidates
    low_memory: bool = False  # gradient checkpointing and large blocks unmapped when freed: the same candidates in less memory, more time
    seed: int = 0  # of the dev split, the bootstrap resamples and the permutations
    example: str | None = None  # the --example it came from, for the report
    show_progress: bool = True
    device: str = "cpu"  # where every model of the run loads and trains (the CLI resolves --device)
    allow_modified: bool = False  # the default dev pairs (STS-B dev) may differ from the catalog (--allow-modified-data)
    backend: str = "torch"  # how candidates are scored on dev and test: torch, or onnx (their ONNX graphs; training stays torch)
    # What training candidates train: the model's own token pooling without its trailing Normalize when its pipeline is
    # that simple (set by adapt(); CT's dot product and TSDAE's decoder need the raw vector), else 'model'.
    training_pooling: str = "model"
    # What each input given in memory is called in messages and the report (an example's file, "--dev (Python data)");
    # a path is called by itself (`named`).
    names: dict[str, str] = field(default_factory=dict)

    def named(self, option: str) -> str:
        """What `option` (corpus, dev, test, train) was given as: its path, or its name in `names`."""
        value = getattr(self, option)
        return self.names.get(option) or (str(value) if isinstance(value, Path) else f"--{option} (Python data)")


@dataclass(frozen=True)
class PairsTask:
    """What a pairs run scores and trains on: scored dev (and test) pairs, and --train's labelled pairs."""

    dev: ScoredPairs
    test: ScoredPairs | None
    train: ScoredPairs | None  # --train as adapt trains on it (rescaled onto the dev scale when it was on another)
    search: ClassVar[Literal[False]] = False

    def scorer(self, show_progress: bool) -> Scorer:
        """Scores the dev and test pairs."""
        from sentune.tasks.user_pairs import PairScorer

        return PairScorer({"dev": self.dev} | ({"test": self.test} if self.test is not None else {}), show_progress)

    def train_units(self) -> list | None:
        return None if self.train is None else self.train.pairs


@dataclass(frozen=True)
class SearchTask:
    """What a search run scores and trains on: queries judged against the documents (dev, test, and --train's)."""

    dev: RetrievalSet
    test: RetrievalSet | None
    train: RetrievalSet | None
    documents: list[Document]  # the corpus every query is ranked against
    search: ClassVar[Literal[True]] = True

    def scorer(self, show_progress: bool) -> QueryScorer:
        """Every dev and test query against the whole corpus (adapt then ranks the selection queries against their
        pool, sentune.adaptation.search_context)."""
        from sentune.tasks.user_queries import QueryScorer

        return QueryScorer.whole({"dev": self.dev} | ({"test": self.test} if self.test is not None else {}), show_progress)

    def train_units(self) -> list | None:
        return None if self.train is None else self.train.queries


@dataclass(frozen=True)
class Inputs:
    corpus: list[str]  # what the training methods and post-processors read: sentences, or passages of the documents
    task: PairsTask | SearchTask  # made once, by prepare: whether the run is a search one, and its typed data
    dev_label: str  # what the dev set is, for the report
    split: DevSplit  # which dev pairs (or queries) select and which confirm (sentune.adaptation.decide)
    generated: list[tuple[str, str]] | None = None  # search: --queries-from's (query, passage) pairs
    train_sha256: str | None = None  # the digest of --train as written under OUT/data (None without it)
    test_label: str | None = None  # what the test set is (its path, or what AdaptConfig.names calls it), for the report
    train_shift: str | None = None  # pairs: why --train's labels are of another kind than the dev pairs' (sentune.adaptation.evidence)

    @property
    def dev(self) -> ScoredPairs | RetrievalSet:
        return self.task.dev

    @property
    def test(self) -> ScoredPairs | RetrievalSet | None:
        return self.task.test

    def scorer(self, show_progress: bool) -> Scorer:
        """Scores the dev and test sets (a search on dev may ask for dev alone: it never encodes test)."""
        return self.task.scorer(show_progress)


DEFAULT_DEV = "STS-B-dev"  # without --dev (the report says so)
MIN_CORPUS_SENTENCES = 100
# --train: the supervised candidates train batches of 16 for 4 epochs; on fewer pairs (or queries) than the selection
# half of the smallest dev set they could train on instead, a train file gives them less than leaving it out would.
MIN_TRAIN_UNITS = MIN_DEV_PAIRS // 2


def prepare(config: AdaptConfig, out: Path, data_dir: Path | None) -> Inputs:
    """Read and check the user's files (every problem names file:line before any model loads) and claim the folder for
    these settings; only then write what is used under OUT/data (a refused run leaves a finished one untouched)."""
    from sentune.adaptation.retrieval_inputs import is_retrieval

    if is_retrieval(config.dev, config.test, config.dev_qrels, config.test_qrels):
        return _prepare_retrieval(config, out)
    if config.queries_from is not None:
        raise AdaptError("--queries-from: generated queries train a retrieval candidate; give --dev as retrieval queries (a BEIR folder, or --dev-qrels)")
    if config.corpus is None:
        raise AdaptError("--corpus FILE (or --example NAME) is required")
    corpus = config.corpus.unique().texts if isinstance(config.corpus, Sentences) else read_user_corpus(config.corpus, config.corpus_column)  # type: ignore[arg-type]
    if len(corpus) < MIN_CORPUS_SENTENCES:
        raise AdaptError(
            f"--corpus {config.named('corpus')}: {len(corpus)} distinct sentence(s); adapt needs at least {MIN_CORPUS_SENTENCES} to train or fit on"
        )
    given_dev = _scored_pairs(config.dev) if config.dev is not None else None
    if given_dev is not None:
        dev_rows, dev_label = [(p.a, p.b, p.score) for p in given_dev.pairs], config.named("dev")
    else:
        if data_dir is None:
            raise AdaptError("--dev not given and no data directory (--data or SENTUNE_DATA) for the STS-B dev pairs it then uses")
        examples = load_task(select_tasks(DEFAULT_DEV)[0], data_dir, allow_modified=config.allow_modified)
        dev_rows, dev_label = [(p.a, p.b, p.score) for split in examples.values() for p in split], f"{DEFAULT_DEV} (no --dev given)"
    if len(dev_rows) < MIN_DEV_PAIRS:
        raise AdaptError(
            f"--dev {config.named('dev') if config.dev is not None else DEFAULT_DEV}: {len(dev_rows)} pairs; adapt needs at least {MIN_DEV_PAIRS} (half select, half confirm the choice; "
            "with fewer, only gains of many points could ever be confirmed, see benchmarks/results/adapt_calibration.md)"
        )
    test = _scored_pairs(config.test) if config.test is not None else None
    if test is not None:
        _warn_shared_pairs(dev_rows, test, config)
    train_rows, train_shift = _train_pairs(config, dev_rows, test) if config.train is not None else (None, None)
    split = split_dev(np.array([r[2] for r in dev_rows]), seed=config.seed)
    files = {
        "corpus.txt": lambda path: write_corpus(path, corpus),
        "dev.tsv": lambda path: write_scored_pairs(path, dev_rows),
        "dev-select.tsv": lambda path: write_scored_pairs(path, [dev_rows[i] for i in split.select]),
    }
    if test is not None:
        files["test.tsv"] = lambda path: write_scored_pairs(path, [(p.a, p.b, p.score) for p in test.pairs])
    parts = {"corpus": ["corpus.txt"], "dev": ["dev.tsv"], "test": ["test.tsv"] if test else []}
    if train_rows is not None:
        files["train.tsv"] = lambda path: write_scored_pairs(path, train_rows)
        parts["train"] = ["train.tsv"]
    data, train_sha256 = _write_claimed(out, config, files, parts)
    task = PairsTask(  # the pairs the user gave, as kinds (each names its file and line); OUT/data records them
        _as_read(given_dev) if given_dev is not None else pairs_as_written(data / "dev.tsv", dev_rows),  # STS-B's: their record is their only file here
        _as_read(test) if test is not None else None,
        pairs_as_written(data / "train.tsv", train_rows) if train_rows is not None else None,  # as trained on: on the dev scale
    )
    return Inputs(corpus, task, dev_label, split, train_sha256=train_sha256, test_label=_test_label(config), train_shift=train_shift)


def _prepare_retrieval(config: AdaptConfig, out: Path) -> Inputs:
    """prepare() for documents and queries (sentune.adaptation.retrieval_inputs): OUT/data holds corpus.txt (the passages the
    training methods read) and the dev (and test) sets as BEIR folders with the documents."""
    from sentune.adaptation.retrieval_inputs import read_retrieval_inputs
    from sentune.data.passages import passages

    if config.dev is None:
        raise AdaptError("--dev: a retrieval run needs dev queries (a BEIR folder, or a queries file with --dev-qrels)")
    documents, dev, test = read_retrieval_inputs(config.corpus, config.dev, config.test, config.dev_qrels, config.test_qrels)  # type: ignore[arg-type]
    corpus = passages([d.text for d in documents])
    if len(corpus) < MIN_CORPUS_SENTENCES:
        raise AdaptError(f"--corpus: {len(documents)} documents make {len(corpus)} passages; adapt needs at least {MIN_CORPUS_SENTENCES} to train or fit on")
    if dev.units < MIN_DEV_PAIRS:
        raise AdaptError(
            f"--dev {config.named('dev')}: {dev.units} queries with a relevant document; adapt needs at least {MIN_DEV_PAIRS} (half select, half confirm the choice)"
        )
    generated = (
        config.queries_from.pairs
        if isinstance(config.queries_from, Pairs)
        else read_paraphrase_pairs(config.queries_from, user_file=True)
        if config.queries_from is not None
        else None
    )
    train = _train_queries(config, documents, dev, test) if config.train is not None else None
    split = split_dev(dev.gold, seed=config.seed)
    files = {"corpus.txt": lambda path: write_corpus(path, corpus), "dev": lambda path: write_beir_folder(path, dev, "dev")}
    if test is not None:
        files["test"] = lambda path: write_beir_folder(path, test, "test")
    parts = {
        "corpus": ["corpus.txt", "dev/corpus.jsonl"],
        "dev": ["dev/queries.jsonl", "dev/qrels/dev.tsv"],
        "test": ["test/queries.jsonl", "test/qrels/test.tsv"] if test else [],
    }
    if train is not None:
        files["train"] = lambda path: write_beir_folder(path, train, "train")
        parts["train"] = ["train/queries.jsonl", "train/qrels/train.tsv"]
    if generated is not None:
        files["queries-from.tsv"] = lambda path: path.write_text("".join(f"{q}\t{p}\n" for q, p in generated), encoding="utf-8")
        parts["queries_from"] = ["queries-from.tsv"]
    _, train_sha256 = _write_claimed(out, config, files, parts)
    task = SearchTask(dev, test, train, documents)
    return Inputs(corpus, task, config.named("dev"), split, generated=generated, train_sha256=train_sha256, test_label=_test_label(config))


def _write_claimed(out: Path, config: AdaptConfig, files: dict, parts: dict[str, list[str]]) -> tuple[Path, str | None]:
    """Write `files` into a scratch folder, claim OUT for these settings (hashes of each part's files), and only then
    move them into OUT/data: a refused run leaves a finished one untouched. Returns OUT/data and the digest of --train
    as written there (train.tsv, or every file of train/; None without --train): what the candidates that read it
    record (Candidate.depends_on)."""
    out.mkdir(parents=True, exist_ok=True)
    data = out / "data"
    with tempfile.TemporaryDirectory(dir=out, prefix=".incoming-") as incoming:
        for name, write in files.items():
            write(Path(incoming) / name)
        digests = {part: "+".join(sha256_of(Path(incoming) / name) for name in names) or None for part, names in parts.items()}
        train = next((Path(incoming) / name for name in ("train.tsv", "train") if name in files), None)
        train_sha256 = None if train is None else "+".join(sha256_of(f) for f in ([train] if train.is_file() else sorted(train.rglob("*.*"))))
        _claim(out, config, digests)
        data.mkdir(exist_ok=True)
        for stale in ("train.tsv", "train"):  # an earlier run's --train: this one has none, or writes its own below
            shutil.rmtree(data / stale) if (data / stale).is_dir() else (data / stale).unlink(missing_ok=True)
        for name in files:
            if (data / name).is_dir():  # the same settings were claimed: the same contents
                shutil.rmtree(data / name)
            os.replace(Path(incoming) / name, data / name)
    return data, train_sha256


def _train_pairs(config: AdaptConfig, dev_rows: list[tuple[str, str, float]], test: ScoredPairs | None) -> tuple[list[tuple[str, str, float]], str | None]:
    """--train's labelled pairs, refused (one line naming both files) when one is also a dev or test pair: a pair it
    trained on would then select, confirm or test it; and why their labels as written are of another kind than the dev
    pairs' (None: the same; sentune.adaptation.evidence.kind_shift: such pairs train, and never judge)."""
    assert config.train is not None
    found = _scored_pairs(config.train)
    dev_name, train_name = config.named("dev") if config.dev is not None else DEFAULT_DEV, config.named("train")
    if len(found.pairs) < MIN_TRAIN_UNITS:
        raise AdaptError(
            f"--train {train_name}: {len(found.pairs)} labelled pairs; the supervised candidates need at least {MIN_TRAIN_UNITS} (without --train "
            f"they train on the selection half of the dev pairs, at least {MIN_TRAIN_UNITS}, scored out of fold)"
        )
    graded_dev = bool({r[2] for r in dev_rows} - {0.0, 1.0})
    if found.kind == "scores" and not graded_dev:  # a 0/1 loss cannot read graded scores
        raise AdaptError(f"--train {train_name}: graded scores, but the dev pairs ({dev_name}) have 0/1 labels; give 0/1 training pairs")
    for other, pairs in (("--dev", [(a, b) for a, b, _ in dev_rows]), ("--test", [(p.a, p.b) for p in test.pairs] if test else [])):
        seen = {frozenset(pair) for pair in pairs}
        shared = [p for p in found.pairs if frozenset((p.a, p.b)) in seen]
        if shared:
            where = dev_name if other == "--dev" else config.named("test")
            raise AdaptError(
                f"--train {shared[0].source.path}:{shared[0].source.line}: {len(shared)} of its pairs are also pairs of {other} {where}; "
                "a train file must share no pair with the dev or test set"
            )
    rows = [(p.a, p.b, p.score) for p in found.pairs]
    shift = kind_shift(np.array([r[2] for r in dev_rows]), np.array([r[2] for r in rows]))
    if found.kind == "binary" and graded_dev:
        logger.warning(
            "--train %s has 0/1 labels, the dev pairs (%s) graded scores: the supervised candidate trains CoSENT on them, each pair labelled 1 "
            "ranked above each pair labelled 0 of its batch; the dev pairs select and confirm as usual",
            train_name,
            dev_name,
        )
        return rows, shift
    return (_on_the_dev_scale(rows, [r[2] for r in dev_rows], train_name, dev_name) if found.kind == "scores" else rows), shift


def _on_the_dev_scale(rows: list[tuple[str, str, float]], dev_scores: list[float], train: str, dev_name: str) -> list[tuple[str, str, float]]:
    """Graded --train scores outside the range of the dev scores (0-100 against 0-5) are rescaled linearly onto it, and
    the user told: the supervised candidate's CoSENT loss reads only the order of the scores, which this keeps, but the
    files then agree on what a score means. (A file whose pairs all score alike is refused when it is read.)"""
    low, high = min(dev_scores), max(dev_scores)
    train_low, train_high = min(r[2] for r in rows), max(r[2] for r in rows)
    if low <= train_low and train_high <= high:
        return rows
    scale = (high - low) / (train_high - train_low)
    logger.warning(
        "--train %s: scores from %g to %g, the dev pairs (%s) from %g to %g: rescaled linearly onto %g-%g (the supervised candidate's "
        "CoSENT loss reads only their order, which this keeps)",
        train,
        train_low,
        train_high,
        dev_name,
        low,
        high,
        low,
        high,
    )
    return [(a, b, low + (score - train_low) * scale) for a, b, score in rows]


def _train_queries(config: AdaptConfig, documents: list[Document], dev: RetrievalSet, test: RetrievalSet | None) -> RetrievalSet:
    """Search: --train's queries and judgements (a BEIR folder with qrels/train.tsv) over the same documents, refused
    (one line naming both) when a query is also a dev or test query."""
    from sentune.adaptation.retrieval_inputs import query_set

    assert config.train is not None
    train = config.train if isinstance(config.train, RetrievalSet) else query_set(config.train, None, documents, "train", "--train")  # type: ignore[arg-type]
    if train.units < MIN_TRAIN_UNITS:
        raise AdaptError(
            f"--train {config.named('train')}: {train.units} queries with a relevant document; the supervised candidate needs at least {MIN_TRAIN_UNITS} "
            f"(without --train it trains on the selection half of the dev queries, at least {MIN_TRAIN_UNITS}, scored out of fold)"
        )
    for option, other in (("--dev", dev), ("--test", test)):
        shared = [q for q in train.queries if other is not None and q.text in {o.text for o in other.queries}]
        if shared:
            raise AdaptError(
                f"--train {shared[0].source.path}:{shared[0].source.line}: {len(shared)} of its queries are also queries of {option} "
                f"{config.named('dev' if option == '--dev' else 'test')}; a train set must share no query with the dev or test set"
            )
    return train


def _warn_shared_pairs(dev_rows: list[tuple[str, str, float]], test: ScoredPairs, config: AdaptConfig) -> None:
    """A test pair that is also a dev pair (either order) was seen by the choice: its test score proves less."""
    seen = {frozenset((a, b)) for a, b, _ in dev_rows}
    shared = sum(frozenset((p.a, p.b)) in seen for p in test.pairs)
    if shared:
        logger.warning(
            "%d of the %d test pairs of %s are also dev pairs: the choice has seen them, so their test score does not measure it independently",
            shared,
            len(test.pairs),
            config.named("test"),
        )


def _test_label(config: AdaptConfig) -> str | None:
    return config.named("test") if config.test is not None else None


def _as_read(pairs: ScoredPairs) -> ScoredPairs:
    """The pairs with their texts as every reader gives them (sentune.data.text_files.normalise: pairs given in memory
    may hold runs of white space), each keeping its source."""
    if all(p.a == normalise(p.a) and p.b == normalise(p.b) for p in pairs.pairs):
        return pairs
    return replace(pairs, pairs=[replace(p, a=normalise(p.a), b=normalise(p.b)) for p in pairs.pairs])


def _scored_pairs(value: Path | ScoredPairs | RetrievalSet | None) -> ScoredPairs:
    """Pairs given in memory as they are, a file read (a search set here is a pairs run given a folder: its reader says so)."""
    if isinstance(value, ScoredPairs):
        return value
    if value is None or isinstance(value, RetrievalSet):
        raise AdaptError("a pairs run needs scored pairs, not queries with judgements; give the documents as --corpus")
    return read_scored_pairs(value)


def _claim(out: Path, config: AdaptConfig, digests: dict[str, str | None]) -> None:
    """Record the settings every candidate depends on; a folder holding other settings is refused, never mixed. The
    methods are not among them: a second run may add candidates to a finished one. Nor is --train: only the supervised
    candidates and wise read it, and their records name the train data they read (Candidate.depends_on), so a second
    run with another --train (or none) redoes those and reads the rest back."""
    settings = {
        "model": config.model,
        "rule": RULE,
        "corpus_sha256": digests["corpus"],
        "dev_sha256": digests["dev"],
        "test_sha256": digests["test"],
        **({"queries_from_sha256": digests["queries_from"]} if "queries_from" in digests else {}),  # absent: older runs resume
        "budget": asdict(config.budget),
        "sed_members": config.sed_members,
        "seed": config.seed,
        **({"backend": config.backend} if config.backend != "torch" else {}),  # absent: torch (older runs resume)
    }
    claim(out / "adapt.json", settings, "an adapt run")
