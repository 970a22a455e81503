"""What a library promises its Python callers (issue 81, items 12-16): returned objects own what they need, nothing is
written before the inputs are checked, errors name the Python argument, a trained model keeps its base's Normalize, and
the API reference's landing page shows every public function with its signature."""

from __future__ import annotations

import gc
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest
from conftest import api_sentence as _sentence

import sentune
from sentune.errors import UserError


def _documents(n: int = 30) -> list[dict]:
    rng = np.random.default_rng(1)
    return [{"_id": f"d{i}", "title": "", "text": ". ".join(_sentence(rng) for _ in range(2))} for i in range(n)]


def test_an_adapt_results_index_keeps_its_temporary_folder_after_the_result_is_collected(tiny_st):
    """`adapt(out=None).index` outlives the result: the temporary folder stays while the Index is referenced (its model,
    saved into the folder, loads at the first search)."""
    from sentune.api.adapt import AdaptResult

    tmp = tempfile.TemporaryDirectory(prefix="sentune-adapt-")
    sentune.Index.build(tiny_st, _documents(), tmp.name)  # a run's folder as adapt leaves it: index.json, model/
    result = AdaptResult(Path(tmp.name), {}, tmp)
    folder = result.out
    index = result.index
    del result, tmp
    gc.collect()
    assert folder.is_dir()
    assert [hit.id for hit in index.search("a man plays the guitar", top_k=3)]  # the model loads from the folder now
    del index
    gc.collect()
    assert not folder.exists()  # and goes once nothing needs it


@pytest.mark.slow  # an adapt search run on the tiny model (~15 s)
def test_adapt_with_no_out_gives_an_index_that_searches_after_the_result_is_gone(tiny_model_dir):
    rng = np.random.default_rng(3)
    docs = [{"_id": f"d{i}", "title": "", "text": ". ".join(_sentence(rng) for _ in range(3))} for i in range(150)]
    queries = {f"q{i}": " ".join(docs[i]["text"].split()[1:4]) for i in range(110)}
    judged = {q: {f"d{q[1:]}": 1} for q in queries}
    result = sentune.adapt(str(tiny_model_dir), corpus=docs, dev=queries, dev_qrels=judged, methods="whitening", out=None)
    index = result.index
    del result
    gc.collect()
    assert len(index.search(queries["q0"], top_k=3)) == 3


def test_documents_close_their_file_when_the_os_module_is_already_torn_down(tiny_st, tmp_path, monkeypatch):
    """At interpreter exit a module's globals may be None before the last index is collected: Documents.__del__ closes
    its file with what it bound when it was defined."""
    from sentune.search import documents as module

    sentune.Index.build(tiny_st, _documents(), tmp_path / "index")
    documents = module.Documents.open(tmp_path / "index", len(_documents()))
    documents.read([0])  # opens its descriptor
    descriptor = documents._file
    monkeypatch.setattr(module, "os", None)
    documents.__del__()
    monkeypatch.undo()
    with pytest.raises(OSError):
        __import__("os").fstat(descriptor)  # closed
    documents._file = None


@pytest.mark.slow  # a Python process importing sentune and torch (~10-25 s on a shared machine)
def test_a_notebook_at_warning_level_sees_no_bm25s_debug_line_nor_an_error_at_exit(tiny_model_dir, tmp_path):
    """logging at WARNING: building and searching an index prints no bm25s DEBUG line; an index still referenced while
    the interpreter tears its modules down (held by a module, as a notebook's namespace or a library's cache holds it)
    closes its documents' file without an 'Exception ignored' line."""
    script = (
        "import logging, os; logging.basicConfig(level=logging.WARNING); import sentune; "
        f"index = sentune.Index.build({str(tiny_model_dir)!r}, ['a man plays the guitar', 'a dog runs'], {str(tmp_path / 'index')!r}, fusion='rrf'); "
        "index.search('a man', top_k=2); os.kept = index"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "bm25s" not in done.stderr and "Exception ignored" not in done.stderr and "Traceback" not in done.stderr, done.stderr


def test_bm25s_records_follow_the_applications_logging_level(tiny_st, tmp_path, monkeypatch):
    """bm25s sets its logger to DEBUG when it is imported: imported by sentune, its records obey the level the
    application set (WARNING here), not DEBUG."""
    import logging

    from sentune.search import lexical

    records: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = records.append  # type: ignore[method-assign]
    root = logging.getLogger()
    monkeypatch.setattr(root, "level", logging.WARNING)
    root.addHandler(handler)
    for name in [n for n in sys.modules if n == "bm25s" or n.startswith("bm25s.")]:
        monkeypatch.delitem(sys.modules, name)  # imported afresh, as a new process would (the old modules put back after)
    monkeypatch.setattr(logging.getLogger("bm25s"), "level", logging.NOTSET)
    try:
        lexical._bm25s()
        sentune.Index.build(tiny_st, ["a man plays the guitar", "a dog runs"], tmp_path / "index", fusion="rrf")
    finally:
        root.removeHandler(handler)
    assert [r.getMessage() for r in records if r.name.startswith("bm25s")] == []


def test_a_refused_adapt_call_writes_nothing_and_names_the_python_argument(tiny_model_dir, pairs_data, tmp_path):
    """A mistyped model is refused before adapt.json and data/ are written (so the corrected call is not refused);
    `out=` naming a file, a folder under a file, or a folder of the user's own files is one line naming `out=`."""
    corpus, dev = pairs_data
    out = tmp_path / "run"
    with pytest.raises(UserError, match=r"^model=\S*no-such-model: no such folder"):
        sentune.adapt(str(tmp_path / "no-such-model"), corpus=corpus, dev=dev, methods="whitening", out=out)
    assert not out.exists()
    (tmp_path / "a-file").write_text("mine")
    with pytest.raises(UserError, match=r"^out=\S*a-file: a file; give a folder"):
        sentune.adapt(str(tiny_model_dir), corpus=corpus, dev=dev, methods="whitening", out=tmp_path / "a-file")
    with pytest.raises(UserError, match=r"^out=\S*a-file/run: under \S*a-file, a file"):
        sentune.adapt(str(tiny_model_dir), corpus=corpus, dev=dev, methods="whitening", out=tmp_path / "a-file" / "run")
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("my notes")
    with pytest.raises(UserError, match=r"^out=\S*mine: holds notes.txt, not an adapt run"):
        sentune.adapt(str(tiny_model_dir), corpus=corpus, dev=dev, methods="whitening", out=mine)
    assert [p.name for p in mine.iterdir()] == ["notes.txt"] and (tmp_path / "a-file").read_text() == "mine"


def test_adapts_errors_name_the_python_arguments_and_the_command_keeps_its_options(tiny_model_dir, pairs_data, tmp_path, capsys):
    from sentune.cli import main
    from sentune.data.user_data import write_corpus, write_scored_pairs

    corpus, dev = pairs_data
    with pytest.raises(UserError, match=r"^dev\[7\]: expected \(sentence1, sentence2, score\), got 2 fields"):
        sentune.adapt(str(tiny_model_dir), corpus=corpus, dev=[*dev[:7], ("only one text", 1.0), *dev[8:]], out=tmp_path / "a")
    with pytest.raises(UserError, match=r"^time='30x': expected a duration"):
        sentune.adapt(str(tiny_model_dir), corpus=corpus, dev=dev, time="30x", out=tmp_path / "a")
    with pytest.raises(UserError, match=r"^sed_members=1: an ensemble needs at least 2 members"):
        sentune.adapt(str(tiny_model_dir), corpus=corpus, dev=dev, sed_members=1, out=tmp_path / "a")
    assert not (tmp_path / "a").exists()
    write_corpus(tmp_path / "corpus.txt", corpus)
    write_scored_pairs(tmp_path / "dev.tsv", dev)
    files = ["--corpus", str(tmp_path / "corpus.txt"), "--dev", str(tmp_path / "dev.tsv")]
    assert main(["adapt", "--model", str(tiny_model_dir), *files, "--time", "30x", "--out", str(tmp_path / "b")]) == 2
    assert "--time '30x': expected a duration" in capsys.readouterr().err


def test_a_refused_train_call_writes_nothing_and_names_the_python_argument(tiny_model_dir, tiny_data_dir, tmp_path):
    from conftest import tiny_recipe

    recipe = tiny_recipe(tmp_path / "r.yaml", "simcse", tiny_model_dir)
    rng = np.random.default_rng(2)
    sentences = list(dict.fromkeys(_sentence(rng) for _ in range(40)))
    out = tmp_path / "run"
    with pytest.raises(UserError, match=r"^model=\S*no-such-model: no such folder"):
        sentune.train(recipe, data=sentences, model=tmp_path / "no-such-model", out=out, data_dir=tiny_data_dir)
    assert not out.exists()
    with pytest.raises(UserError, match="1 training row"):  # refused once config.yaml was written: removed again
        sentune.train(recipe, data=["one sentence only"] * 3, out=out, data_dir=tiny_data_dir)
    assert not out.exists()
    (tmp_path / "a-file").write_text("mine")
    with pytest.raises(UserError, match=r"^out=\S*a-file: a file; give a folder"):
        sentune.train(recipe, data=sentences, out=tmp_path / "a-file", data_dir=tiny_data_dir)
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("my notes")
    with pytest.raises(UserError, match=r"^out=\S*mine: holds notes.txt, not a training run"):
        sentune.train(recipe, data=sentences, out=mine, data_dir=tiny_data_dir)
    assert [p.name for p in mine.iterdir()] == ["notes.txt"]


def test_eval_results_save_into_a_file_is_one_line_naming_out(tmp_path):
    from sentune.api.evaluate import EvalResults

    (tmp_path / "a-file").write_text("mine")
    with pytest.raises(UserError, match=r"^out=\S*a-file: a file; give a folder"):
        EvalResults({"runs": {}, "meta": {}}).save(tmp_path / "a-file")
    assert (tmp_path / "a-file").read_text() == "mine"


def test_every_recipe_a_docstring_names_loads():
    """The recipe names the API's docstrings give as examples (`sentune.train("002-simcse", ...)`) are bundled recipes,
    with the overrides they are shown with."""
    import ast
    import inspect
    import re

    from sentune.training.recipe import load_recipe

    texts = [sentune.__doc__ or ""] + [inspect.getdoc(getattr(sentune, name)) or "" for name in sentune.__all__ if callable(getattr(sentune, name))]
    calls = [m for text in texts for m in re.finditer(r'sentune\.train\(\s*"([^"]+)"(.*?)\)`', text)]
    named = [m.group(1) for text in texts for m in re.finditer(r'recipe name[^`]*`"([^"]+)"`', text)]
    assert calls and named  # the patterns still find the examples
    for call in calls:
        overrides = re.search(r"overrides=(\{[^}]*\})", call.group(2))
        settings = ast.literal_eval(overrides.group(1)) if overrides else {}
        assert load_recipe(call.group(1), [f"{k}={v}" for k, v in settings.items()], check=False).name, call.group(0)
    for name in named:
        assert load_recipe(name, check=False).name, name


def test_sentence_transformers_column_names_and_columns_mapping_are_read(tiny_model_dir, tiny_data_dir, tmp_path):
    """A Dataset as sentence-transformers ships it (`sentence1`, `sentence2`, `label`) is scored pairs; `columns=` maps
    a DataFrame's own names to sentune's, for train and adapt, as the errors advise."""
    import inspect

    import pandas
    from conftest import tiny_recipe
    from datasets import Dataset

    from sentune.api.given import as_kind
    from sentune.api.train import training_kind
    from sentune.data.kinds import Pairs, ScoredPairs

    rng = np.random.default_rng(4)
    rows = [(_sentence(rng), _sentence(rng), float(rng.uniform(0, 1))) for _ in range(100)]
    st_style = Dataset.from_dict({"sentence1": [r[0] for r in rows], "sentence2": [r[1] for r in rows], "label": [r[2] for r in rows]})
    assert as_kind(ScoredPairs, st_style, "dev") == ScoredPairs.from_rows(rows)
    assert isinstance(training_kind(st_style), ScoredPairs)
    assert isinstance(training_kind(Dataset.from_dict({"sentence1": ["a man", "a dog"], "sentence2": ["a woman", "a cat"]})), Pairs)
    frame = pandas.DataFrame({"question1": [r[0] for r in rows], "question2": [r[1] for r in rows], "is_duplicate": [r[2] for r in rows]})
    with pytest.raises(
        UserError,
        match=r"^dev: no column 'sentence1', 'sentence2', 'score' for scored-pairs \(it has question1, question2, is_duplicate\); name yours with columns=",
    ):
        sentune.adapt(str(tiny_model_dir), corpus=None, dev=frame, out=tmp_path / "a")
    renamed = {"question1": "sentence1", "question2": "sentence2", "is_duplicate": "score", "question": "text"}
    assert "columns" in inspect.signature(sentune.adapt).parameters and "columns" in inspect.signature(sentune.train).parameters
    with pytest.raises(UserError, match=r"^corpus=FILE \(or example=NAME\) is required"):  # the dev frame was read: the corpus is next
        sentune.adapt(str(tiny_model_dir), corpus=None, dev=frame, columns=renamed, out=tmp_path / "a")
    sentences = pandas.DataFrame({"question": list(dict.fromkeys(_sentence(rng) for _ in range(40)))})
    recipe = tiny_recipe(tmp_path / "r.yaml", "simcse", tiny_model_dir)
    sentune.train(recipe, data=sentences, dev=frame, columns=renamed, overrides={"training.max_steps": 2}, out=tmp_path / "run", data_dir=tiny_data_dir)
    described = __import__("yaml").safe_load((tmp_path / "run" / "config.yaml").read_text())
    assert described["train_data"] == {"kind": "sentences", "rows": len(sentences)} and described["eval"]["dev"]["rows"] == len(rows)


@pytest.mark.slow  # pdoc imports and renders the whole API in a fresh process (~30-45 s on a shared machine)
def test_the_reference_landing_page_shows_every_public_function_with_its_signature(tmp_path):
    """scripts/docs.sh's build (scripts/api_reference.py, in a fresh process: `sentune`'s names not yet resolved): the
    landing page (index.html → sentune.html) documents each of `sentune.__all__`, a function with every parameter of
    its real signature, and pdoc warns of nothing."""
    import html
    import inspect
    import re
    from pathlib import Path as FilePath

    root = FilePath(__file__).resolve().parents[1]
    done = subprocess.run([sys.executable, str(root / "scripts" / "api_reference.py"), str(tmp_path)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert "url=./sentune.html" in (tmp_path / "index.html").read_text()
    page = (tmp_path / "sentune.html").read_text()
    for name in sentune.__all__:
        assert f'id="{name}"' in page, name
        value = getattr(sentune, name)
        if inspect.isfunction(value):
            start = page.index(f'id="{name}"')
            shown = html.unescape(re.sub(r"<[^>]+>", "", page[start : page.index("</div>", page.index('class="signature', start))]))
            assert re.search(rf"def\s+{name}\(", shown), name
            for parameter in inspect.signature(value).parameters:
                assert re.search(rf"\b{parameter}\b", shown), (name, parameter)


def test_the_other_functions_refusals_name_their_python_arguments(tiny_st, tiny_data_dir, tmp_path, capsys):
    from sentune.cli import main

    with pytest.raises(UserError, match=r"^members=0: at least 1"):
        sentune.pipeline("whiten", tiny_st, members=0, data=tiny_data_dir, out=tmp_path / "p")
    with pytest.raises(UserError, match=r"^members=\S*no-such-model: no such folder"):
        sentune.ensemble([tiny_st, str(tmp_path / "no-such-model")])
    assert main(["ensemble", "--member", str(tmp_path / "no-such-model"), "--member", str(tmp_path / "other"), "--out", str(tmp_path / "e")]) == 2
    assert "--member " in capsys.readouterr().err  # the command keeps its option's name
    assert not any(tmp_path.iterdir())


def test_a_run_refused_before_its_work_leaves_nothing_one_failed_part_way_keeps_its_record(tmp_path):
    from sentune.api.common import refused_leaves_nothing

    for wrote, kept in ((["config.yaml"], False), (["config.yaml", "metrics.jsonl"], True)):
        folder = tmp_path / "-".join(wrote)
        with pytest.raises(UserError), refused_leaves_nothing(folder, before_work=("config.yaml", "input-model")):
            folder.mkdir()
            for name in wrote:
                (folder / name).write_text("x")
            raise UserError("refused")
        assert folder.exists() == kept, wrote


def test_exports_refusals_name_the_python_arguments(tiny_model_dir, tmp_path):
    """export's checks are the command's own: from Python they name `quantize=` and `keep_fp32`, not the options."""
    with pytest.raises(UserError) as refused:
        sentune.export(str(tiny_model_dir), tmp_path / "out", quantize="int4")
    assert "quantize=int4" in str(refused.value) and "--quantize" not in str(refused.value)
    assert not (tmp_path / "out").exists()
    with pytest.raises(UserError) as refused:
        sentune.export(str(tiny_model_dir), tmp_path / "out", keep_fp32="ffn-output")
    assert "keep_fp32" in str(refused.value) and "--keep-fp32" not in str(refused.value)


@pytest.mark.slow
def test_a_trained_model_keeps_its_base_models_normalize(tiny_st, tiny_data_dir, tmp_path):
    """A base ending in Normalize (all-MiniLM-L6-v2) trained under a method's own pooling (SimCSE: cls) gives a model
    that still ends in Normalize: unit vectors, returned and saved (issue 81's defect 13: norms 1.0 became 5-6)."""
    from conftest import tiny_recipe
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.models import Normalize

    base = SentenceTransformer(modules=[*tiny_st, Normalize()], device="cpu")
    base.save(str(tmp_path / "base"))
    recipe = tiny_recipe(tmp_path / "r.yaml", "simcse", tmp_path / "base")
    rng = np.random.default_rng(2)
    sentences = list(dict.fromkeys(_sentence(rng) for _ in range(40)))
    trained = sentune.train(recipe, data=sentences, overrides={"training.max_steps": 2}, out=tmp_path / "run", data_dir=tiny_data_dir)
    saved = SentenceTransformer(str(tmp_path / "run" / "model"), device="cpu")
    for model in (trained, saved):
        assert isinstance(list(model)[-1], Normalize)
        np.testing.assert_allclose(np.linalg.norm(model.encode(sentences[:5]), axis=1), 1.0, atol=1e-5)
    np.testing.assert_allclose(trained.encode(sentences[:3]), saved.encode(sentences[:3]), atol=1e-6)
