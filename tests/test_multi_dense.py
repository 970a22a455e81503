"""Several dense models fused with BM25 (sentune.search.multi_dense): the fusion against its formula written out, the
weight grid, the weights' choice on a toy whose answer is known, and the `multi-dense` adapt candidate (`--model A,B`,
two tiny random models of two families) scored, saved as an index that ranks as scored, reopened and served."""

from __future__ import annotations

import json

import numpy as np
import pytest
from test_adapt import user_files  # noqa: F401  (the fixture: a corpus and dev pairs)

from sentune.search.fusion import id_order
from sentune.search.multi_dense import MultiFusion, choose_weights, multi_rank, weight_grid

pytest.importorskip("bm25s")
pytest.importorskip("Stemmer")


def naive_fused(systems, weights):
    out = np.zeros_like(systems[0], dtype=np.float64)
    for scores, weight in zip(systems, weights, strict=True):
        for r, row in enumerate(scores):
            low, high = min(row), max(row)
            out[r] += weight * np.array([(x - low) / (high - low) if high > low else 0.0 for x in row])
    return out


def test_the_fusion_of_several_systems_is_its_formula_and_ranks_by_it():
    rng = np.random.default_rng(2)
    a, b, lexical = rng.normal(size=(4, 30)), rng.normal(size=(4, 30)), np.abs(rng.normal(size=(4, 30)))
    lexical[1] = 0.0  # a query sharing no word: BM25 gives 0 to every document, the models decide
    fusion = MultiFusion((0.5, 0.3, 0.2))
    expected = naive_fused([a, b, lexical], fusion.weights)
    np.testing.assert_allclose(fusion.fuse([a, b], lexical), expected, rtol=1e-12)
    ranked, values = multi_rank([a, b], lexical, id_order([f"d{i:02d}" for i in range(30)]), fusion, depth=5)
    assert ranked == [list(np.argsort(-row, kind="stable")[:5]) for row in expected]
    np.testing.assert_allclose(values, [sorted(row, reverse=True)[:5] for row in expected])
    # a query's own document is neither ranked nor read by the normalisation
    own_ranked, _ = multi_rank([a, b], lexical, id_order([f"d{i:02d}" for i in range(30)]), fusion, depth=29, own=[0, None, None, None])
    assert 0 not in own_ranked[0] and len(own_ranked[0]) == 29


def test_the_weight_grid_and_a_choice_whose_answer_is_known():
    grid = weight_grid(3)
    assert len(grid) == 66 and all(abs(sum(w) - 1) < 1e-9 for w in grid) and len(set(grid)) == 66  # C(12, 2) choices
    rng = np.random.default_rng(0)
    noise = lambda: rng.normal(size=(20, 50))  # noqa: E731
    target = np.arange(20)
    good = noise()
    good[np.arange(20), target] += 10.0  # the second model alone puts each query's document first

    def score(ranked):
        return float(np.mean([row[0] == t for row, t in zip(ranked, target, strict=True)]))

    first, second, lexical = noise(), good, noise()
    blocks = [([first[rows], second[rows]], lexical[rows], None) for rows in (slice(0, 7), slice(7, 20))]  # two blocks of queries
    fusion, curve = choose_weights(blocks, id_order([f"d{i:02d}" for i in range(50)]), score, depth=10)
    assert curve[fusion.weights] == 1.0 == max(curve.values()) and curve[(1.0, 0.0, 0.0)] < 0.5 and curve[(0.0, 0.0, 1.0)] < 0.5
    assert fusion.weights[1] > 0


def test_saved_weights_read_back_and_anything_else_is_refused():
    assert MultiFusion.from_dict(json.loads(json.dumps(MultiFusion((0.2, 0.3, 0.5)).to_dict()))) == MultiFusion((0.2, 0.3, 0.5))
    for bad in ({"weights": [0.5, 0.5]}, {"weights": [0.5, 0.6, 0.1]}, {"weights": [-0.1, 0.6, 0.5]}, {}, None):
        with pytest.raises(ValueError):
            MultiFusion.from_dict(bad)  # type: ignore[arg-type]


@pytest.mark.slow
def test_an_adapt_run_fuses_two_models_and_its_index_searches_and_serves_as_scored(tiny_model_dir, tiny_mpnet_dir, tmp_path, monkeypatch):
    from test_prf import run_choosing, searches_and_serves_as_scored

    out, test = run_choosing("multi-dense", f"{tiny_model_dir},{tiny_mpnet_dir}", tmp_path, monkeypatch)
    found = json.loads((out / "results.json").read_text())["candidates"]["multi-dense"]
    assert found["models"] == [str(tiny_mpnet_dir.resolve())] and len(found["weights"]["weights"]) == 3
    settings = json.loads((out / "index.json").read_text())
    assert settings["expansion"]["kind"] == "multi-dense" and settings["expansion"]["weights"] == found["weights"]["weights"]
    searches_and_serves_as_scored(out, test, found["test"]["score"], tmp_path, monkeypatch)


def test_several_models_on_pairs_are_one_line_and_leave_nothing(tiny_model_dir, user_files, tmp_path, capsys):  # noqa: F811
    """`--model A,B` fuses B for search only: a run on pairs says so in one line and writes nothing; an empty name too."""
    from sentune.cli import main

    out = tmp_path / "out"
    base = ["adapt", "--quiet", "--corpus", str(user_files / "corpus.txt"), "--dev", str(user_files / "dev.tsv"), "--out", str(out)]
    for models, message in ((f"{tiny_model_dir},{tiny_model_dir}", "several models are fused for search data only"), (f"{tiny_model_dir},", "an empty name")):
        assert main([*base, "--model", models]) == 2
        err = capsys.readouterr().err.strip()
        assert message in err and err.count("\n") == 0 and "Traceback" not in err, err
        assert not out.exists() or not any(out.iterdir())
