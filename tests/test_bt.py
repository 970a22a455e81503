"""Contrastive (BT): back-translation through tiny random Marian models, the BT loss against a naive
reference, and training on a paraphrase file."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from sentune.cli import main


@pytest.fixture(scope="module")
def tiny_marian(tiny_model_dir, tmp_path_factory):
    from transformers import AutoTokenizer, MarianConfig, MarianMTModel

    folder = tmp_path_factory.mktemp("tiny-marian")
    tokenizer = AutoTokenizer.from_pretrained(str(tiny_model_dir))
    torch.manual_seed(0)
    config = MarianConfig(
        vocab_size=len(tokenizer),
        d_model=16,
        encoder_layers=1,
        decoder_layers=1,
        encoder_attention_heads=2,
        decoder_attention_heads=2,
        encoder_ffn_dim=32,
        decoder_ffn_dim=32,
        max_position_embeddings=256,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.sep_token_id,
        decoder_start_token_id=tokenizer.pad_token_id,
        forced_eos_token_id=tokenizer.sep_token_id,
    )
    MarianMTModel(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


@pytest.mark.slow
def test_paraphrase_command_writes_pairs(tiny_marian, tmp_path):
    from sentune.data.readers import read_paraphrase_pairs

    source = tmp_path / "in.txt"
    source.write_text("a man plays the guitar\nthe dog runs in the park\n")
    out = tmp_path / "pairs.tsv"
    assert main(["paraphrase", str(source), str(out), "--forward", str(tiny_marian), "--backward", str(tiny_marian), "--beams", "2", "--quiet"]) == 0
    pairs = read_paraphrase_pairs(out)
    assert [a for a, _ in pairs] == ["a man plays the guitar", "the dog runs in the park"] and all(b for _, b in pairs)


def test_bt_loss_matches_naive(tiny_st):
    from sentune.methods.bt import ContrastiveBTLoss
    from sentune.modules.build import with_pooling

    model = with_pooling(tiny_st, "cls").eval()
    loss_fn = ContrastiveBTLoss(model, temperature=0.1, reg_weight=0.0, head_hidden=None)
    loss_fn.eval()
    a, b = ["a man plays", "the dog runs", "two kids eat"], ["a man is playing", "a dog is running", "kids eat food"]
    fa, fb = model.preprocess(a), model.preprocess(b)
    got = loss_fn([dict(fa), dict(fb)], None)["contrastive"].item()
    with torch.no_grad():
        ea = torch.nn.functional.normalize(model(dict(fa))["sentence_embedding"], dim=-1).double().numpy()
        eb = torch.nn.functional.normalize(model(dict(fb))["sentence_embedding"], dim=-1).double().numpy()
    x = np.concatenate([ea, eb])
    total = 0.0
    for m in range(6):
        partner = (m + 3) % 6
        z = sum(math.exp(x[m] @ x[n] / 0.1) for n in range(6) if n != m)
        total += -math.log(math.exp(x[m] @ x[partner] / 0.1) / z)
    assert got == pytest.approx(total / 6, rel=1e-5)
