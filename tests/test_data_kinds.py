"""Data kinds (sentune.data.kinds): every way of building one gives the same object, bad rows are named (a file's by
file:line, Python data's by where[index]), and the registry holds every kind."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from datasets import Dataset, DatasetDict

from sentune.data.kinds import KINDS, Corpus, Pairs, Qrels, Queries, RetrievalSet, ScoredPairs, Sentences, Tuples, kind
from sentune.data.text_files import DataError


def write(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def every_form(kind_class, rows: list[tuple], columns: tuple[str, ...], file: Path):
    """The kind built from tuples, dicts, a DataFrame, a Dataset, a file and through `of`, in that order."""
    dicts = [dict(zip(columns, row, strict=True)) for row in rows]
    table = {c: [row[i] for row in rows] for i, c in enumerate(columns)}
    return [
        kind_class.from_rows(rows),
        kind_class.from_rows(dicts),
        kind_class.from_pandas(pd.DataFrame(table)),
        kind_class.from_dataset(Dataset.from_dict(table)),
        kind_class.from_file(file),
        kind_class.of(str(file)),
        kind_class.of(pd.DataFrame(table)),
    ]


def test_sentences_from_every_form_are_equal(tmp_path):
    rows = [("a  cat sat",), ("a dog ran",)]
    built = every_form(Sentences, rows, ("text",), write(tmp_path / "corpus.txt", ["a cat  sat", "", "a dog ran", "a dog ran"]))
    assert all(b == Sentences(["a cat sat", "a dog ran"]) and len(b) == 2 for b in built)
    assert Sentences.of(["a cat sat", "a dog ran"]) == built[0]
    assert Sentences.from_pandas(pd.DataFrame({"sentence": ["a cat sat", "a dog ran"]}), columns={"text": "sentence"}) == built[0]
    assert Sentences(["x", "y", "x"]).unique() == Sentences(["x", "y"])


def test_scored_pairs_from_every_form_are_equal_and_their_labels_choose_scale_and_metric(tmp_path):
    rows = [("a cat", "a  feline", 4.5), ("a dog", "a car", 0.5), ("rain", "snow", 2)]
    built = every_form(
        ScoredPairs, rows, ("sentence1", "sentence2", "score"), write(tmp_path / "pairs.tsv", ["a cat\ta feline\t4.5", "a dog\ta car\t0.5", "rain\tsnow\t2"])
    )
    assert all(b == built[0] for b in built)
    assert [(p.a, p.b, p.score) for p in built[0].pairs] == [("a cat", "a feline", 4.5), ("a dog", "a car", 0.5), ("rain", "snow", 2.0)]
    assert (built[0].kind, built[0].metric, built[0].scale) == ("scores", "spearman", (0.5, 4.5))
    binary = ScoredPairs.of([{"sentence1": "a", "sentence2": "b", "label": 1}, {"sentence1": "c", "sentence2": "d", "label": 0}])
    assert (binary.kind, binary.metric, binary.scale) == ("binary", "average_precision", (0.0, 1.0))


def test_pairs_and_tuples_from_every_form_are_equal(tmp_path):
    pairs = every_form(Pairs, [("q one", "p one"), ("q two", "p two")], ("anchor", "positive"), write(tmp_path / "p.tsv", ["q one\tp one", "q two\tp two"]))
    assert all(b == Pairs([("q one", "p one"), ("q two", "p two")]) for b in pairs)
    rows = [("q", "p", "n1", "n2"), ("r", "s", "t", "u")]
    tuples = every_form(Tuples, rows, ("anchor", "positive", "negative_1", "negative_2"), write(tmp_path / "t.tsv", ["q\tp\tn1\tn2", "r\ts\tt\tu"]))
    assert all(b == Tuples(rows) for b in tuples) and tuples[0].width == 4


def test_search_kinds_from_every_form_are_equal(tmp_path):
    docs = [{"_id": "d1", "title": "Cats", "text": "a cat sat"}, {"_id": "d2", "title": "", "text": "a dog ran"}]
    (tmp_path / "qrels").mkdir()
    corpus_file = write(tmp_path / "corpus.jsonl", [json.dumps(d) for d in docs])
    corpus = every_form(Corpus, [tuple(d.values()) for d in docs], ("_id", "title", "text"), corpus_file)
    assert all(c == corpus[0] for c in corpus)
    assert corpus[0].texts == ["Cats a cat sat", "a dog ran"]
    assert Corpus.of(["Cats a cat sat", "a dog ran"]).texts == corpus[0].texts  # plain strings: ids by position
    queries_file = write(tmp_path / "queries.jsonl", [json.dumps({"_id": "q1", "text": "cats?"}), json.dumps({"_id": "q2", "text": "dogs?"})])
    queries = every_form(Queries, [("q1", "cats?"), ("q2", "dogs?")], ("_id", "text"), queries_file)
    assert all(q == queries[0] for q in queries) and Queries.of({"q1": "cats?", "q2": "dogs?"}) == queries[0]
    qrels_file = write(tmp_path / "qrels" / "test.tsv", ["query-id\tcorpus-id\tscore", "q1\td1\t1", "q2\td2\t2"])
    qrels = every_form(Qrels, [("q1", "d1", 1), ("q2", "d2", 2)], ("query-id", "corpus-id", "score"), qrels_file)
    assert all(q == qrels[0] for q in qrels) and Qrels.of({"q1": {"d1": 1}, "q2": {"d2": 2}}) == qrels[0]
    from_python = RetrievalSet.from_parts(docs, {"q1": "cats?", "q2": "dogs?"}, {"q1": {"d1": 1}, "q2": {"d2": 2}})
    from_folder = RetrievalSet.from_folder(tmp_path, "test")
    assert from_python == from_folder
    assert [q.relevant for q in from_python.queries] == [q.relevant for q in from_folder.queries] == [{"d1": 1}, {"d2": 2}]


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: ScoredPairs.of([("a", "b", 1), ("c", " ", 0)]), "pairs[1]: empty sentence2"),
        (lambda: ScoredPairs.of([("a", "b", 1), ("c", "d", "high")]), "pairs[1]: score 'high' is not a number"),
        (lambda: ScoredPairs.of([("a", "b", 1), ("c", "d", 1)]), "pairs: every pair has the label 1"),
        (lambda: ScoredPairs.of(pd.DataFrame({"s1": ["a"]})), "DataFrame: no column 'sentence1', 'sentence2', 'score' for scored-pairs (it has s1)"),
        (lambda: Sentences.of([]), "sentences: no sentences"),
        (lambda: Sentences.of(DatasetDict({"train": Dataset.from_dict({"text": ["a"]})})), "Dataset: a DatasetDict of splits train: give one split"),
        (lambda: Tuples.of([("a", "b", "c"), ("d", "e")]), "tuples[1]: expected 3 fields, as the first row"),
        (lambda: Corpus.of([{"_id": "d1", "text": "x"}, {"_id": "d1", "text": "y"}]), "corpus[1]: id 'd1' already given at corpus[0]"),
        (lambda: RetrievalSet.from_parts(["x", "y"], {"q1": "x?"}, [("q1", "0", 1), ("q9", "1", 1)]), "qrels[1]: query 'q9' is not in the queries"),
        (lambda: kind("nope"), "<data kind>: unknown data kind 'nope'; kinds: sentences, pairs"),
    ],
)
def test_bad_python_data_is_one_error_naming_the_row(build, message):
    with pytest.raises(DataError) as caught:
        build()
    assert str(caught.value).startswith(message)


def test_bad_files_keep_their_file_and_line(tmp_path):
    pairs = write(tmp_path / "pairs.tsv", ["a\tb\t1", "c\td"])
    with pytest.raises(DataError, match=rf"^{pairs}:2: malformed row"):
        ScoredPairs.from_file(pairs)
    tuples = write(tmp_path / "t.tsv", ["q\tp\tn", "q\tp"])
    with pytest.raises(DataError, match=rf"^{tuples}:2: malformed row"):
        Tuples.of(tuples)
    corpus = write(tmp_path / "corpus.jsonl", [json.dumps({"_id": "d1", "text": "x"}), "{not json"])
    with pytest.raises(DataError, match=rf"^{corpus}:2: not a JSON object"):
        Corpus.from_file(corpus)
    qrels = write(tmp_path / "qrels.tsv", ["q1\td1\t1", "q9\td1\t1"])
    with pytest.raises(DataError, match=rf"^{qrels}:2: query 'q9' is not in the queries"):
        RetrievalSet.from_parts([{"_id": "d1", "text": "x"}], {"q1": "x?"}, qrels)


def test_the_registry_holds_every_kind_by_its_name():
    assert set(KINDS) == {"sentences", "pairs", "scored-pairs", "tuples", "corpus", "queries", "qrels", "retrieval-set"}
    assert all(cls.name == name and kind(name) is cls for name, cls in KINDS.items())


def test_a_recipe_train_data_parses_into_its_kind_and_loads_as_the_kind_reads_its_file(tmp_path, tiny_data_dir):
    from sentune.data.catalog import parse_train_data

    pairs = write(tmp_path / "pairs.tsv", ["a\tb", "c\td"])
    labelled = write(tmp_path / "labelled.tsv", ["a\tb\t1", "c\td\t0"])
    tuples = write(tmp_path / "tuples.tsv", ["a\tb\tc", "d\te\tf"])
    corpus = write(tmp_path / "corpus.txt", ["one", "two", "one"])
    for text, expected in [
        (f"pairs:{pairs}", Pairs.from_file(pairs)),
        (f"labelled:{labelled}", ScoredPairs.from_file(labelled)),
        (f"tuples:{tuples}", Tuples.from_file(tuples)),
        (f"file:{corpus}", Sentences(["one", "two"])),
    ]:
        parsed = parse_train_data(text)
        assert parsed.kind is type(expected)
        assert parsed.load(tiny_data_dir) == expected
    wiki = parse_train_data("wiki")
    assert (wiki.kind, wiki.origin, wiki.value) == (Sentences, "set", "wiki")
    assert wiki.load(tiny_data_dir) == Sentences.from_file(tiny_data_dir / "corpora" / "wiki" / "wiki_sentences.txt")
    tasks = parse_train_data("tasks:STS-B").load(tiny_data_dir)
    assert isinstance(tasks, Sentences) and len(tasks.texts) > 0


def test_a_method_declares_the_kind_it_takes_and_a_recipe_of_another_kind_is_refused(tmp_path, tiny_data_dir, monkeypatch):
    from sentune.methods.registry import get_method, method_names
    from sentune.training.recipe import RecipeError, load_recipe

    for name in method_names():
        assert get_method(name).takes and all(k in KINDS.values() for k in get_method(name).takes), name
    assert get_method("cosent").takes == (ScoredPairs,) and get_method("mnrl-hard-negatives").takes == (Tuples,) and get_method("bt").takes == (Pairs,)
    monkeypatch.setenv("SENTUNE_DATA", str(tiny_data_dir))
    recipe = write(tmp_path / "r.yaml", ["method: cosent", "train_data: wiki"])
    with pytest.raises(RecipeError, match=r"train_data: method 'cosent' needs train_data: labelled:PATH \(s1<TAB>s2<TAB>label lines\)"):
        load_recipe(str(recipe))
    tuples = write(tmp_path / "t.tsv", ["a\tb\tc"])
    with pytest.raises(RecipeError, match=r"method 'simcse' needs train_data: a named set .* or pairs:PATH"):
        load_recipe(str(write(tmp_path / "s.yaml", ["method: simcse", f"train_data: tuples:{tuples}"])))


def test_the_trainer_takes_data_as_objects_the_same_as_from_the_recipe_file(tmp_path, tiny_data_dir, tiny_model_dir):
    """build_training with ScoredPairs given from Python rows gives the columns the recipe's labelled: file gives; data
    of a kind the method does not take is refused before any training."""
    from sentune.errors import UserError
    from sentune.training.recipe import load_recipe
    from sentune.training.trainer import build_training

    rows = [("a man plays guitar", "a man is playing guitar", 4.5), ("a dog runs", "the car is red", 0.5), ("rain falls", "it rains", 3.0)]
    labelled = write(tmp_path / "labelled.tsv", [f"{a}\t{b}\t{y}" for a, b, y in rows])
    recipe = load_recipe("adapt/cosent", [f"model={tiny_model_dir}", f"train_data=labelled:{labelled}"])
    from_file = build_training(recipe, tiny_data_dir, device="cpu", show_progress=False)[2]
    given = build_training(recipe, tiny_data_dir, device="cpu", show_progress=False, data=ScoredPairs.of(rows))[2]
    assert given == from_file == {"sentence_a": [a for a, _, _ in rows], "sentence_b": [b for _, b, _ in rows], "label": [y for _, _, y in rows]}
    with pytest.raises(UserError, match="^data: method 'cosent' trains on scored-pairs, not sentences$"):
        build_training(recipe, tiny_data_dir, device="cpu", show_progress=False, data=Sentences(["a", "b"]))


def test_training_on_objects_gives_the_model_and_dev_score_training_on_the_files_gives(tmp_path, tiny_data_dir, tiny_model_dir):
    """train_in_memory with the training pairs and the dev pairs given as ScoredPairs (from Python rows) trains the same
    weights and reads the same dev score as the recipe naming their files (labelled:PATH, eval.dev pairs:PATH)."""
    import torch

    from sentune.tasks.dev import dev_evaluator
    from sentune.tasks.user_pairs import PairsEvaluator
    from sentune.training.recipe import load_recipe
    from sentune.training.trainer import train_in_memory

    words = ["guitar", "piano", "violin", "drums", "flute", "cello", "harp", "bass"]
    rows = [(f"a man plays {w}", f"a man is playing {w}" if i % 2 else f"the {w} is red", 4.0 if i % 2 else 1.0 + i / 8) for i, w in enumerate(words)]
    dev_rows = [(f"someone plays {w}", f"a {w} is played", 3.0 + i / 4) for i, w in enumerate(words[:4])]
    train_file = write(tmp_path / "train.tsv", [f"{a}\t{b}\t{y}" for a, b, y in rows])
    dev_file = write(tmp_path / "dev.tsv", [f"{a}\t{b}\t{y}" for a, b, y in dev_rows])
    assert isinstance(dev_evaluator(ScoredPairs.of(dev_rows), tiny_data_dir), PairsEvaluator)
    settings = [f"model={tiny_model_dir}", "training.max_steps=2", "training.batch_size=4", "training.checkpoint=last", "training.patience=0"]
    from_files = load_recipe("adapt/cosent", [*settings, f"train_data=labelled:{train_file}", f"eval.dev=pairs:{dev_file}"])
    files = train_in_memory(from_files, data_dir=tiny_data_dir, show_progress=False, device="cpu")
    given = {"data": ScoredPairs.of(rows), "dev": ScoredPairs.of(dev_rows)}
    objects = train_in_memory(load_recipe("adapt/cosent", settings, **given), data_dir=tiny_data_dir, show_progress=False, device="cpu", **given)
    assert objects.best["dev_score"] == pytest.approx(files.best["dev_score"], abs=1e-9) and files.best["dev_metric"] == "spearman"
    for (name, a), (_, b) in zip(files.model.state_dict().items(), objects.model.state_dict().items(), strict=True):
        assert torch.equal(a, b), name


def test_kinds_is_the_lookup_the_catalog_and_the_recipes_use(monkeypatch, tmp_path):
    """A recipe's `train_data: PREFIX:PATH` names its kind in KINDS (the catalog reads it there), a run's record of
    data given as objects is read back through KINDS, and RetrievalSet is a kind like the others."""
    from sentune.data import kinds
    from sentune.data.beir import RetrievalSet, write_beir_folder
    from sentune.data.catalog import parse_train_data
    from sentune.data.tables import Kind
    from sentune.training.recipe import RecipeError, described_kind

    class MyPairs(kinds.Pairs):
        pass

    monkeypatch.setitem(kinds.KINDS, "pairs", MyPairs)
    assert parse_train_data("pairs:p.tsv").kind is MyPairs
    assert described_kind({"kind": "pairs", "rows": 3}, "train_data") is MyPairs
    with pytest.raises(RecipeError, match=r"^train_data: a description of data of kind 'nonesuch', none of sentences, pairs"):
        described_kind({"kind": "nonesuch", "rows": 3}, "train_data")
    assert issubclass(RetrievalSet, Kind) and kinds.kind("retrieval-set") is RetrievalSet
    judged = RetrievalSet.from_parts([{"_id": "d1", "title": "", "text": "a man plays"}], {"q1": "man"}, {"q1": {"d1": 1}})
    write_beir_folder(tmp_path / "beir", judged, "test")
    assert len(RetrievalSet.of(tmp_path / "beir")) == 1 == len(judged)
    with pytest.raises(DataError, match="from_parts"):
        RetrievalSet.of([("q1", "man")])
