"""The parts `sentune adapt` stands on (issue 15): the user's pairs and corpus, the metrics the labels choose, and
the paired bootstrap that keeps the unchanged model unless a candidate is better with 95 % confidence."""

from __future__ import annotations

import numpy as np
import pytest

from sentune.data.readers import DataError
from sentune.data.user_data import read_scored_pairs, read_user_corpus
from sentune.tasks.bootstrap import average_precision, best_threshold_accuracy, choose, paired_bootstrap, resamples, spearman


def _naive_spearman(x, y):
    """Pearson of average ranks, ranks counted by hand."""

    def ranks(v):
        return np.array([np.sum(v < a) + (np.sum(v == a) + 1) / 2 for a in v])

    a, b = ranks(x), ranks(y)
    return float(np.corrcoef(a, b)[0, 1] * 100)


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
    labels = (rng.random(200) < 0.4).astype(float)
    scores = labels + rng.normal(0, 1, size=200)
    assert average_precision(labels, scores) == pytest.approx(_naive_average_precision(labels, scores), rel=1e-9)
    naive = max(((scores > t) == (labels == 1)).mean() for t in np.concatenate([[np.inf], scores])) * 100
    assert best_threshold_accuracy(labels, scores) == pytest.approx(naive, rel=1e-12)


def test_paired_bootstrap_matches_a_naive_loop():
    rng = np.random.default_rng(1)
    gold = rng.normal(size=60)
    a, b = gold + rng.normal(0, 1, 60), gold + rng.normal(0, 1.2, 60)
    draws = resamples(60, count=200, seed=3)
    found = paired_bootstrap(gold, a, b, spearman, draws)
    differences = []
    for row in draws:
        differences.append(_naive_spearman(gold[row], a[row]) - _naive_spearman(gold[row], b[row]))
    assert found.confidence == pytest.approx(np.mean(np.array(differences) > 0))
    assert found.difference_low == pytest.approx(np.percentile(differences, 2.5), rel=1e-9)
    assert found.difference_high == pytest.approx(np.percentile(differences, 97.5), rel=1e-9)


def test_choice_keeps_the_baseline_on_ties_and_takes_a_planted_better_candidate():
    rng = np.random.default_rng(2)
    gold = rng.normal(size=300)
    baseline = gold + rng.normal(0, 1.5, 300)
    tied = choose(gold, ("unchanged", baseline), [("a", baseline.copy()), ("b", baseline * 2 + 1)], spearman)
    assert tied.name == "unchanged" and "is kept" in tied.reason
    assert all(c.confidence == 0 for c in tied.comparisons.values())
    better = gold + rng.normal(0, 0.3, 300)
    slightly_worse = baseline + rng.normal(0, 0.5, 300)
    picked = choose(gold, ("unchanged", baseline), [("worse", slightly_worse), ("better", better)], spearman)
    assert picked.name == "better" and picked.comparisons["better"].confidence >= 0.95
    worse = choose(gold, ("unchanged", baseline), [("worse", baseline + rng.normal(0, 3, 300))], spearman)
    assert worse.name == "unchanged" and worse.reason.startswith("no candidate scores above unchanged on dev (the best, worse: ")


def _write(path, text):
    path.write_text(text, encoding="utf-8")
    return path


def test_pairs_choose_their_metric_and_bad_lines_name_file_and_line(tmp_path):
    scores = read_scored_pairs(_write(tmp_path / "s.tsv", "a man\ta guy\t4.5\nthe dog\ta cat\t1.0\n"))
    assert scores.kind == "scores" and scores.metric == "spearman" and scores.pairs[1].score == 1.0
    binary = read_scored_pairs(_write(tmp_path / "b.tsv", "a\tb\t1\nc\td\t0\n"))
    assert binary.kind == "binary" and binary.metric == "average_precision"
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
    """θ_α = (1 − α)·θ_0 + α·θ_1 for every weight of the transformer (a naive per-tensor sum), the tuned model's other
    modules kept, the base model untouched; α = 0 and 1 are the two ends; another architecture is refused."""
    import copy

    import torch

    from sentune.adapt.wise import NotInterpolable, best_alpha, interpolate, transformer_of

    tuned = copy.deepcopy(tiny_st)
    torch.manual_seed(0)
    with torch.no_grad():
        for param in transformer_of(tuned).parameters():
            param.add_(torch.randn_like(param))
    start = {k: v.clone() for k, v in transformer_of(tiny_st).state_dict().items()}
    end = transformer_of(tuned).state_dict()
    for alpha in (0.0, 0.3, 1.0):
        mixed = transformer_of(interpolate(tiny_st, tuned, alpha)).state_dict()
        for name, value in end.items():
            expected = (1 - alpha) * start[name] + alpha * value if value.is_floating_point() else value
            torch.testing.assert_close(mixed[name], expected, rtol=0, atol=1e-6)
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

    assert best_alpha({0.1: 80.0, 0.5: 82.0, 0.9: 81.0}) == 0.5
    assert best_alpha({0.1: 80.0, 0.3: 82.0, 0.6: 82.0}) == 0.3  # a tie: the one nearer the unchanged model
