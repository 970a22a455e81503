"""Safety apart from choice (issue 80; sentune.adaptation.decide): the non-inferiority test against a search reference
(sentune.tasks.permutation.non_inferiority_test), the shrinkage of the selection gains and the expected gain
(sentune.adaptation.expected), each against a naive implementation of its formula; and decide with them."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy.stats import spearmanr

from sentune.adaptation.decide import SEARCH_MARGIN, decide, split_dev
from sentune.adaptation.expected import expected_gains, gain_noise, resample_within, shrink
from sentune.tasks.permutation import LEVEL, non_inferiority_test, paired_permutation_test


def test_identical_scores_are_within_the_margin_and_two_points_worse_are_not():
    rng = np.random.default_rng(0)
    reference = rng.uniform(0, 100, 200)
    same = non_inferiority_test(reference.copy(), reference, margin=1.0)
    assert same.safe and same.p_value == pytest.approx(1 / 1001) and same.difference == 0.0
    worse = non_inferiority_test(reference - 2.0, reference, margin=1.0)
    assert not worse.safe and worse.p_value == 1.0 and worse.difference == pytest.approx(-2.0)


def test_the_non_inferiority_p_value_is_the_exact_sign_flip_count_of_the_shifted_differences():
    """On 10 items every one of the 2^10 sign patterns can be listed: the drawn p-value approaches the exact one."""
    rng = np.random.default_rng(1)
    candidate, reference = rng.normal(50, 10, 10), rng.normal(50, 10, 10)
    shifted = candidate - reference + 1.0
    flips = np.array(list(itertools.product((-1.0, 1.0), repeat=10)))
    exact = float(np.mean((flips * shifted).mean(axis=1) >= shifted.mean() - 1e-9))
    found = non_inferiority_test(candidate, reference, margin=1.0, count=20000, seed=3)
    assert 0.05 < exact < 0.95 and found.p_value == pytest.approx(exact, abs=0.01)
    assert non_inferiority_test(candidate, reference, margin=0.0, count=20000).p_value > found.p_value  # a margin makes it easier


def test_non_inferiority_refuses_a_negative_margin_and_mismatched_items():
    with pytest.raises(ValueError, match="margin"):
        non_inferiority_test(np.ones(5), np.ones(5), margin=-1.0)
    with pytest.raises(ValueError, match="same items"):
        non_inferiority_test(np.ones(5), np.ones(4), margin=1.0)


def test_shrinkage_toward_the_pool_mean_has_the_known_answer():
    # gains 0, 2, 4 with noise 1 each: mean 2, var 4, τ² = 3, each lead kept at 3/4
    assert shrink(np.array([0.0, 2.0, 4.0]), np.ones(3)) == pytest.approx([0.5, 2.0, 3.5])
    # leads no larger than the noise: every gain is the pool's mean
    assert shrink(np.array([0.0, 1.0]), np.array([4.0, 4.0])) == pytest.approx([0.5, 0.5])
    assert shrink(np.array([3.0]), np.array([0.0])) == pytest.approx([3.0])  # one candidate: no pool
    assert expected_gains(np.array([2.0]), np.array([5.0]), np.array([100]), np.array([300])) == pytest.approx([4.25])


def test_the_gain_noise_is_the_brute_force_bootstrap_variance_of_each_lead_over_the_pool():
    rng = np.random.default_rng(4)
    n = 60
    gold = rng.normal(size=n)
    base = gold + rng.normal(0, 1, n)
    candidates = np.stack([gold + rng.normal(0, s, n) for s in (0.8, 1.0, 1.2)])
    strata = np.repeat([0.0, 1.0], [40, 20])
    found = gain_noise("spearman", gold, candidates, base, strata, seed=5, count=50)
    draws = resample_within(strata, n, 50, 5)
    leads = []
    for row in draws:  # each resample by hand: Spearman within each stratum, pair-weighted
        assert set(row[:40]) <= set(range(40)) and set(row[40:]) <= set(range(40, 60))

        def score(values, row=row):
            return sum(len(g) * spearmanr(gold[row[g]], values[row[g]])[0] * 100 for g in (np.arange(40), np.arange(40, 60))) / n

        gains = [score(c) - score(base) for c in candidates]
        leads.append([g - np.mean(gains) for g in gains])
    assert found == pytest.approx(np.var(np.array(leads), axis=0) * 3 / 2, rel=1e-6)


def _queries(seed: int, n: int, means: dict[str, tuple[str, float, float]], spread: float = 20.0) -> dict[str, np.ndarray]:
    """Per-query values of each system: `unchanged` a query's difficulty plus noise; every other system built on one
    listed before it (its name), shifted by a mean, plus its own noise (sd)."""
    rng = np.random.default_rng(seed)
    found = {"unchanged": rng.uniform(20, 80, n)}
    for name, (on, mean, sd) in means.items():
        found[name] = found[on] + mean + rng.normal(0, sd, n)
    return found


def test_of_two_fusions_two_points_apart_the_better_ships_where_it_had_to_beat_the_other_before():
    """rrf is 6 points above the unchanged model, the hybrid 2 above rrf: 200 confirmation queries do not show the
    hybrid better than rrf (the old rule's second superiority test, p > LEVEL: rrf was kept), but they show it within
    one point of rrf, and it beats the unchanged model: it ships."""
    found = _queries(9, 400, {"rrf": ("unchanged", 6.0, 6.0), "hybrid": ("rrf", 2.0, 20.0)})
    gold = np.zeros(400)
    split = split_dev(gold, seed=9)
    old_test = paired_permutation_test(gold[split.confirm], found["hybrid"][split.confirm], found["rrf"][split.confirm], "ndcg@10")
    assert old_test.difference > 1.0 and old_test.p_value > LEVEL  # what kept rrf before
    decision = decide(gold, split, ("unchanged", found["unchanged"]), {"hybrid": found["hybrid"]}, "ndcg@10", unit="queries", references={"rrf": found["rrf"]})
    assert decision.name == "hybrid" and decision.reference == "rrf", decision.reason
    assert decision.safety["hybrid"].superiority.confirmed and decision.safety["hybrid"].non_inferiority["rrf"].safe
    assert "not worse than rrf by 1 point" in decision.reason


def test_a_candidate_that_ties_the_reference_within_the_margin_and_beats_the_unchanged_model_ships():
    found = _queries(8, 300, {"rrf": ("unchanged", 5.0, 5.0), "tie": ("rrf", 0.0, 3.0)})
    gold = np.zeros(300)
    split = split_dev(gold, seed=8)
    decision = decide(gold, split, ("unchanged", found["unchanged"]), {"tie": found["tie"]}, "ndcg@10", unit="queries", references={"rrf": found["rrf"]})
    test = decision.safety["tie"].non_inferiority["rrf"]
    assert decision.name == "tie" and abs(test.difference) < 0.5 and test.margin == SEARCH_MARGIN, decision.reason


def test_a_candidate_worse_than_the_reference_by_more_than_the_margin_does_not_ship():
    found = _queries(9, 300, {"rrf": ("unchanged", 8.0, 5.0), "worse": ("rrf", -2.0, 3.0)})
    gold = np.zeros(300)
    split = split_dev(gold, seed=9)
    decision = decide(gold, split, ("unchanged", found["unchanged"]), {"worse": found["worse"]}, "ndcg@10", unit="queries", references={"rrf": found["rrf"]})
    # visibly so on the selection queries: not even tested
    assert decision.name == "rrf" and decision.best == "worse" and not decision.safety and "within 1 of rrf" in decision.reason, decision.reason
    # within the margin on the selection queries, 2 points worse where it is tested: it beats the unchanged model, and is not safe
    looks = found["worse"].copy()
    looks[split.select] = found["rrf"][split.select] - 0.5
    decision = decide(gold, split, ("unchanged", found["unchanged"]), {"worse": looks}, "ndcg@10", unit="queries", references={"rrf": found["rrf"]})
    safety = decision.safety["worse"]
    assert decision.name == "rrf" and safety.superiority.confirmed and not safety.non_inferiority["rrf"].safe, decision.reason
    assert "is not shown within 1 point of rrf" in decision.reason


def test_of_the_safe_candidates_the_best_on_all_the_evidence_ships_not_the_best_on_the_selection_part():
    """'lucky' leads the selection pairs by a point and is 4 behind 'steady' on the confirmation pairs; both beat the
    unchanged model. The old rule shipped the best on selection; the expected gain (both parts, the selection lead
    shrunk) ships 'steady'."""
    n = 600
    found = _queries(10, n, {"steady": ("unchanged", 6.0, 4.0)})
    gold = np.zeros(n)
    split = split_dev(gold, seed=10)
    lucky = found["steady"].copy()
    lucky[split.select] += 1.0
    lucky[split.confirm] -= 4.0
    decision = decide(gold, split, ("unchanged", found["unchanged"]), {"lucky": lucky, "steady": found["steady"]}, "ndcg@10", unit="queries")
    assert decision.best == "lucky" and set(decision.expected) == {"lucky", "steady"}, decision.reason
    assert decision.name == "steady" and decision.expected["steady"] > decision.expected["lucky"]
    assert "of the 2 safe candidates (lucky, steady)" in decision.reason


def test_the_fixed_sequence_stops_at_the_first_unsafe_candidate():
    """Testing in the selection order and stopping at the first failure is what keeps the chance of shipping an unsafe
    candidate at LEVEL whatever the number tested: the second is never tested once the first fails."""
    n = 400
    found = _queries(11, n, {"good": ("unchanged", 5.0, 4.0)})
    gold = np.zeros(n)
    split = split_dev(gold, seed=11)
    flop = found["unchanged"] + 10.0
    flop[split.confirm] = found["unchanged"][split.confirm]  # far ahead on selection, no better where it is tested
    decision = decide(gold, split, ("unchanged", found["unchanged"]), {"flop": flop, "good": found["good"]}, "ndcg@10", unit="queries")
    assert list(decision.safety) == ["flop"] and decision.name == "unchanged" and "flop" in decision.reason
