"""Shared fixtures: a tiny randomly initialised BERT (built from a config, no download) saved once per
session, a tiny SentEval-layout data directory, and a seeded toy encoder."""

from __future__ import annotations

import copy
import gc
import json
import os
import tempfile
from pathlib import Path

import numpy as np
import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# Test modules import bm25s directly, which runs a jax top-k wherever jax is installed: on a GPU machine each xdist
# worker's jax would take 75 % of the GPU's memory (sentune itself imports bm25s with jax hidden: search/lexical.py).
os.environ.setdefault("JAX_PLATFORMS", "cpu")
# One torch thread (this process and those it starts) unless OMP_NUM_THREADS says otherwise: the tiny models gain nothing
# from a second thread, and on a busy machine a second OpenMP thread spin-waits for a core, which slows a test many
# times over (a tiny-model training step, not a compute-bound one).
os.environ.setdefault("OMP_NUM_THREADS", "1")
torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))
# The tiny model runs faster on the CPU than a GPU can start: tests (and the processes they start) stay on the
# CPU unless they ask for CUDA by name (tests/test_gpu.py), so a GPU machine initialises CUDA only where it is tested.
os.environ["SENTUNE_DEVICE"] = "cpu"
# Method caches go to a folder of this test session, never the user's cache.
os.environ["SENTUNE_CACHE"] = tempfile.mkdtemp(prefix="sentune-test-cache-")
# the default data folder (sentune.data.catalog.default_data_dir) of the user running the tests is never read
os.environ["XDG_DATA_HOME"] = tempfile.mkdtemp(prefix="sentune-test-xdg-")
# (After the environment above, which sentune may read when imported.) The libraries every test imports, imported once and then frozen out of the garbage collector's view: sentune collects
# garbage after every training run (sentune.core.memory.release_unreferenced), and a full collection over the half a
# million objects these imports create costs a few tenths of a second, which the suite's many tiny runs would pay each.
import sentence_transformers  # noqa: E402, F401
import transformers  # noqa: E402, F401

import sentune.cli  # noqa: E402, F401
from sentune.data import catalog  # noqa: E402

CATALOG_CHECK = catalog.data_problem

gc.freeze()


def pytest_xdist_auto_num_workers(config):
    """`-n auto` (pyproject.toml's addopts): a worker a core, at most four (each worker imports torch and builds the tiny
    models once: memory and start-up that more workers would multiply for a suite of this size)."""
    return max(1, min(os.cpu_count() or 1, 4))


def pytest_addoption(parser):
    parser.addoption("--slow", action="store_true", help="also run the tests marked slow (scripts/test.sh and CI do)")


def pytest_collection_modifyitems(config, items):
    """Tests marked slow (end-to-end training, adapt runs, kill-and-resume) are deselected unless --slow is given:
    `pytest -q` stays a quick loop, `bash scripts/test.sh` (and CI) runs everything."""
    if config.getoption("--slow"):
        return
    slow = [item for item in items if item.get_closest_marker("slow")]
    if slow:
        config.hook.pytest_deselected(items=slow)
        items[:] = [item for item in items if not item.get_closest_marker("slow")]


@pytest.fixture(scope="session", autouse=True)
def tiny_data_passes_the_catalog_check():
    """The tiny data directories are not the catalogued data (24 examples a task): in this process their tasks load as
    if they matched the catalog (the processes a test starts pass --allow-modified-data). A test of the check itself
    asks for `checked_data`."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(catalog, "data_problem", lambda spec, data_dir, examples: None)
        yield


@pytest.fixture
def checked_data(monkeypatch):
    """The check of a task's files against the catalog (counts, SHA256SUMS) on, as for a user."""
    monkeypatch.setattr(catalog, "data_problem", CATALOG_CHECK)


WORDS = (
    "a the man woman dog cat is are was plays playing guitar piano runs running eats food on in with and "
    "of to quickly slowly big small red blue car street park sits ball kid kids child girl boy two three "
    "an who what where why how stock market price rises falls news said report today . , ' s"
).split()


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory) -> Path:
    from transformers import BertConfig, BertModel, BertTokenizerFast

    folder = tmp_path_factory.mktemp("tiny-bert")
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + WORDS + [f"##{c}" for c in "abcdefghijklmnopqrstuvwxyz"] + list("abcdefghijklmnopqrstuvwxyz")
    # transformers 5 takes the vocabulary as a dict (`vocab=`); older releases as a file (`vocab_file=`).
    vocab_ids = {token: i for i, token in enumerate(dict.fromkeys(vocab))}
    (folder / "vocab.txt").write_text("\n".join(vocab_ids) + "\n")
    try:
        tokenizer = BertTokenizerFast(vocab=vocab_ids, do_lower_case=True)
    except TypeError:
        tokenizer = BertTokenizerFast(vocab_file=str(folder / "vocab.txt"), do_lower_case=True)
    assert tokenizer.unk_token_id not in tokenizer("a man plays the guitar")["input_ids"]
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        num_hidden_layers=5,
        num_attention_heads=4,
        intermediate_size=37,
        max_position_embeddings=64,
        hidden_dropout_prob=0.1,
        attention_probs_dropout_prob=0.1,
    )
    BertModel(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def _tiny_wordpiece_vocab(specials: list[str]) -> dict[str, int]:
    vocab = specials + WORDS + [f"##{c}" for c in "abcdefghijklmnopqrstuvwxyz"] + list("abcdefghijklmnopqrstuvwxyz")
    return {token: i for i, token in enumerate(dict.fromkeys(vocab))}


@pytest.fixture(scope="session")
def second_model_dir() -> Path:
    """A real model of another family given by the environment (SENTUNE_SECOND_MODEL: a folder, e.g. all-mpnet-base-v2
    from ../shared/tools/second-model.sh), for benchmarks/runners/second_model.sh; skipped when it is not set."""
    folder = os.environ.get("SENTUNE_SECOND_MODEL")
    if not folder:
        pytest.skip("SENTUNE_SECOND_MODEL not set (a second model family's folder)")
    return Path(folder)


@pytest.fixture(scope="session")
def tiny_mpnet_dir(tmp_path_factory) -> Path:
    """A tiny randomly initialised MPNet (the family of all-mpnet-base-v2: relative position attention, <s> and </s>
    around the text, no token type ids), built from a config as the tiny BERT is."""
    from transformers import MPNetConfig, MPNetModel, MPNetTokenizerFast

    folder = tmp_path_factory.mktemp("tiny-mpnet")
    vocab = _tiny_wordpiece_vocab(["<s>", "<pad>", "</s>", "[UNK]", "<mask>"])
    (folder / "vocab.txt").write_text("\n".join(vocab) + "\n")
    try:  # transformers 5 takes the vocabulary as a dict, older releases as a file (as the tiny BERT)
        tokenizer = MPNetTokenizerFast(vocab=vocab, do_lower_case=True, unk_token="[UNK]")
    except TypeError:
        tokenizer = MPNetTokenizerFast(vocab_file=str(folder / "vocab.txt"), do_lower_case=True, unk_token="[UNK]")
    assert tokenizer.unk_token_id not in tokenizer("a man plays the guitar")["input_ids"]
    assert "token_type_ids" not in tokenizer("a man plays the guitar")
    torch.manual_seed(0)
    config = MPNetConfig(
        vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=3, num_attention_heads=4, intermediate_size=37, max_position_embeddings=80,
        pad_token_id=tokenizer.pad_token_id, bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
    )  # fmt: skip
    MPNetModel(config).save_pretrained(folder)
    tokenizer.model_max_length = 64  # within the positions, as a real model's tokenizer says (sentence-transformers reads it)
    tokenizer.save_pretrained(folder)
    return folder


@pytest.fixture(scope="session")
def tiny_roberta_dir(tmp_path_factory) -> Path:
    """A tiny randomly initialised RoBERTa-style model: a byte-level BPE tokenizer without token type ids, one token type,
    positions offset by the padding index."""
    from tokenizers import ByteLevelBPETokenizer
    from transformers import RobertaConfig, RobertaModel, RobertaTokenizerFast

    folder = tmp_path_factory.mktemp("tiny-roberta")
    bpe = ByteLevelBPETokenizer()
    sentences = [" ".join(WORDS[i:] + WORDS[:i]) for i in range(len(WORDS))] + SENTENCES
    bpe.train_from_iterator(sentences, vocab_size=400, min_frequency=1, special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"], show_progress=False)
    bpe.save_model(str(folder))
    vocab = json.loads((folder / "vocab.json").read_text())
    merges = [tuple(line.split()) for line in (folder / "merges.txt").read_text().splitlines() if line and not line.startswith("#")]
    try:  # transformers 5 takes the vocabulary and merges themselves, older releases their files
        tokenizer = RobertaTokenizerFast(vocab=vocab, merges=merges)
    except TypeError:
        tokenizer = RobertaTokenizerFast(vocab_file=str(folder / "vocab.json"), merges_file=str(folder / "merges.txt"))
    assert tokenizer.unk_token_id not in tokenizer("a man plays the guitar")["input_ids"]
    tokenizer.model_input_names = ["input_ids", "attention_mask"]
    assert "token_type_ids" not in tokenizer("a man plays the guitar")
    torch.manual_seed(0)
    config = RobertaConfig(
        vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=3, num_attention_heads=4, intermediate_size=37, max_position_embeddings=80,
        type_vocab_size=1, pad_token_id=tokenizer.pad_token_id, bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
    )  # fmt: skip
    RobertaModel(config).save_pretrained(folder)
    tokenizer.model_max_length = 64  # within the positions (offset by the padding index), as a real model's tokenizer says
    tokenizer.save_pretrained(folder)
    return folder


@pytest.fixture(scope="session")
def _tiny_st(tiny_model_dir):
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(tiny_model_dir), device="cpu")
    model.max_seq_length = 64
    return model


@pytest.fixture
def tiny_st(_tiny_st):
    """A fresh copy per test, so no test sees another's changes."""
    return copy.deepcopy(_tiny_st)


SENTENCES = [
    "a man plays the guitar",
    "a woman is playing the piano",
    "the dog runs in the park",
    "two kids eat food",
    "a man plays the guitar",
    "stock market price rises today",
    "a",
    "the big red car is on the street with a small blue ball and a cat",
]


class ToyEncoder:
    """Seeded encoder with known outputs: each sentence maps to a fixed vector (for evaluator tests)."""

    def __init__(self, table: dict[str, np.ndarray]):
        self.table = table

    def __call__(self, sentences):
        return np.stack([self.table[s] for s in sentences])


def unit_at(angle_degrees: float) -> np.ndarray:
    a = np.deg2rad(angle_degrees)
    return np.array([np.cos(a), np.sin(a)])


def _sentence(rng) -> str:
    return " ".join(rng.choice(WORDS[:-4], size=int(rng.integers(3, 9))))


def write_tiny_data_dir(root: Path, n: int = 24, seed: int = 0) -> Path:
    """Every file the task catalog and sets.yaml name, in SentEval's formats, n examples each."""
    from sentune.data.catalog import load_catalog, set_catalog

    rng = np.random.default_rng(seed)

    def write(rel: str, lines: list[str]) -> None:
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")

    def sick_lines():
        labels = ["ENTAILMENT", "NEUTRAL", "CONTRADICTION"]
        return ["pair_ID\tsentence_A\tsentence_B\trelatedness_score\tentailment_judgment"] + [
            f"{i}\t{_sentence(rng)}\t{_sentence(rng)}\t{rng.uniform(1, 5):.1f}\t{labels[i % 3]}" for i in range(n)
        ]

    for spec in load_catalog().values():
        f = spec.files
        if spec.format == "semeval":
            for s in spec.subsets:
                write(f"{spec.dir}/STS.input.{s}.txt", [f"{_sentence(rng)}\t{_sentence(rng)}" for _ in range(n)])
                write(f"{spec.dir}/STS.gs.{s}.txt", [f"{rng.uniform(0, 5):.2f}" for _ in range(n)])
        elif spec.format == "semeval-files":
            write(f["input"], [f"{_sentence(rng)}\t{_sentence(rng)}" for _ in range(n)])
            write(f["gold"], [f"{rng.uniform(0, 5):.2f}" for _ in range(n)])
        elif spec.format == "stsb":
            for path in f.values():
                # the last 6 rows as STS 2017's English track (STS17-en-en reads them from these files)
                origin = lambda i: "track5.en-en\t2017" if i >= n - 6 else "MSRvid\t2012test"  # noqa: E731
                write(path, [f"main-captions\t{origin(i)}\t{i:04d}\t{rng.uniform(0, 5):.3f}\t{_sentence(rng)}\t{_sentence(rng)}" for i in range(n)])
        elif spec.format in ("sick", "sick-e"):
            for path in f.values():
                if not (root / path).exists():
                    write(path, sick_lines())
        elif spec.format == "binary":
            write(f["pos"], [_sentence(rng) for _ in range(n)])
            write(f["neg"], [_sentence(rng) for _ in range(n)])
        elif spec.format == "sst2":
            for path in f.values():
                write(path, [f"{_sentence(rng)} \t{i % 2}" for i in range(n)])
        elif spec.format == "sst5":
            for path in f.values():
                write(path, [f"{i % 5} {_sentence(rng)}" for i in range(n)])
        elif spec.format == "trec":
            classes = ["ABBR", "DESC", "ENTY", "HUM", "LOC", "NUM"]
            for path in f.values():
                write(path, [f"{classes[i % 6]}:other {_sentence(rng)} ?" for i in range(2 * n)])  # >= 5 per class for 5-fold CV
        elif spec.format == "mrpc":
            for path in f.values():
                write(path, ["Quality\t#1 ID\t#2 ID\t#1 String\t#2 String"] + [f"{i % 2}\t{i}\t{i + 1}\t{_sentence(rng)}\t{_sentence(rng)}" for i in range(n)])
        elif spec.format == "beir":  # n documents; per qrels split, n queries each relevant to one document
            docs = [_sentence(rng) + " . " + _sentence(rng) for _ in range(n)]
            write(f"{spec.dir}/corpus.jsonl", [json.dumps({"_id": f"d{i}", "title": "", "text": t}) for i, t in enumerate(docs)])
            splits = sorted({sp for other in load_catalog().values() if other.format == "beir" and other.dir == spec.dir for sp in other.subsets})
            # each split's query of document i is another of its sentences: no query text is shared between splits, as in BEIR
            write(
                f"{spec.dir}/queries.jsonl",
                [json.dumps({"_id": f"{sp}{i}", "text": docs[i].split(" . ")[k % 2]}) for k, sp in enumerate(splits) for i in range(n)],
            )
            for sp in spec.subsets:
                write(f"{spec.dir}/qrels/{sp}.tsv", ["query-id\tcorpus-id\tscore"] + [f"{sp}{i}\td{i}\t1" for i in range(n)])
    nli = ["entailment", "neutral", "contradiction"]
    for part in (p for parts in set_catalog().values() for p in parts):
        if part.format == "lines":
            for path in part.files.values():
                write(path, [_sentence(rng) for _ in range(3 * n)])
        elif part.format == "pair-tsv":
            for path in part.files.values():
                labels = nli if "nli" in path.lower() else ["0", "1"]
                write(path, [f"{_sentence(rng)}\t{_sentence(rng)}\t{labels[i % len(labels)]}" for i in range(n)])
        elif part.format == "nli-senteval":
            for split in part.subsets:
                write(f"{part.dir}/s1.{split}", [_sentence(rng) for _ in range(n)])
                write(f"{part.dir}/s2.{split}", [_sentence(rng) for _ in range(n)])
                write(f"{part.dir}/labels.{split}", [nli[i % 3] for i in range(n)])
    return root


@pytest.fixture(scope="session")
def tiny_data_dir(tmp_path_factory) -> Path:
    return write_tiny_data_dir(tmp_path_factory.mktemp("tiny-data"))


def tiny_recipe(
    path: Path, method: str, model: str | Path, *, train_data: str = "wiki", params: dict | None = None, training: dict | None = None, tasks: str = "STS-B"
) -> Path:
    """A recipe for a few steps on the tiny model, written to `path` (steps and batch overridable in `training`)."""
    import json

    settings = {"batch_size": 8, "max_steps": 4, "eval_steps": 2, "patience": 0, **(training or {})}
    recipe = {
        "method": method,
        "model": str(model),
        "train_data": train_data,
        "params": params or {},
        "training": settings,
        "eval": {"dev": "STS-B-dev", "tasks": tasks},
    }
    path.write_text(json.dumps(recipe))
    return path


def train_tiny(
    tmp_path: Path,
    method: str,
    model: str | Path,
    data_dir: Path,
    *,
    train_data: str = "wiki",
    params: dict | None = None,
    training: dict | None = None,
    tasks: str = "STS-B",
) -> Path:
    """Write a tiny recipe and train it through the CLI; returns the run folder (asserts success)."""
    from sentune.cli import main

    recipe = tiny_recipe(tmp_path / f"{method}.yaml", method, model, train_data=train_data, params=params, training=training, tasks=tasks)
    run = tmp_path / f"run-{method}"
    assert main(["train", str(recipe), "--out", str(run), "--data", str(data_dir)]) == 0
    return run


def method_context(method: str, params: dict | None = None, *, data_dir: Path | None = None, cache_dir: Path | None = None, dev_score=None, **recipe_fields):
    """The TrainContext the trainer would hand `method` for a recipe with these params (for loss-level tests)."""
    from sentune.methods.base import TrainContext
    from sentune.methods.registry import get_method
    from sentune.training.recipe import Recipe

    recipe = Recipe(method=method, params=params or {}, **recipe_fields)
    return TrainContext(
        recipe=recipe,
        params=get_method(method).resolve_params(params),
        data_dir=data_dir or Path("."),
        cache_dir=cache_dir,
        dev_score=dev_score,
        show_progress=False,
    )


def naive_bm25(query: list[str], passage: list[str], collection: list[list[str]], k1: float, b: float) -> float:
    """Lucene's BM25 of one tokenised passage for one tokenised query, written out over a tokenised collection's
    statistics: Σ over the query's words of ln(1 + (N − df + 0.5) / (df + 0.5)) · tf / (tf + k1 · (1 − b + b · |p| / avgdl))."""
    import math

    mean_length = sum(len(t) for t in collection) / len(collection)
    score = 0.0
    for word in query:
        df, tf = sum(word in t for t in collection), passage.count(word)
        if df and tf:
            score += math.log(1 + (len(collection) - df + 0.5) / (df + 0.5)) * tf / (tf + k1 * (1 - b + b * len(passage) / mean_length))
    return score


def tree_state(folder: Path) -> dict[str, str]:
    """Every file under `folder` with its sha256: compared before and after a refused command, nothing may change."""
    import hashlib

    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.rglob("*")) if p.is_file()}


def kill_when(proc, ready, *, what: str = "the run", timeout: float = 240.0, after: float = 0.0, children: bool = False) -> None:
    """SIGKILL `proc` (a subprocess.Popen) once `ready` (a path that appears, or a callable that turns true) holds, as
    a crash would, then reap it. `after`: seconds to wait past that moment (a random value lands mid-step or
    mid-save); `children`: kill its child processes too (torchrun's workers live in sessions of their own). Fails
    when the process ends first or the moment does not come within `timeout` seconds."""
    import signal
    import subprocess
    import time

    check = ready if callable(ready) else Path(ready).exists
    deadline = time.time() + timeout
    while not check():
        if proc.poll() is not None:
            stderr = proc.stderr.read()[-2000:] if proc.stderr else ""
            raise AssertionError(f"{what} ended before it could be killed: {stderr}")
        if time.time() > deadline:
            raise AssertionError(f"{what} did not reach the moment to kill it within {timeout:.0f} s")
        time.sleep(0.02)
    time.sleep(after)
    if children:
        subprocess.run(["pkill", "-KILL", "-P", str(proc.pid)], check=False)
    proc.send_signal(signal.SIGKILL)
    proc.wait()


def assert_plot(path: Path, min_colours: int = 3) -> None:
    """A PNG that holds a drawing: a picture of some size, not one flat colour, with lines or marks in several colours."""
    from matplotlib.image import imread

    image = imread(str(path))
    assert image.ndim == 3 and image.shape[0] >= 200 and image.shape[1] >= 200, image.shape
    colours = np.unique((image[..., :3] * 255).astype(np.uint8).reshape(-1, 3), axis=0)
    assert len(colours) >= min_colours, f"{path}: {len(colours)} colour(s): blank"
    ink = (image[..., :3].mean(axis=2) < 0.9).mean()  # the share of pixels darker than near-white
    assert 0.005 < ink < 0.9, f"{path}: {ink:.1%} of the pixels drawn"


def free_port() -> int:
    """A free TCP port on 127.0.0.1 (servers in tests listen there only)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# The Python API tests' sentences (tests/test_api.py, tests/test_api_promises.py): a small vocabulary of their own
API_WORDS = "a the man woman dog cat plays runs eats guitar piano park food car street ball kid red blue big small".split()


def api_sentence(rng) -> str:
    return " ".join(rng.choice(API_WORDS, size=int(rng.integers(3, 8))))


@pytest.fixture
def pairs_data():
    """A corpus of 120 sentences and 100 dev pairs with graded scores, as Python lists."""
    rng = np.random.default_rng(0)
    corpus = [api_sentence(rng) for _ in range(120)]
    dev = [(api_sentence(rng), api_sentence(rng), float(rng.uniform(0, 5))) for _ in range(100)]
    return corpus, dev


@pytest.fixture
def encoder_runtimes(monkeypatch) -> list:
    """The runtime every Encoder made during the test was given (None: none), in order."""
    import sentune.core.encode

    given: list = []
    real = sentune.core.encode.Encoder.__init__

    def recording(self, *args, runtime=None, **kwargs):
        given.append(runtime)
        real(self, *args, runtime=runtime, **kwargs)

    monkeypatch.setattr(sentune.core.encode.Encoder, "__init__", recording)
    return given
