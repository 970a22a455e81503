"""The fast encoder against naive one-sentence-at-a-time encoding, order, de-duplication, determinism."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from conftest import SENTENCES

from sentune.core.encode import Encoder, token_budget_batches, unique_in_order
from sentune.core.pooling import PoolingSpec, pool

POOLINGS = ["model", "cls", "mean", "max", "first-last", "last2", "layer0-max", "wk"]


def _one_by_one(model, sentence, name):
    spec = PoolingSpec.parse(name)
    if name == "wk":
        spec = PoolingSpec("wk", "wk", (), wk_layer_start=1)
    features = model.preprocess([sentence])
    with torch.no_grad():
        out = model[0].model(input_ids=features["input_ids"], attention_mask=features["attention_mask"], output_hidden_states=True)
        if name == "model":
            return model.encode([sentence], convert_to_numpy=True)[0]
        return pool(spec, out.hidden_states, features["attention_mask"])[0].numpy()


def test_encode_many_matches_naive_per_sentence(tiny_st):
    encoder = Encoder(tiny_st, POOLINGS, max_tokens=24, max_batch=3, show_progress=False)
    encoder.specs[-1] = PoolingSpec("wk", "wk", (), wk_layer_start=1)
    out = encoder.encode_many(SENTENCES)
    assert set(out) == set(encoder.pooling_names)
    for name in POOLINGS:
        expected = np.stack([_one_by_one(tiny_st, s, name) for s in SENTENCES])
        np.testing.assert_allclose(out[name], expected, rtol=1e-4, atol=1e-5, err_msg=name)


def test_duplicates_encoded_once_and_order_kept(tiny_st):
    calls = []
    encoder = Encoder(tiny_st, "mean", show_progress=False)
    original = tiny_st.preprocess
    tiny_st.preprocess = lambda texts, *args, **kwargs: calls.append(list(texts)) or original(texts, *args, **kwargs)
    out = encoder.encode(SENTENCES)
    encoded = [t for batch in calls for t in batch]
    assert sorted(encoded) == sorted(set(SENTENCES))
    np.testing.assert_array_equal(out[0], out[4])  # SENTENCES[0] == SENTENCES[4]
    assert out.dtype == np.float32 and out.shape[0] == len(SENTENCES)


@pytest.mark.parametrize("sentences", [SENTENCES, list(dict.fromkeys(SENTENCES)), []], ids=["duplicates", "unique", "none"])
def test_stacked_poolings_equal_the_poolings_one_by_one(tiny_st, sentences):
    """encode_stacked (SG's views) gives every pooling of a sentence in one row, in the order asked, exactly what
    encode_many gives pooling by pooling."""
    names = ["layer0-max", "layer2-max", "mean"]
    encoder = Encoder(tiny_st, names, show_progress=False)
    stacked = encoder.encode_stacked(sentences)
    apart = encoder.encode_many(sentences)
    assert stacked.dtype == np.float32 and stacked.shape[:2] == (len(sentences), 3)
    for index, name in enumerate(names):
        np.testing.assert_array_equal(stacked[:, index], apart[name], err_msg=name)


def test_deterministic_and_eval_mode(tiny_st):
    tiny_st.train()  # dropout on: the encoder must still switch it off
    encoder = Encoder(tiny_st, "cls", show_progress=False)
    np.testing.assert_array_equal(encoder.encode(SENTENCES), encoder.encode(SENTENCES))


def test_truncated_sentences_are_reported(tiny_st):
    tiny_st.max_seq_length = 8
    encoder = Encoder(tiny_st, "mean", show_progress=False)
    encoder.encode(SENTENCES)
    lengths = encoder.token_lengths(SENTENCES)
    assert encoder.truncated_indices == [i for i, n in enumerate(lengths) if n > 8]
    assert encoder.truncated_indices  # the long sentence at the end is among them


def test_helpers():
    unique, inverse = unique_in_order(["b", "a", "b", "c"])
    assert unique == ["b", "a", "c"] and inverse.tolist() == [0, 1, 0, 2]
    batches = token_budget_batches(np.array([3, 10, 5, 10]), max_tokens=20, max_batch=8)
    assert [b.tolist() for b in batches] == [[1, 3], [2, 0]]


def test_several_devices_share_the_batches_and_give_the_same_vectors(tiny_st):
    """The multi-GPU path (a model copy per device, the batches dealt out, one thread each), run with two CPU
    "devices": every sentence is encoded once, by one of them, and the vectors equal one device's."""
    calls = []
    one = Encoder(tiny_st, ["mean", "cls"], show_progress=False, max_batch=2).encode_many(SENTENCES)
    two = Encoder(tiny_st, ["mean", "cls"], show_progress=False, max_batch=2, devices=["cpu", "cpu"])
    replicas = two._replicas()
    assert len(replicas) == 2 and replicas[1] is not tiny_st
    for replica in replicas:
        original = replica.preprocess
        replica.preprocess = lambda texts, *a, _o=original, _r=replica, **k: calls.append((id(_r), list(texts))) or _o(texts, *a, **k)
    shared = two.encode_many(SENTENCES)
    assert {who for who, _ in calls} == {id(r) for r in replicas}  # both devices took batches
    assert sorted(t for _, texts in calls for t in texts) == sorted(set(SENTENCES))
    for name in ("mean", "cls"):
        np.testing.assert_allclose(shared[name], one[name], rtol=1e-5, atol=1e-6)


def test_encode_devices_follow_the_device_request(tiny_st, monkeypatch):
    from types import SimpleNamespace

    from sentune.core.runtime import Runtime

    spread = Runtime(spread=True)
    assert spread.devices(tiny_st) == [torch.device("cpu")]  # a CPU model: one device
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    assert spread.devices(tiny_st) == [torch.device("cpu")]  # GPUs present, but the model was put on the CPU
    # a model on the first GPU: spread over both only when no GPU was named (its runtime says so), never by the environment
    on_gpu = SimpleNamespace(device=torch.device("cuda", 0))
    monkeypatch.setenv("SENTUNE_DEVICE", "cuda:0")
    assert spread.devices(on_gpu) == [torch.device("cuda", 0), torch.device("cuda", 1)]
    monkeypatch.setenv("SENTUNE_DEVICE", "cuda")
    assert Runtime().devices(on_gpu) == [torch.device("cuda", 0)]
    monkeypatch.setenv("WORLD_SIZE", "2")  # a data-parallel launcher: each process has its own GPU
    assert spread.devices(on_gpu) == [torch.device("cuda", 0)]


def test_freed_memory_is_released_after_long_batches_and_every_few_short_ones(tiny_st, monkeypatch):
    from sentune.core import encode, memory

    calls: list[int] = []
    monkeypatch.setattr(memory, "_TRIM", lambda pad: calls.append(pad))
    short, long = ["a man"] * 3, ["a man plays the guitar in the park with a dog and a cat " * 3]
    encode.Encoder(tiny_st, "model", show_progress=False).encode(short)
    assert calls == []
    monkeypatch.setattr(encode, "TRIM_FROM_TOKENS", 20)
    encode.Encoder(tiny_st, "model", show_progress=False).encode(short + long)
    assert calls == [0]  # once: after the one batch that holds the long sentence
    calls.clear()
    monkeypatch.setattr(encode, "TRIM_EVERY_BATCHES", 2)  # short batches: after every second one
    encode.Encoder(tiny_st, "model", max_batch=1, show_progress=False).encode([f"a man plays {i}" for i in range(5)])
    assert calls == [0, 0]  # after batches 2 and 4 of 5
