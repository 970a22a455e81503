"""TSDAE: the deletion noise, the loss against a naive token-by-token cross-entropy, tied weights, and a tiny training run."""

from __future__ import annotations

import math
import random

import pytest
import torch

from sentune.methods.tsdae import TSDAELoss, delete_words


def test_deletion_keeps_about_the_ratio_and_never_empties_a_sentence():
    rng = random.Random(0)
    sentence = " ".join(f"w{i}" for i in range(40))
    kept = [len(delete_words(sentence, 0.6, rng).split()) for _ in range(300)]
    assert 0.37 < sum(kept) / (300 * 40) < 0.43  # 40 % of the words survive on average
    assert all(len(delete_words("a man , plays", 0.99, rng).split()) >= 1 for _ in range(100))
    assert delete_words("the dog runs", 0.0, rng) == "the dog runs"
    words = delete_words("a man, plays!", 0.0, rng).split()
    assert words == ["a", "man", ",", "plays", "!"]  # punctuation counts as a word, as NLTK's tokenizer splits it


def test_loss_matches_naive_reconstruction_cross_entropy(tiny_st):
    torch.manual_seed(0)
    loss = TSDAELoss(tiny_st)
    loss.eval()  # no dropout, so the naive pass sees the same numbers
    noisy = tiny_st.preprocess(["man guitar", "dog park"])
    target = tiny_st.preprocess(["a man plays the guitar", "the dog runs in the park today"])
    found = loss([noisy, target], None).item()

    decoder = loss.denoising.decoder
    # The decoder's embeddings are the encoder's (tied): a change to one shows in the other.
    assert decoder.bert.embeddings.word_embeddings.weight is tiny_st[0].auto_model.embeddings.word_embeddings.weight
    with torch.no_grad():
        s = tiny_st(dict(noisy))["sentence_embedding"]
        ids = target["input_ids"]
        logits = decoder(input_ids=ids[:, :-1], encoder_hidden_states=s[:, None], encoder_attention_mask=torch.ones(len(ids), 1, dtype=torch.long)).logits
    pad = tiny_st.tokenizer.pad_token_id
    total, count = 0.0, 0
    for row in range(len(ids)):
        for t in range(ids.shape[1] - 1):
            gold = int(ids[row, t + 1])
            if gold == pad:
                continue
            scores = logits[row, t].double()
            total += -(scores[gold] - math.log(torch.exp(scores).sum().item())).item()
            count += 1
    assert found == pytest.approx(total / count, rel=1e-5)


@pytest.mark.slow
def test_tiny_training_saves_the_encoder_only(tiny_model_dir, tiny_data_dir, tmp_path):
    from conftest import train_tiny
    from sentence_transformers import SentenceTransformer

    run = train_tiny(tmp_path, "tsdae", tiny_model_dir, tiny_data_dir, training={"keep_checkpoints": True})
    model = SentenceTransformer(str(run / "model"), device="cpu")
    assert model.encode(["a man plays the guitar"]).shape == (1, 32)
    checkpoint = sorted((run / "checkpoints").glob("checkpoint-*"))[-1]
    from safetensors.torch import load_file

    names = list(load_file(str(checkpoint / "loss_state.safetensors")))
    assert names and all(n.startswith("denoising.decoder.") for n in names)
    assert any("crossattention" in n for n in names)  # the decoder's own weights are kept for a resume
    assert not any(".word_embeddings." in n for n in names)  # tied weights live with the model, not twice


def test_an_encoder_without_a_causal_lm_decodes_with_params_decoder_untied(tiny_mpnet_dir, tiny_model_dir, tiny_data_dir, tmp_path):
    """MPNet cannot be its own decoder: refused with the way out named; a decoder of another hidden size is refused
    naming both sizes; one of the same size trains, untied, re-tokenizing the targets with its own tokenizer, and the
    checkpoint keeps all of its weights (nothing of it is the encoder's)."""
    from conftest import train_tiny
    from method_setups import random_decoder
    from safetensors.torch import load_file
    from sentence_transformers import SentenceTransformer

    from sentune.methods.registry import get_method

    tsdae = get_method("tsdae")
    mpnet = SentenceTransformer(str(tiny_mpnet_dir), device="cpu")
    reason = tsdae.cannot_train(mpnet)
    assert "transformers has none for 'mpnet'" in reason and "give params.decoder" in reason
    wide = random_decoder(tmp_path / "wide", tiny_model_dir)  # 32 wide, as both tiny encoders
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(wide)
    config.hidden_size, config.num_attention_heads = 48, 4
    config.save_pretrained(wide)
    assert (
        tsdae.cannot_train(mpnet, tsdae.resolve_params({"decoder": str(wide)}))
        == f"params.decoder {str(wide)!r}: hidden size 48, the encoder's is 32 (they must be equal)"
    )
    assert "not a model transformers can load" in tsdae.cannot_train(mpnet, tsdae.resolve_params({"decoder": str(tmp_path / "none")}))
    decoder = random_decoder(tmp_path / "decoder", tiny_mpnet_dir)
    assert tsdae.cannot_train(mpnet, tsdae.resolve_params({"decoder": str(decoder)})) is None
    loss = TSDAELoss(mpnet, str(decoder))
    assert loss.denoising.need_retokenization  # MPNet's tokenizer is not the decoder's
    assert not {id(p) for p in loss.denoising.decoder.parameters()} & {id(p) for p in mpnet.parameters()}  # untied
    run = train_tiny(tmp_path, "tsdae", tiny_mpnet_dir, tiny_data_dir, params={"decoder": str(decoder)}, training={"keep_checkpoints": True})
    assert SentenceTransformer(str(run / "model"), device="cpu").encode(["a man plays the guitar"]).shape == (1, 32)
    names = list(load_file(str(sorted((run / "checkpoints").glob("checkpoint-*"))[-1] / "loss_state.safetensors")))
    assert any(".word_embeddings." in n for n in names) and all(n.startswith("denoising.decoder.") for n in names)  # its own embeddings
