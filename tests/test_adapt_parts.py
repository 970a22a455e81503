"""The parts `sentune adapt` stands on (issues 15, 27): the user's pairs and corpus, the metrics the labels choose (one
value and batched), the paired bootstrap of the report, and the choice: selected on one half of the dev pairs,
confirmed by a paired permutation test on the other."""

from __future__ import annotations

import json

import numpy as np
import pytest

from sentune.adaptation.decide import decide, split_dev
from sentune.adaptation.store import CandidateStore
from sentune.core.batched_metrics import average_precision_rows, average_ranks, pearson_rows, spearman_rows
from sentune.core.metrics import METRICS, average_precision, best_threshold_accuracy, pearson, spearman
from sentune.data.readers import DataError
from sentune.data.user_data import read_scored_pairs, read_user_corpus
from sentune.tasks.bootstrap import paired_bootstrap, resamples
from sentune.tasks.permutation import paired_permutation_test, step_down_max_t


def _naive_spearman(x, y):
    """Pearson of average ranks, ranks counted by hand."""

    def ranks(v):
        return np.array([np.sum(v < a) + (np.sum(v == a) + 1) / 2 for a in v])

    a, b = ranks(x), ranks(y)
    return float(np.corrcoef(a, b)[0, 1] * 100)


def _naive_pearson(x, y):
    """Σ (x − x̄)(y − ȳ) / √(Σ (x − x̄)² Σ (y − ȳ)²), ×100, summed by hand."""
    mx, my = sum(x) / len(x), sum(y) / len(y)
    products = sum((a - mx) * (b - my) for a, b in zip(x, y, strict=True))
    return float(products / np.sqrt(sum((a - mx) ** 2 for a in x) * sum((b - my) ** 2 for b in y)) * 100)


def _naive_average_precision(labels, scores):
    """Mean over the positives of the precision among the pairs scored at least as high (no ties in the scores)."""
    positives = [s for s, y in zip(scores, labels, strict=True) if y == 1]
    return float(np.mean([np.mean(labels[scores >= s] == 1) for s in positives]) * 100)


def test_metrics_match_naive_formulas():
    rng = np.random.default_rng(0)
    gold = rng.integers(0, 6, size=200).astype(float)  # ties in the gold scores, as STS has
    predicted = gold + rng.normal(0, 2, size=200)
    assert spearman(gold, predicted) == pytest.approx(_naive_spearman(gold, predicted), rel=1e-9)
    assert spearman(np.ones(5), np.arange(5.0)) == 0.0  # a constant resample scores 0, not NaN
    assert pearson(gold, predicted) == pytest.approx(_naive_pearson(gold, predicted), rel=1e-9)
    assert pearson(np.arange(5.0), np.ones(5)) == 0.0
    labels = (rng.random(200) < 0.4).astype(float)
    scores = labels + rng.normal(0, 1, size=200)
    assert average_precision(labels, scores) == pytest.approx(_naive_average_precision(labels, scores), rel=1e-9)
    naive = max(((scores > t) == (labels == 1)).mean() for t in np.concatenate([[np.inf], scores])) * 100
    assert best_threshold_accuracy(labels, scores) == pytest.approx(naive, rel=1e-12)


def test_best_threshold_accuracy_never_splits_tied_similarities():
    """A threshold `similarity > t` puts every pair of one similarity on the same side: with all similarities equal
    the best is predicting one class for all (50 here), not 100 as ordering inside the tie would give."""
    labels = np.array([1.0, 0.0, 1.0, 0.0])
    assert best_threshold_accuracy(labels, np.full(4, 0.7)) == 50.0
    assert best_threshold_accuracy(np.array([1.0, 1.0, 0.0, 0.0]), np.array([0.9, 0.5, 0.5, 0.1])) == 75.0  # the middle tie cannot be cut
    assert best_threshold_accuracy(np.array([1.0, 1.0, 0.0, 0.0]), np.array([0.9, 0.6, 0.5, 0.1])) == 100.0


def test_batched_metrics_equal_scipy_and_scikit_learn_with_ties():
    from scipy.stats import rankdata
    from sklearn.metrics import average_precision_score

    rng = np.random.default_rng(4)
    gold = rng.integers(0, 6, size=120).astype(float)
    rows = np.round(gold + rng.normal(0, 2, size=(30, 120)), 1)  # rounded: many ties
    np.testing.assert_array_equal(average_ranks(rows), rankdata(rows, axis=1))
    np.testing.assert_allclose(spearman_rows(gold, rows), [_naive_spearman(gold, r) for r in rows], atol=1e-9)
    np.testing.assert_allclose(pearson_rows(gold, rows), [_naive_pearson(gold, r) for r in rows], atol=1e-9)
    labels = (rng.random(120) < 0.4).astype(float)
    scores = np.round(labels + rng.normal(0, 1, size=(30, 120)), 1)
    np.testing.assert_allclose(average_precision_rows(labels, scores), [average_precision_score(labels == 1, r) * 100 for r in scores], atol=1e-9)
    assert spearman_rows(gold, np.ones((1, 120)))[0] == 0.0 and average_precision_rows(np.zeros(120), scores[:1])[0] == 0.0


def test_paired_bootstrap_matches_a_naive_loop():
    rng = np.random.default_rng(1)
    gold = rng.normal(size=60)
    a, b = gold + rng.normal(0, 1, 60), gold + rng.normal(0, 1.2, 60)
    draws = resamples(60, count=200, seed=3)
    found = paired_bootstrap(gold, a, b, "spearman", draws)
    differences = []
    for row in draws:
        differences.append(_naive_spearman(gold[row], a[row]) - _naive_spearman(gold[row], b[row]))
    assert found.confidence == pytest.approx(np.mean(np.array(differences) > 0))
    assert found.difference_low == pytest.approx(np.percentile(differences, 2.5), rel=1e-9)
    assert found.difference_high == pytest.approx(np.percentile(differences, 97.5), rel=1e-9)


def test_permutation_test_matches_a_naive_loop():
    """p = (1 + #{permuted difference ≥ observed}) / (R + 1), each permutation swapping the two systems' standardised
    predictions on a random half of the pairs: recomputed here pair by pair with SciPy / scikit-learn."""
    from sklearn.metrics import average_precision_score

    rng = np.random.default_rng(5)
    gold = rng.integers(0, 6, size=80).astype(float)
    a, b = gold + rng.normal(0, 1.5, 80), 10 * (gold + rng.normal(0, 2.0, 80)) + 3  # b on another scale: standardising removes it
    labels = (gold >= 3).astype(float)
    for metric, truth, naive in (("spearman", gold, _naive_spearman), ("average_precision", labels, lambda y, s: average_precision_score(y == 1, s) * 100)):
        found = paired_permutation_test(truth, a, b, metric, count=120, seed=7)
        swap = np.random.default_rng(7).random((120, 80)) < 0.5
        ra, rb = (a - a.mean()) / a.std(), (b - b.mean()) / b.std()
        observed = naive(truth, a) - naive(truth, b)
        permuted = [naive(truth, np.where(m, rb, ra)) - naive(truth, np.where(m, ra, rb)) for m in swap]
        assert found.difference == pytest.approx(observed, abs=1e-9), metric
        assert found.p_value == pytest.approx((1 + sum(d >= observed - 1e-9 for d in permuted)) / 121), metric
    same = paired_permutation_test(gold, a, a * 3 + 1, "spearman", count=100)
    assert same.p_value == 1.0 and not same.confirmed  # identical rankings: never better


@pytest.mark.slow  # seconds of permutations in a naive loop: in the slow selection, so plain `pytest -q` stays short
def test_step_down_max_t_equals_a_naive_loop_of_its_formula():
    """Westfall & Young's algorithm 2.8 by hand: per permutation every candidate's swapped difference (one swap
    pattern for all), successive maxima from the smallest observed difference up, adjusted p made monotone."""
    from sklearn.metrics import average_precision_score

    rng = np.random.default_rng(5)
    gold = rng.normal(size=60)
    baseline = gold + rng.normal(0, 1.5, 60)
    candidates = np.stack([gold + rng.normal(0, s, 60) for s in (0.6, 1.0, 1.5, 2.5)] + [baseline * 4 - 1])  # last: the baseline rescaled
    labels = (gold > 0.3).astype(float)
    for metric, truth, naive in (("spearman", gold, _naive_spearman), ("average_precision", labels, lambda y, s: average_precision_score(y == 1, s) * 100)):
        found = step_down_max_t(truth, candidates, baseline, metric, count=40, seed=3)
        swap = np.random.default_rng(3).random((40, 60)) < 0.5
        z = lambda v: (v - v.mean()) / v.std()  # noqa: E731
        rb, rc = z(baseline), [z(c) for c in candidates]
        observed = [naive(truth, c) - naive(truth, baseline) for c in candidates]
        order = sorted(range(5), key=lambda i: -observed[i])
        adjusted, running = {}, 0.0
        for j, i in enumerate(order):
            hits = 0
            for m in swap:
                permuted = [naive(truth, np.where(m, rb, rc[c])) - naive(truth, np.where(m, rc[c], rb)) for c in order[j:]]
                hits += max(permuted) >= observed[i] - 1e-9
            running = max(running, (1 + hits) / 41)
            adjusted[i] = running
        assert found.differences == pytest.approx(observed, abs=1e-9), metric
        assert found.adjusted_p == pytest.approx([adjusted[i] for i in range(5)]), metric
        assert found.adjusted_p[4] == 1.0 and found.best_confirmed(0.03) in (-1, 0), metric  # the rescaled baseline is never better
    # one candidate: the paired permutation test itself (same swap patterns)
    single = step_down_max_t(gold, candidates[:1], baseline, "spearman", count=300, seed=7)
    assert single.adjusted_p[0] == paired_permutation_test(gold, candidates[0], baseline, "spearman", count=300, seed=7).p_value
    # stop_above: decisions at levels up to it are the full test's
    early = step_down_max_t(gold, candidates[1:], baseline, "spearman", count=300, seed=1, stop_above=0.05)
    full = step_down_max_t(gold, candidates[1:], baseline, "spearman", count=300, seed=1)
    assert np.array_equal(early.adjusted_p <= 0.05, full.adjusted_p <= 0.05) and np.all(early.adjusted_p <= full.adjusted_p)


def test_dev_split_is_seeded_disjoint_and_keeps_the_share_of_positives():
    labels = np.array([1.0] * 30 + [0.0] * 70)
    split = split_dev(labels, seed=3)
    assert sorted(np.concatenate([split.select, split.confirm]).tolist()) == list(range(100))
    assert labels[split.select].sum() == labels[split.confirm].sum() == 15
    again = split_dev(labels, seed=3)
    assert np.array_equal(again.select, split.select) and not np.array_equal(split_dev(labels, seed=4).select, split.select)
    graded = split_dev(np.linspace(0, 5, 101))
    assert len(graded.select) + len(graded.confirm) == 101 and abs(len(graded.select) - len(graded.confirm)) <= 1


def test_decide_keeps_the_baseline_on_ties_takes_a_planted_gain_and_never_lets_confirmation_pick():
    rng = np.random.default_rng(2)
    gold = rng.normal(size=400)
    split = split_dev(gold, seed=0)
    baseline = gold + rng.normal(0, 1.5, 400)
    tied = decide(gold, split, ("unchanged", baseline), {"a": baseline.copy(), "b": baseline * 2 + 1}, "spearman")
    assert tied.name == "unchanged" and tied.confirmation is None and "is kept" in tied.reason
    better = gold + rng.normal(0, 0.5, 400)
    picked = decide(gold, split, ("unchanged", baseline), {"noisy": baseline + rng.normal(0, 1, 400), "better": better}, "spearman")
    assert picked.name == picked.best == "better" and picked.confirmation.p_value <= 0.05 and "confirmation pairs" in picked.reason
    # "lucky" is the best on the selection half and no better on the confirmation half; "hidden" is better only where
    # the choice must not look. The choice is lucky, not confirmed: the unchanged model is kept.
    lucky, hidden = baseline.copy(), baseline.copy()
    lucky[split.select] = better[split.select]
    hidden[split.select] = baseline[split.select] + rng.normal(0, 0.3, len(split.select))
    hidden[split.confirm] = gold[split.confirm]
    kept = decide(gold, split, ("unchanged", baseline), {"lucky": lucky, "hidden": hidden}, "spearman")
    assert kept.best == "lucky" and kept.name == "unchanged" and kept.confirmation.p_value > 0.05


@pytest.mark.slow
def test_a_null_with_many_no_gain_candidates_keeps_the_unchanged_model():
    """Fourteen candidates with no true gain, ten checkpoints each chosen on dev, on 100 seeded simulated users: the
    rule ships one in at most 10 of 100 (its calibrated rate is 5 %); the old rule (best on all dev pairs, bootstrap on
    the same pairs) ships one in most of them, which shows the test can fail."""
    new, old = 0, 0
    for run in range(100):
        rng = np.random.default_rng(run)
        z, e0 = rng.normal(size=200), rng.normal(size=200)
        gold = np.round(z * 2) / 2
        unchanged = z + 0.6 * e0
        checkpoints = z + 0.6 * (0.9 * e0 + 0.37 * rng.normal(size=(14, 1, 200)) + 0.22 * rng.normal(size=(14, 10, 200)))
        split = split_dev(gold, seed=run)
        best = spearman_rows(gold[split.select], checkpoints[:, :, split.select].reshape(140, -1)).reshape(14, 10).argmax(axis=1)
        decision = decide(gold, split, ("unchanged", unchanged), {str(k): checkpoints[k, best[k]] for k in range(14)}, "spearman", seed=run)
        new += decision.name != "unchanged"
        full = spearman_rows(gold, checkpoints.reshape(140, -1)).reshape(14, 10)
        k, c = np.unravel_index(full.argmax(), full.shape)
        old += paired_bootstrap(gold, checkpoints[k, c], unchanged, "spearman", resamples(200, seed=run)).confidence >= 0.95
    assert new <= 10 and old >= 25, (new, old)


def _write(path, text):
    path.write_text(text, encoding="utf-8")
    return path


def test_pairs_choose_their_metric_and_bad_lines_name_file_and_line(tmp_path):
    scores = read_scored_pairs(_write(tmp_path / "s.tsv", "a man\ta guy\t4.5\nthe dog\ta cat\t1.0\n"))
    assert scores.kind == "scores" and scores.metric == "spearman" and scores.pairs[1].score == 1.0
    binary = read_scored_pairs(_write(tmp_path / "b.tsv", "a\tb\t1\nc\td\t0\n"))
    assert binary.kind == "binary" and binary.metric == "average_precision"
    # the metric the labels chose says which labels it reads: what adapt's split, recipes and report go by
    assert METRICS[binary.metric].binary_labels and not METRICS[scores.metric].binary_labels
    bad = {
        "a\tb\t1\nc\td\n": "m.tsv:2: malformed row: expected s1, s2, label (3 tab-separated fields), got 2",
        "a\tb\t1\nc\td\tyes\n": "m.tsv:2: label 'yes' is neither a score (a number) nor 0/1",
        "a\tb\t1\n\tb\t0\n": "m.tsv:2: empty s1",
        "a\tb\t1\nc\td\t1\n": "m.tsv: every pair has the label 1",
        "": "m.tsv: file is empty",
    }
    for text, message in bad.items():
        with pytest.raises(DataError, match=message.replace("(", r"\(").replace(")", r"\)")):
            read_scored_pairs(_write(tmp_path / "m.tsv", text))


def test_corpus_formats_deduplicate_and_reject_empty_input(tmp_path):
    assert read_user_corpus(_write(tmp_path / "c.txt", "one  two\n\nthree\none two\n")) == ["one two", "three"]
    assert read_user_corpus(_write(tmp_path / "c.jsonl", '{"text": "a b"}\n{"text": "c"}\n{"text": "a b"}\n')) == ["a b", "c"]
    assert read_user_corpus(_write(tmp_path / "c.csv", 'id,body\n1,"x, y"\n2,z\n'), column="body") == ["x, y", "z"]
    with pytest.raises(DataError, match="e.txt: file is empty"):
        read_user_corpus(_write(tmp_path / "e.txt", "\n \n"))
    with pytest.raises(DataError, match="e.jsonl: the corpus has no sentences"):
        read_user_corpus(_write(tmp_path / "e.jsonl", '{"text": " "}\n'))
    with pytest.raises(DataError, match=r"j.jsonl:2: no field 'text' or 'sentence' \(fields: body\)"):
        read_user_corpus(_write(tmp_path / "j.jsonl", '{"text": "a"}\n{"body": "b"}\n'))
    with pytest.raises(DataError, match="j2.jsonl:1: not a JSON object"):
        read_user_corpus(_write(tmp_path / "j2.jsonl", "plain text\n"))
    with pytest.raises(DataError, match="k.csv:1: no column 'text'"):
        read_user_corpus(_write(tmp_path / "k.csv", "id,body\n1,a\n"), column="text")


def test_pairs_evaluator_known_answers_and_naive_cosines(tiny_st, tmp_path):
    """Identical sentences have cosine 1 and different ones less, so pairs labelled 1 exactly when identical rank
    perfectly (average precision 100); the cosines equal a naive per-sentence encode."""
    from sentune.tasks.user_pairs import PairsEvaluator

    sentences = ["a man plays the guitar", "the dog runs in the park", "two kids eat food", "stock market price rises today"]
    rows = [(s, s, 1) for s in sentences] + [(a, b, 0) for a, b in zip(sentences, sentences[1:] + sentences[:1], strict=True)]
    path = _write(tmp_path / "pairs.tsv", "".join(f"{a}\t{b}\t{y}\n" for a, b, y in rows))
    evaluator = PairsEvaluator(path)
    assert evaluator.primary_metric == "dev_average_precision"
    assert evaluator(tiny_st) == {"dev_average_precision": pytest.approx(100.0)}
    found = evaluator.similarities(tiny_st)
    naive = []
    for a, b, _ in rows:
        u, v = (tiny_st.encode([s], convert_to_numpy=True)[0].astype(np.float64) for s in (a, b))
        naive.append(u @ v / (np.linalg.norm(u) * np.linalg.norm(v)))
    np.testing.assert_allclose(found, naive, atol=1e-5)
    # Graded scores on the pairs of different sentences (identical ones tie at cosine 1 up to float noise).
    gold = np.array([1.0, 3.0, 2.0, 4.0])
    graded = _write(tmp_path / "graded.tsv", "".join(f"{a}\t{b}\t{g}\n" for (a, b, _), g in zip(rows[4:], gold, strict=True)))
    assert PairsEvaluator(graded).score(tiny_st) == pytest.approx(_naive_spearman(gold, np.array(naive[4:])), abs=1e-6)


def test_wise_interpolation_matches_the_formula_and_refuses_other_shapes(tiny_st):
    """θ(mix) = (1 − mix)·θ_0 + mix·θ_1 for every weight of the transformer (a naive per-tensor sum), the tuned model's
    other modules kept, the base model untouched; mix 0 and 1 are the two ends; another architecture is refused."""
    import copy

    import torch

    from sentune.adaptation.wise import NotInterpolable, best_mix, interpolate, transformer_of

    tuned = copy.deepcopy(tiny_st)
    torch.manual_seed(0)
    with torch.no_grad():
        for param in transformer_of(tuned).parameters():
            param.add_(torch.randn_like(param))
    start = {k: v.clone() for k, v in transformer_of(tiny_st).state_dict().items()}
    end = {k: v.clone() for k, v in transformer_of(tuned).state_dict().items()}
    reused = copy.deepcopy(tuned)  # one copy rewritten for every mix, as the wise candidate's search does
    for mix in (0.0, 0.3, 1.0, 0.6):
        for model in (interpolate(tiny_st, tuned, mix), interpolate(tiny_st, tuned, mix, into=reused)):
            mixed = transformer_of(model).state_dict()
            for name, value in end.items():
                expected = (1 - mix) * start[name] + mix * value if value.is_floating_point() else value
                torch.testing.assert_close(mixed[name], expected, rtol=0, atol=1e-6)
    assert interpolate(tiny_st, tuned, 0.5, into=reused) is reused
    for name, value in transformer_of(tuned).state_dict().items():  # the tuned end is read, never written
        assert torch.equal(value, end[name]), name
    for name, value in transformer_of(tiny_st).state_dict().items():
        assert torch.equal(value, start[name]), name
    sentences = ["a man plays the guitar", "the dog runs"]
    np.testing.assert_allclose(interpolate(tiny_st, tuned, 1.0).encode(sentences), tuned.encode(sentences), atol=1e-6)
    np.testing.assert_allclose(interpolate(tiny_st, tuned, 0.0).encode(sentences), tiny_st.encode(sentences), atol=1e-6)

    wider = copy.deepcopy(tuned)
    layer = transformer_of(wider).encoder.layer[0].intermediate
    layer.dense = torch.nn.Linear(layer.dense.in_features, layer.dense.out_features + 1)
    with pytest.raises(NotInterpolable, match="the transformers differ"):
        interpolate(tiny_st, wider, 0.5)

    assert best_mix({0.1: 80.0, 0.5: 82.0, 0.9: 81.0}) == 0.5
    assert best_mix({0.1: 80.0, 0.3: 82.0, 0.6: 82.0}) == 0.3  # a tie: the one nearer the unchanged model


def test_detectable_gain_interpolates_the_calibration_table(tmp_path, monkeypatch):
    import json

    import sentune.adaptation.decide as decide_module

    table = tmp_path / "gains.json"
    table.write_text(json.dumps({"gains": {"spearman": {"100": None, "250": 4.0, "1000": 2.0}}}))
    monkeypatch.setattr(decide_module, "DETECTABLE", table)
    assert decide_module.detectable_gain("spearman", 250) == 4.0 and decide_module.detectable_gain("spearman", 5000) == 2.0
    assert decide_module.detectable_gain("spearman", 500) == pytest.approx(3.0)  # halfway in log(pairs)
    assert decide_module.detectable_gain("spearman", 120) is None  # between 100 (above the largest simulated gain) and 250: unknown
    assert decide_module.detectable_gain("average_precision", 500) is None


def test_stopping_the_permutations_early_changes_no_decision_at_or_below_its_level():
    """stop_above (the calibration's shortcut): once p must exceed it, the remaining permutations change no decision."""
    rng = np.random.default_rng(7)
    branches = set()
    for trial in range(40):
        gold = rng.normal(size=60)
        baseline = gold + rng.normal(size=60)
        candidate = gold + rng.normal(size=60) * rng.uniform(0.6, 1.2)
        full = paired_permutation_test(gold, candidate, baseline, "spearman", seed=trial)
        quick = paired_permutation_test(gold, candidate, baseline, "spearman", seed=trial, stop_above=0.05)
        if full.p_value <= 0.05:
            assert quick.p_value == full.p_value  # nothing stopped: the same swaps, the same count
        else:
            assert 0.05 < quick.p_value <= full.p_value  # a lower bound, still above the level
        for level in (0.01, 0.03, 0.04, 0.05):
            assert (quick.p_value <= level) == (full.p_value <= level)
        branches.add(full.p_value <= 0.05)
    assert branches == {True, False}  # both the confirmed and the stopped case were met


def test_a_method_that_cannot_train_the_model_family_is_left_out_of_the_race(tiny_mpnet_dir, tiny_model_dir, caplog):
    """TSDAE decodes with the encoder's architecture as a causal LM: MPNet has none, so adapt leaves tsdae out (with the
    reason) instead of stopping when its turn comes; a BERT keeps it."""
    from types import SimpleNamespace

    from sentence_transformers import SentenceTransformer

    from sentune.adaptation.candidates import parse_methods, plan
    from sentune.adaptation.phases import leave_out_untrainable

    for folder, kept in ((tiny_mpnet_dir, False), (tiny_model_dir, True)):
        candidates = plan(parse_methods("simcse,tsdae"), "mean", reference=False)
        leave_out_untrainable(candidates, SimpleNamespace(base=SentenceTransformer(str(folder), device="cpu")))
        assert [c.name for c in candidates.raced] == (["simcse", "tsdae"] if kept else ["simcse"])
    assert "tsdae is left out: TSDAE decodes with the encoder's own architecture as a causal language model" in caplog.text


def test_prune_removes_every_model_folder_of_the_candidates_not_chosen_folds_included(tmp_path):
    from sentune.adaptation.run import prune

    models = ["chosen/model", "simcse/model", "supervised/fold-0/run/model", "supervised/fold-1/run/model", "flow/a/model"]
    for rel in models:
        (tmp_path / "candidates" / rel).mkdir(parents=True)
        (tmp_path / "candidates" / rel / "model.safetensors").write_text("w")
    (tmp_path / "candidates" / "supervised" / "record.json").write_text("{}")
    removed = prune(tmp_path, "chosen")
    assert sorted(p.relative_to(tmp_path / "candidates").as_posix() for p in removed) == sorted(models[1:])
    assert (tmp_path / "candidates" / "chosen" / "model").is_dir() and (tmp_path / "candidates" / "supervised" / "record.json").is_file()
    assert not any((tmp_path / "candidates" / rel).exists() for rel in models[1:])


def test_candidate_records_in_the_shape_on_disk_read_back_typed_and_are_written_unchanged(tmp_path):
    """candidate.json as adapt writes it (and as run folders already on disk hold it): each kind's flat object reads
    back into the typed record the run's choices read, and is written again key for key."""
    from sentune.adaptation.records import CandidateRecord, load_record
    from sentune.search.fusion import Fusion

    common = {"seconds": 0.5, "peak_memory_mib": 595.0}
    supervised = {
        "name": "supervised",
        "kind": "supervised",
        **common,
        "setting": "adapt/cosent",
        "start": "unchanged",
        "run": "candidates/supervised/run",
        "trained_on": "the selection part (cross-fitted)",
        "train_units": 4,
        "folds": 2,
        "dev_indices_trained_on": [1, 2, 5, 8],
        "fold_dev_indices_trained_on": [[1, 5], [2, 8]],
        "recipe": {"name": "cosent"},
        "train_sha256": None,
        "dev_score": 83.4,
    }
    given = supervised | {"trained_on": "--train", "dev_indices_trained_on": [], "train_sha256": "ab12"}
    del given["fold_dev_indices_trained_on"], given["folds"]
    stopped = {
        "name": "ct",
        "kind": "trained",
        **common,
        "setting": "ct",
        "run": "candidates/ct/run",
        "recipe": {"name": "ct"},
        "stopped": {"reason": "behind the unchanged model", "at_step": 2, "best_step": 1},
        "best_checkpoint": {"step": 1, "dev_score": 82.9},
        "selection_only": True,
        "dev_score": 82.9,
    }
    hybrid = {
        "name": "hybrid-supervised",
        "kind": "hybrid",
        **common,
        "setting": "convex, α = 0.15 on the dense scores",
        "source": "supervised",
        "fusion": {"kind": "convex", "alpha": 0.15},
        "lexical": "BM25",
        "weight_from": "hybrid",
        "trained_on": "the selection part (cross-fitted)",
        "dev_indices_trained_on": [2, 4],
        "dev_score": 36.4,
    }
    skipped = {"name": "hybrid-best", "kind": "hybrid", **common, "skipped": "the unchanged model is the best dense candidate"}
    rrf = {"name": "rrf", "kind": "baseline", **common, "setting": "reciprocal rank fusion, k = 60", "fusion": {"kind": "rrf", "k": 60}, "dev_score": 26.1}
    for saved in (supervised, given, stopped, hybrid, skipped, rrf):
        folder = tmp_path / saved["name"]
        folder.mkdir(exist_ok=True)
        (folder / "candidate.json").write_text(json.dumps(saved))
        record = load_record(folder)
        assert record.to_dict() == saved and record.scored == ("dev_score" in saved)
    typed = [CandidateRecord.from_dict(r) for r in (supervised, given, stopped, hybrid, skipped, rrf)]
    assert [r.trained_on for r in typed] == ["selection", "train", None, "selection", None, None]
    assert [r.read_selection for r in typed] == [True, False, False, True, False, False]
    assert typed[0].fold_dev_indices_trained_on == [[1, 5], [2, 8]] and typed[1].detail["train_sha256"] == "ab12"
    assert typed[2].stopped is not None and typed[2].stopped.at_step == 2 and typed[2].best_step == 1 and typed[2].run == "candidates/ct/run"
    assert typed[3].fusion == Fusion("convex", 0.15) and typed[3].source == "supervised" and typed[5].fusion == Fusion("rrf", k=60)
    assert typed[4].skipped == skipped["skipped"] and typed[4].dev_score is None
    # the weights a record stands for: a finished run's model, a raced-out run's best checkpoint, none once removed
    (tmp_path / "candidates/ct/run/checkpoints/checkpoint-1").mkdir(parents=True)
    (tmp_path / "candidates/ct/run/checkpoints/checkpoint-1/modules.json").write_text("[]")
    assert typed[2].weights(tmp_path) == tmp_path / "candidates/ct/run/checkpoints/checkpoint-1" and typed[0].weights(tmp_path) is None


def test_the_report_reads_baselines_and_hybrids_from_what_results_json_records_and_older_files_by_their_kind():
    from sentune.adaptation.report import candidate_table

    def row(name: str, kind: str, **fields) -> dict:
        part = {"score": 50.0, "low": 40.0, "high": 60.0}
        return {"name": name, "kind": kind, "seconds": 60.0, "chosen": False, "eligible": True, "select": part, "confirm": part, "test": None} | fields

    hybrid = {"source": "unchanged", "setting": "convex, α = 0.3 on the dense scores", "fusion": {"kind": "convex", "alpha": 0.3}}
    rrf = {"setting": "reciprocal rank fusion, k = 60", "fusion": {"kind": "rrf", "k": 60}}
    meta = {"test": None, "dev": {"metric": "ndcg@10"}, "rule": "select-confirm"}
    written = {
        "unchanged": row("unchanged", "unchanged", dense=True, chosen=True),
        "hybrid": row("hybrid", "hybrid", dense=False, **hybrid),
        "rrf": row("rrf", "baseline", dense=False, eligible=False, **rrf),
        "wise": row("wise", "wise", dense=True, source="simcse", mix=0.4),
    }
    older = {name: {k: v for k, v in c.items() if k != "dense"} for name, c in written.items()}
    for candidates in (written, older):
        lines = {line.split(" | ")[0]: line for line in candidate_table({"meta": meta, "candidates": candidates}).splitlines()[2:]}
        assert lines["| `unchanged`"].endswith("| 1.0 | **chosen** |")
        assert lines["| `hybrid`"].endswith("| BM25 + unchanged, convex, α = 0.3 on the dense scores |")
        assert lines["| `rrf`"].endswith("| reference, never chosen |")
        assert lines["| `wise`"].endswith("| 0.6·unchanged + 0.4·simcse |")


def test_the_candidate_store_keeps_scores_in_one_shape_and_reads_the_older_one(tmp_path):
    """A finished candidate's scores keep its selection units' beside every dev and test unit's; a raced-out one's the
    selection units' alone; a folder written before `select` was kept reads the same as one written now."""
    selection = np.array([4, 0, 2])
    store = CandidateStore(tmp_path, selection)
    dev, test = np.arange(6, dtype=float) / 10, np.array([0.5, 0.25])
    for name in ("done", "stopped", "older"):
        store.folder(name).mkdir(parents=True)
    store.save_scores("done", {"dev": dev, "test": test})
    store.save_scores("stopped", {"select": dev[selection]})
    np.savez(store.folder("older") / "scores.npz", dev=dev, test=test)  # the shape before `select` was kept
    done, stopped, older = store.scores("done"), store.scores("stopped"), store.scores("older")
    assert sorted(np.load(store.folder("done") / "scores.npz").files) == ["dev", "select", "test"]
    for found in (done, stopped, older):
        np.testing.assert_array_equal(found["select"], [0.4, 0.0, 0.2])
    assert store.complete(done) and store.complete(older) and not store.complete(stopped) and sorted(older) == sorted(done)
    np.testing.assert_array_equal(done["test"], test)
    calls = []
    encoded = store.vectors("done", lambda: calls.append(1) or np.ones((2, 3)))
    assert store.vectors("done", lambda: calls.append(1) or np.zeros((2, 3))).sum() == encoded.sum() == 6 and calls == [1]  # encoded once
    assert store.kept_vectors("stopped") is None and store.kept_vectors("done") is not None
