"""CPU lanes (sentune.core.lanes): a batch cut by length into runs of about equal tokens, each run on its own thread
with its share of the intra-op threads; the vectors are the whole batch's."""

from __future__ import annotations

import threading

import numpy as np
import pytest
import torch

from sentune.core.lanes import LANE_MIN_TEXTS, Lanes, lane_shares
from sentune.core.runtime import Runtime


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("lanes", [1, 2, 3, 5])
def test_lane_shares_are_runs_of_the_sorted_texts_of_about_equal_tokens(seed, lanes):
    lengths = np.random.default_rng(seed).integers(1, 60, size=int(np.random.default_rng(seed).integers(1, 40)))
    shares = lane_shares(lengths, lanes)
    assert 1 <= len(shares) <= lanes and all(len(share) for share in shares)
    joined = np.concatenate(shares)
    assert sorted(joined.tolist()) == list(range(len(lengths)))  # every text once
    assert np.all(np.diff(lengths[joined]) >= 0)  # runs of the texts sorted by length, shortest first
    # naive: the ideal cut gives each run total/lanes tokens; a run is off by less than one text's tokens at each end
    ideal = lengths.sum() / lanes
    if len(shares) == lanes:
        assert all(abs(int(lengths[share].sum()) - ideal) <= 2 * lengths.max() for share in shares)


def test_a_batch_takes_lanes_only_with_enough_texts_for_each():
    lanes = Lanes(2, 2)
    assert lanes.for_batch(1) == 1 and lanes.for_batch(2 * LANE_MIN_TEXTS - 1) == 1
    assert lanes.for_batch(2 * LANE_MIN_TEXTS) == 2 and lanes.for_batch(64) == 2


TEXTS = [("a man plays the guitar " * (1 + i % 5)).strip() + f" number {i}" for i in range(14)]


def test_lanes_give_the_whole_batchs_vectors_each_lane_on_its_own_thread_with_one_thread(tiny_st, monkeypatch):
    from sentune.core.encode import Encoder

    whole = Encoder(tiny_st, "model", show_progress=False).encode(TEXTS)
    seen: list[tuple[str, int, int]] = []
    run = Encoder._run

    def spy(self, model, unique, batches, bar):
        seen.append((threading.current_thread().name, torch.get_num_threads(), sum(len(b) for b in batches)))
        return run(self, model, unique, batches, bar)

    monkeypatch.setattr(Encoder, "_run", spy)
    laned = Encoder(tiny_st, "model", show_progress=False, runtime=Runtime(lanes=Lanes(2, 2))).encode(TEXTS)
    np.testing.assert_allclose(laned, whole, atol=1e-5)
    assert len(seen) == 2 and all(name.startswith("sentune-lane") and threads == 1 for name, threads, _ in seen)
    assert sum(count for _, _, count in seen) == len(TEXTS)


def test_a_whole_batch_after_lanes_runs_with_every_thread(tiny_st):
    from sentune.core.encode import Encoder

    encoder = Encoder(tiny_st, "model", show_progress=False, runtime=Runtime(lanes=Lanes(2, 2)))
    encoder.encode(TEXTS)  # the lanes set their threads' counts to one
    counts: list[int] = []

    def small_batch() -> None:  # a thread the lanes never ran on, as a server's batch thread
        torch.set_num_threads(1)  # as if it had started with a lane's count
        encoder.encode(TEXTS[:2])
        counts.append(torch.get_num_threads())

    thread = threading.Thread(target=small_batch)
    thread.start()
    thread.join()
    assert counts == [2]


def test_serve_gives_its_runtime_lanes_on_the_cpu_unless_told_one(tiny_model_dir, tiny_st):
    from sentence_transformers import SentenceTransformer

    from sentune.errors import UserError
    from sentune.serve.engine import Engine
    from sentune.serve.settings import ServeSettings, check_numbers

    settings = ServeSettings(target=str(tiny_model_dir), index=None, model=str(tiny_model_dir))
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(2)  # the tests run one thread each: a server on 2 cores has two
        engine = Engine(settings)
        lanes = engine.runtime.lanes
        assert lanes.count == lanes.threads == 2 and engine.encoder.runtime is engine.runtime
        plain = SentenceTransformer(str(tiny_model_dir), device="cpu")  # loaded afresh: the shared fixture's copy may have been used
        assert set(vars(engine.model)) == set(vars(plain))  # the lanes are the runtime's, nothing set on the model
        torch.set_num_threads(1)  # one thread: one lane is the whole batch, nothing to set
        assert Engine(settings).runtime.lanes is None
    finally:
        torch.set_num_threads(before)
    assert Engine(ServeSettings(target=str(tiny_model_dir), index=None, model=str(tiny_model_dir), lanes=1)).runtime.lanes is None
    with pytest.raises(UserError, match="--lanes 0"):
        check_numbers(ServeSettings(target="m", index=None, model="m", lanes=0))


def test_unit_vectors_give_the_cosines_of_a_naive_normalisation_and_cosines_own(monkeypatch):
    """An index opened for searching normalises its documents once (sentune.search.passages.UnitVectors): the
    cosines of a naive normalisation, and bit for bit what `cosines` gives (the evaluation's ranking), across blocks."""
    import sentune.search.passages as passages
    import sentune.tasks.retrieval as retrieval
    from sentune.search.passages import UnitVectors, cosines, dense_scores

    rng = np.random.default_rng(3)
    docs, queries = rng.normal(size=(37, 8)).astype(np.float32), rng.normal(size=(4, 8)).astype(np.float32)
    docs[5] = 0.0  # a zero vector: cosine 0, no division by zero
    naive = np.array([[q @ d / (np.linalg.norm(q) * max(np.linalg.norm(d), 1e-12)) for d in docs] for q in queries])
    monkeypatch.setattr(retrieval, "BLOCK", 10)  # several blocks
    unit = UnitVectors.of(docs)
    assert isinstance(unit, UnitVectors) and len(unit) == 37
    np.testing.assert_allclose(dense_scores(queries, unit), naive, atol=1e-6)
    assert np.array_equal(dense_scores(queries, unit), cosines(queries, docs))
    monkeypatch.setattr(passages, "UNIT_COPY_BYTES", docs.nbytes - 1)  # too large to copy: the vectors as they are
    assert UnitVectors.of(docs) is docs


def test_sentune_serve_refuses_lanes_below_one_before_the_model_loads(capsys):
    """As a user types it: one line naming the option, exit 2, no model loaded (the name does not exist)."""
    from sentune.cli.app import main

    assert main(["serve", "no-such-model-folder", "--lanes", "0"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--lanes 0" in err[0]
