"""Readers, one function per file format. Every problem is a DataError naming the file and line.

Sentences are whitespace-normalised the way SentEval's batchers see them (`" ".join(s.split())`):
the SentEval copies of STS/STS-B are already lower-cased and tokenised, and SentEval re-joins tokens
with single spaces, so this keeps our numbers comparable with theirs.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sentune.data.beir import read_beir_folder
from sentune.data.text_files import DataError, Source, normalise, read_lines

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Pair:
    a: str
    b: str
    score: float
    source: Source = field(compare=False)  # where it came from is not part of what it is (sentune.data.kinds)


@dataclass(frozen=True)
class Labeled:
    text: str
    label: int | str
    source: Source


@dataclass(frozen=True)
class LabeledPair:
    a: str
    b: str
    label: int | str
    source: Source


def _fields(path: Path, number: int, line: str, minimum: int, what: str, exact: bool = False) -> list[str]:
    if not line.strip():
        raise DataError(path, number, "blank line")
    fields = line.split("\t")
    if len(fields) < minimum or (exact and len(fields) != minimum):
        raise DataError(path, number, f"malformed row: expected {what} ({minimum} tab-separated fields), got {len(fields)}")
    return fields


def _score(path: Path, number: int, text: str, low: float | None = None, high: float | None = None) -> float:
    try:
        value = float(text)
    except ValueError:
        raise DataError(path, number, f"malformed row: score {text.strip()!r} is not a number") from None
    if math.isnan(value) or (low is not None and value < low) or (high is not None and value > high):
        raise DataError(path, number, f"score {value} outside [{low}, {high}]")
    return value


def _nonempty(path: Path, number: int, text: str, column: str) -> str:
    text = normalise(text)
    if not text:
        raise DataError(path, number, f"empty {column}")
    return text


def read_sts_pairs(input_path: str | Path, gold_path: str | Path) -> list[Pair]:
    """SemEval STS `STS.input.X.txt` (two tab-separated sentences per line) with `STS.gs.X.txt`.

    A blank gold line means the pair was not scored: SentEval drops it, and so do we (counted, logged).
    """
    input_path, gold_path = Path(input_path), Path(gold_path)
    inputs, golds = read_lines(input_path), read_lines(gold_path)
    if len(inputs) != len(golds):
        raise DataError(gold_path, None, f"{len(golds)} gold lines but {input_path.name} has {len(inputs)} lines")
    pairs, unscored = [], 0
    for number, (line, gold) in enumerate(zip(inputs, golds, strict=True), start=1):
        fields = _fields(input_path, number, line, 2, "two sentences")
        if not gold.strip():
            unscored += 1
            continue
        score = _score(gold_path, number, gold, 0.0, 5.0)
        a = _nonempty(input_path, number, fields[0], "first sentence")
        b = _nonempty(input_path, number, fields[1], "second sentence")
        pairs.append(Pair(a, b, score, Source(str(input_path), number)))
    if unscored:
        logger.debug("%s: %d pairs without a gold score skipped (SentEval protocol)", input_path, unscored)
    return pairs


STS17_EN_EN = ("track5.en-en", "2017")  # (file, year): SemEval-2017's English track inside STS-B, 125 dev + 125 test pairs


def read_stsb_csv(path: str | Path, only: tuple[str, str] | None = None) -> list[Pair]:
    """STS Benchmark `sts-{train,dev,test}.csv`: genre, file, year, id, score, s1, s2[, sources]; `only` keeps the rows
    of one (file, year), e.g. STS17_EN_EN."""
    path = Path(path)
    pairs = []
    for number, line in enumerate(read_lines(path), start=1):
        fields = _fields(path, number, line, 7, "genre, file, year, id, score, sentence1, sentence2")
        if only is not None and (fields[1], fields[2]) != only:
            continue
        score = _score(path, number, fields[4], 0.0, 5.0)
        pairs.append(Pair(_nonempty(path, number, fields[5], "sentence1"), _nonempty(path, number, fields[6], "sentence2"), score, Source(str(path), number)))
    if only is not None and not pairs:
        raise DataError(path, None, f"no rows of {only[0]} ({only[1]}) in this file: not the STS Benchmark's own file?")
    return pairs


def _sick_rows(path: Path) -> list[tuple[int, list[str]]]:
    lines = read_lines(path)
    header = lines[0].split("\t")
    if header[:3] != ["pair_ID", "sentence_A", "sentence_B"]:
        raise DataError(path, 1, "expected the SICK header pair_ID<TAB>sentence_A<TAB>sentence_B<TAB>...")
    return [(n, _fields(path, n, line, 5, "pair_ID, sentence_A, sentence_B, relatedness, entailment")) for n, line in enumerate(lines[1:], start=2)]


def read_sick_relatedness(path: str | Path) -> list[Pair]:
    path = Path(path)
    return [
        Pair(_nonempty(path, n, f[1], "sentence_A"), _nonempty(path, n, f[2], "sentence_B"), _score(path, n, f[3], 1.0, 5.0), Source(str(path), n))
        for n, f in _sick_rows(path)
    ]


def read_sick_entailment(path: str | Path) -> list[LabeledPair]:
    path = Path(path)
    out = []
    for n, f in _sick_rows(path):
        label = f[4].strip()
        if label not in ("ENTAILMENT", "NEUTRAL", "CONTRADICTION"):
            raise DataError(path, n, f"unknown entailment label {label!r}")
        out.append(LabeledPair(_nonempty(path, n, f[1], "sentence_A"), _nonempty(path, n, f[2], "sentence_B"), label, Source(str(path), n)))
    return out


def read_corpus(path: str | Path, *, skip_blank: bool = False, user_file: bool = False) -> list[str]:
    """One sentence per line. Blank lines are an error unless skip_blank, which logs how many were skipped."""
    path = Path(path)
    out, blank = [], []
    for number, line in enumerate(read_lines(path, user_file=user_file), start=1):
        text = normalise(line)
        if not text:
            if not skip_blank:
                raise DataError(path, number, "blank line (one sentence per line expected)")
            blank.append(number)
            continue
        out.append(text)
    if blank:
        logger.warning("%s: skipped %d blank lines (first at line %d)", path, len(blank), blank[0])
    return out


def read_labeled_lines(path: str | Path, label: int, *, encoding: str = "utf-8", keep_blank: bool = False) -> list[Labeled]:
    """A SentEval binary-task file (MR/CR/SUBJ/MPQA): one example per line, all with `label`.

    SentEval keeps blank lines as empty examples (CR and MPQA have a few), so its sample counts include
    them; keep_blank=True does the same and says so, otherwise a blank line is an error.
    """
    path = Path(path)
    out, blank = [], []
    for number, line in enumerate(read_lines(path, encoding), start=1):
        text = normalise(line)
        if not text:
            if not keep_blank:
                raise DataError(path, number, "blank line")
            blank.append(number)
        out.append(Labeled(text, label, Source(str(path), number)))
    if blank:
        logger.warning("%s: %d blank lines kept as empty examples, as SentEval does (lines %s)", path, len(blank), blank[:5])
    return out


def read_sst(path: str | Path, *, fine: bool) -> list[Labeled]:
    """SST in SentEval's layout: binary `sentence<TAB>label`; fine-grained `label sentence`."""
    path = Path(path)
    out = []
    for number, line in enumerate(read_lines(path), start=1):
        if not line.strip():
            raise DataError(path, number, "blank line")
        if fine:
            head, _, text = line.partition(" ")
        else:
            text, _, head = line.rpartition("\t")
        if not head.strip().isdigit():
            raise DataError(path, number, f"malformed row: label {head.strip()!r} is not an integer")
        label = int(head)
        if not 0 <= label <= (4 if fine else 1):
            raise DataError(path, number, f"label {label} out of range")
        out.append(Labeled(_nonempty(path, number, text, "sentence"), label, Source(str(path), number)))
    return out


TREC_CLASSES = ("ABBR", "DESC", "ENTY", "HUM", "LOC", "NUM")


def read_trec(path: str | Path) -> list[Labeled]:
    """TREC question classification `COARSE:fine question` (latin-1, as SentEval reads it); coarse label."""
    path = Path(path)
    out = []
    for number, line in enumerate(read_lines(path, encoding="latin-1"), start=1):
        target, sep, rest = line.strip().partition(":")
        if not sep or target not in TREC_CLASSES or " " not in rest:
            raise DataError(path, number, "malformed row: expected 'COARSE:fine question'")
        out.append(Labeled(_nonempty(path, number, rest.split(" ", 1)[1], "question"), TREC_CLASSES.index(target), Source(str(path), number)))
    return out


def read_mrpc(path: str | Path) -> list[LabeledPair]:
    """MRPC `msr_paraphrase_{train,test}.txt`: header, then Quality, #1 ID, #2 ID, #1 String, #2 String."""
    path = Path(path)
    lines = read_lines(path)
    out = []
    for number, line in enumerate(lines[1:], start=2):
        f = _fields(path, number, line, 5, "quality, id1, id2, sentence1, sentence2")
        if f[0] not in ("0", "1"):
            raise DataError(path, number, f"malformed row: quality {f[0]!r} is not 0 or 1")
        out.append(LabeledPair(_nonempty(path, number, f[3], "#1 String"), _nonempty(path, number, f[4], "#2 String"), int(f[0]), Source(str(path), number)))
    return out


NLI_LABELS = ("entailment", "neutral", "contradiction")


def read_nli_senteval(folder: str | Path, split: str) -> list[LabeledPair]:
    """SentEval NLI layout: `s1.SPLIT`, `s2.SPLIT`, `labels.SPLIT`, line-aligned."""
    folder = Path(folder)
    s1, s2, labels = (read_lines(folder / f"{name}.{split}") for name in ("s1", "s2", "labels"))
    if not len(s1) == len(s2) == len(labels):
        raise DataError(folder / f"labels.{split}", None, f"line counts differ: s1 {len(s1)}, s2 {len(s2)}, labels {len(labels)}")
    out = []
    for number, (a, b, label) in enumerate(zip(s1, s2, labels, strict=True), start=1):
        label = label.strip()
        if label not in NLI_LABELS:
            raise DataError(folder / f"labels.{split}", number, f"unknown NLI label {label!r}")
        out.append(
            LabeledPair(
                _nonempty(folder / f"s1.{split}", number, a, "premise"),
                _nonempty(folder / f"s2.{split}", number, b, "hypothesis"),
                label,
                Source(str(folder / f"labels.{split}"), number),
            )
        )
    return out


def read_pair_tsv(path: str | Path, labels: tuple[str, ...] | None = None) -> list[LabeledPair]:
    """`sentence1<TAB>sentence2<TAB>label` (XNLI-en dev, QQP dev/test). Integer labels stay integers."""
    path = Path(path)
    out = []
    for number, line in enumerate(read_lines(path), start=1):
        f = _fields(path, number, line, 3, "sentence1, sentence2, label")
        raw = f[2].strip()
        if labels is not None and raw not in labels:
            raise DataError(path, number, f"unknown label {raw!r}; expected one of {', '.join(labels)}")
        label: int | str = int(raw) if raw.lstrip("-").isdigit() else raw
        out.append(LabeledPair(_nonempty(path, number, f[0], "sentence1"), _nonempty(path, number, f[1], "sentence2"), label, Source(str(path), number)))
    return out


def read_paraphrase_pairs(path: str | Path, *, user_file: bool = False) -> list[tuple[str, str]]:
    """`sentence<TAB>paraphrase` per line (e.g. back-translations made by `sentune paraphrase`, or generated queries
    with their passages)."""
    path = Path(path)
    out = []
    for number, line in enumerate(read_lines(path, user_file=user_file), start=1):
        f = _fields(path, number, line, 2, "sentence, paraphrase", exact=True)
        out.append((_nonempty(path, number, f[0], "sentence"), _nonempty(path, number, f[1], "paraphrase")))
    return out


def read_tuples(path: str | Path, width: int | None = None, *, user_file: bool = False) -> list[tuple[str, ...]]:
    """`anchor<TAB>positive<TAB>negative...` per line, exactly `width` non-empty fields (None: as many as the first line
    has, at least 3) (a search candidate's training rows: a query, a relevant passage and mined hard negatives)."""
    path = Path(path)
    lines = read_lines(path, user_file=user_file)
    if width is None:
        width = max(3, len(lines[0].split("\t")))
    names = ", ".join(["anchor", "positive", *(f"negative {i}" for i in range(1, width - 1))])
    out = []
    for number, line in enumerate(lines, start=1):
        fields = _fields(path, number, line, width, names, exact=True)
        out.append(tuple(_nonempty(path, number, f, "field") for f in fields))
    return out


# One registry from a catalog record's `format` to its reader, shared by evaluation tasks (tasks.yaml)
# and named sets (sets.yaml). A reader takes the record (its `files` by split, or SemEval's `dir` and
# `subsets`, and options such as `keep_blank` and `labels`) and the data directory, and returns the
# examples by split. A new file format is one function and one line here.


def _each_file(read: Callable[..., list]) -> Callable[[Any, Path], dict[str, list]]:
    """A reader of one file, applied to each of the record's files (one per split)."""
    return lambda record, data_dir: {split: read(data_dir / rel) for split, rel in record.files.items()}


def _read_semeval(record: Any, data_dir: Path) -> dict[str, list]:
    base = data_dir / record.dir
    return {s: read_sts_pairs(base / f"STS.input.{s}.txt", base / f"STS.gs.{s}.txt") for s in record.subsets}


def _semeval_paths(record: Any, data_dir: Path) -> list[Path]:
    base = data_dir / record.dir
    return [base / f"STS.{kind}.{s}.txt" for s in record.subsets for kind in ("input", "gs")]


def _read_binary(record: Any, data_dir: Path) -> dict[str, list]:
    pos = read_labeled_lines(data_dir / record.files["pos"], 1, keep_blank=record.keep_blank)
    neg = read_labeled_lines(data_dir / record.files["neg"], 0, keep_blank=record.keep_blank)
    return {"all": pos + neg}


def _read_nli_senteval(record: Any, data_dir: Path) -> dict[str, list]:
    return {split: read_nli_senteval(data_dir / record.dir, split) for split in record.subsets}


def _nli_paths(record: Any, data_dir: Path) -> list[Path]:
    return [data_dir / record.dir / f"{name}.{split}" for split in record.subsets for name in ("s1", "s2", "labels")]


def _read_beir(record: Any, data_dir: Path) -> dict[str, list]:
    (split,) = record.subsets
    return read_beir_folder(data_dir / record.dir, split).examples()


def _beir_paths(record: Any, data_dir: Path) -> list[Path]:
    base = data_dir / record.dir
    return [base / "corpus.jsonl", base / "queries.jsonl", *(base / "qrels" / f"{split}.tsv" for split in record.subsets)]


def _file_paths(record: Any, data_dir: Path) -> list[Path]:
    return [data_dir / rel for rel in record.files.values()]


@dataclass(frozen=True)
class Format:
    read: Callable[[Any, Path], dict[str, list]]
    paths: Callable[[Any, Path], list[Path]] = _file_paths  # every file the record reads (data check)


FORMATS: dict[str, Format] = {
    "semeval": Format(_read_semeval, _semeval_paths),  # STS12-16: dir + subsets
    "semeval-files": Format(lambda r, d: {"test": read_sts_pairs(d / r.files["input"], d / r.files["gold"])}),
    "stsb": Format(_each_file(read_stsb_csv)),
    "stsb-sts17": Format(_each_file(lambda path: read_stsb_csv(path, only=STS17_EN_EN))),  # STS 2017 en-en, from STS-B's files
    "sick": Format(_each_file(read_sick_relatedness)),
    "sick-e": Format(_each_file(read_sick_entailment)),
    "binary": Format(_read_binary),  # files pos / neg
    "sst2": Format(_each_file(lambda path: read_sst(path, fine=False))),
    "sst5": Format(_each_file(lambda path: read_sst(path, fine=True))),
    "trec": Format(_each_file(read_trec)),
    "mrpc": Format(_each_file(read_mrpc)),
    "nli-senteval": Format(_read_nli_senteval, _nli_paths),  # dir + subsets (the splits)
    "pair-tsv": Format(lambda r, d: {split: read_pair_tsv(d / rel, labels=r.labels) for split, rel in r.files.items()}),
    "lines": Format(_each_file(read_corpus)),
    "beir": Format(_read_beir, _beir_paths),  # retrieval: dir + one qrels split as `subsets` (sentune.data.beir)
}


def sentences_of(examples: dict[str, list]) -> list[tuple[str, Source | None]]:
    """Every sentence of a record's examples, with its source line (pairs give two; plain lines have none)."""
    out: list[tuple[str, Source | None]] = []
    for items in examples.values():
        for ex in items:
            if isinstance(ex, str):
                out.append((ex, None))
            elif hasattr(ex, "text"):
                out.append((ex.text, ex.source))
            else:
                out.append((ex.a, ex.source))
                out.append((ex.b, ex.source))
    return out
