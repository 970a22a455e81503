"""The smallest training set-up of every registered method on the tiny model: what tests/test_registry.py trains each
method with on the CPU and tests/test_gpu.py on CUDA. A method registered without an entry here fails
test_every_registered_method_has_a_tiny_training_setup (and its parametrised training tests)."""

from __future__ import annotations

from pathlib import Path

PARAPHRASES = ["guitar", "piano", "ball", "food", "car", "cat", "dog", "kids"]

# method -> train_tiny keyword arguments; "pairs" stands for a paraphrase file written by tiny_training_args
SETUPS: dict[str, dict] = {
    "sg": {"params": {"head_hidden": 16}},
    "sg-opt": {"params": {"head_hidden": 16}},
    "simcse": {},
    "mirror": {},
    "mirror-char": {},
    "flow-joint": {"params": {"hidden": 8}},
    "st-mnrl": {},
    "st-ct": {},
    "ct": {"training": {"batch_size": 16, "optimizer": "rmsprop", "scheduler": "ct-steps", "learning_rate": 1e-5}},
    "tsdae": {},
    "nli": {"training": {"batch_size": 16, "max_sentences": 16, "warmup_ratio": 0.1, "learning_rate": 2e-5}},
    "sts-regression": {"params": {"lower_bound": 0.2}, "training": {"batch_size": 16, "max_sentences": 16, "learning_rate": 2e-5}},
    "multitask": {"params": {"e_para": 16, "e_sem": 16}, "training": {"batch_size": 4, "max_sentences": 16}},
    "bt": {"train_data": "pairs", "params": {"head_hidden": 16, "temperature": 0.1}, "training": {"batch_size": 4}},
    "bt-sg-opt": {"train_data": "pairs", "params": {"head_hidden": 16, "temperature": 0.1}, "training": {"batch_size": 4}},
    "mnrl-pairs": {"train_data": "pairs", "training": {"batch_size": 4}},
    "sed": {"params": {"members": "model-twice"}},  # two members: the tiny model itself, twice
    "cosent": {"train_data": "labelled-graded", "training": {"batch_size": 4}},
    "online-contrastive": {"train_data": "labelled-binary", "training": {"batch_size": 4}},
    "mnrl-hard-negatives": {"train_data": "tuples", "training": {"batch_size": 4}},
    "margin-mse": {"train_data": "margin-tuples", "training": {"batch_size": 4}},
    # judged queries against documents given as Python data, no file form (train_given)
    "query-side": {"data": "retrieval-set", "training": {"batch_size": 4}},
}


def methods_without_setup() -> list[str]:
    from sentune.methods.registry import method_names

    return [name for name in method_names() if name not in SETUPS]


def tiny_training_args(method: str, tmp_path: Path, model: str | Path) -> dict:
    """train_tiny's keyword arguments for `method` (files it needs written under tmp_path)."""
    if method not in SETUPS:
        raise AssertionError(f"method {method!r} is registered without a tiny training set-up in tests/method_setups.py")
    args = {key: dict(value) if isinstance(value, dict) else value for key, value in SETUPS[method].items()}
    if args.get("train_data") == "pairs":
        pairs = tmp_path / "pairs.tsv"
        pairs.write_text("".join(f"a man plays {w}\ta man is playing {w}\n" for w in PARAPHRASES))
        args["train_data"] = f"pairs:{pairs}"
    if str(args.get("train_data", "")).startswith("labelled-"):
        labelled = tmp_path / "labelled.tsv"
        binary = args["train_data"] == "labelled-binary"
        rows = [(f"a man plays {w}", f"a man is playing {w}" if i % 2 == 0 else f"the {w} is on the table", i % 2 == 0) for i, w in enumerate(PARAPHRASES)]
        labelled.write_text("".join(f"{a}\t{b}\t{(1 if same else 0) if binary else (4.5 if same else 1.0 + i / 4)}\n" for i, (a, b, same) in enumerate(rows)))
        args["train_data"] = f"labelled:{labelled}"
    if args.get("train_data") == "tuples":
        tuples = tmp_path / "tuples.tsv"
        tuples.write_text("".join(f"who plays {w}\ta man plays {w}\ta dog eats food\tthe car is red\n" for w in PARAPHRASES))
        args["train_data"] = f"tuples:{tuples}"
    if args.get("train_data") == "margin-tuples":  # a teacher's two margins after the negatives
        tuples = tmp_path / "margin-tuples.tsv"
        tuples.write_text("".join(f"who plays {w}\ta man plays {w}\ta dog eats food\tthe car is red\t0.4\t0.{i}\n" for i, w in enumerate(PARAPHRASES)))
        args["train_data"] = f"tuples:{tuples}"
    if args.get("data") == "retrieval-set":  # each query judged against the document it names
        from sentune.data.beir import Document, Query, RetrievalSet
        from sentune.data.readers import Source

        here = Source("tiny", 1)
        documents = [Document(f"d{i}", f"a man plays the {w}", here) for i, w in enumerate(PARAPHRASES)]
        args["data"] = RetrievalSet([Query(f"q{i}", f"who plays {w}", here, {f"d{i}": 1}) for i, w in enumerate(PARAPHRASES)], documents)
    if args.get("params", {}).get("members") == "model-twice":
        args["params"]["members"] = [str(model), str(model)]
    if method == "tsdae" and not can_decode(model):  # MPNet: an untied decoder of its hidden size (params.decoder)
        args["params"] = {**args.get("params", {}), "decoder": str(random_decoder(tmp_path / "decoder", model))}
    return args


def can_decode(model: str | Path) -> bool:
    """Whether transformers can run the model's own architecture as a causal language model (TSDAE's tied decoder)."""
    from transformers import MODEL_FOR_CAUSAL_LM_MAPPING, AutoConfig

    return type(AutoConfig.from_pretrained(model)) in MODEL_FOR_CAUSAL_LM_MAPPING


def random_decoder(folder: Path, encoder: str | Path) -> Path:
    """A one-layer randomly initialised BERT of the encoder's hidden size with its own WordPiece vocabulary (so TSDAE
    re-tokenizes the targets), saved where AutoModelForCausalLM loads it."""
    from conftest import _tiny_wordpiece_vocab
    from transformers import AutoConfig, BertConfig, BertModel, BertTokenizerFast

    hidden = AutoConfig.from_pretrained(encoder).hidden_size
    vocab = _tiny_wordpiece_vocab(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"])
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "vocab.txt").write_text("\n".join(vocab) + "\n")
    try:  # transformers 5 takes the vocabulary as a dict, older releases as a file (as conftest's tiny BERT)
        tokenizer = BertTokenizerFast(vocab=vocab, do_lower_case=True)
    except TypeError:
        tokenizer = BertTokenizerFast(vocab_file=str(folder / "vocab.txt"), do_lower_case=True)
    heads = next(h for h in (4, 2, 1) if hidden % h == 0)
    config = BertConfig(
        vocab_size=len(vocab), hidden_size=hidden, num_hidden_layers=1, num_attention_heads=heads, intermediate_size=37, max_position_embeddings=512
    )
    BertModel(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def train_given(tmp_path: Path, method: str, model: str | Path, data_dir: Path, *, data, training: dict | None = None, **recipe) -> Path:
    """train_tiny for a method whose data are given as Python data (no train_data file form): the tiny recipe trained
    by the trainer with `data`; returns the run folder."""
    from conftest import tiny_recipe

    from sentune.training.recipe import load_recipe
    from sentune.training.trainer import train

    path = tiny_recipe(tmp_path / f"{method}.yaml", method, model, training=training, **recipe)
    run = tmp_path / f"run-{method}"
    train(load_recipe(str(path), check=False), run, data_dir=data_dir, data=data, show_progress=False)  # checked with its data by train
    return run
