"""An adapt run is its declared phases (sentune.adaptation.phases) over frozen inputs and one mutable RunState
(sentune.adaptation.run_state); its candidate recipes are built and validated once (sentune.adaptation.recipe_book)."""

from __future__ import annotations

import dataclasses
import json
import logging
from pathlib import Path

import numpy as np
import pytest
from conftest import WORDS

from sentune.adaptation.candidates import plan
from sentune.adaptation.inputs import AdaptConfig, prepare
from sentune.adaptation.phases import declared
from sentune.adaptation.run import context_of
from sentune.adaptation.run_state import RunInputs
from sentune.cli import main
from sentune.data.user_data import write_corpus, write_scored_pairs


def _files(folder: Path) -> Path:
    rng = np.random.default_rng(0)
    sentence = lambda: " ".join(rng.choice(WORDS, size=int(rng.integers(3, 8))))  # noqa: E731
    write_corpus(folder / "corpus.txt", [sentence() for _ in range(120)])
    write_scored_pairs(folder / "dev.tsv", [(sentence(), sentence(), float(rng.uniform(0, 5))) for _ in range(100)])
    return folder


def _context(tmp_path: Path, base, methods: tuple[str, ...]):
    config = AdaptConfig(corpus=tmp_path / "corpus.txt", dev=tmp_path / "dev.tsv", model="tiny", methods=methods, show_progress=False)
    out = tmp_path / "run"
    run = RunInputs(config, prepare(config, out, None), out, None, base)
    return context_of(run, plan(methods, "mean", reference=False))


def test_the_run_is_its_declared_phases_in_order(tiny_model_dir, tmp_path, caplog):
    """adapt runs every declared phase once, in the declared order, saying each one's name and time; the records the
    phases return are the run's (results.json holds each)."""
    names = [phase.name for phase in declared()]
    assert names[0] == "prepare" and names[-2:] == ["decide", "write"] and len(set(names)) == len(names)
    args = ["adapt", "--quiet", "--model", str(tiny_model_dir), "--corpus", str(_files(tmp_path) / "corpus.txt"), "--dev", str(tmp_path / "dev.tsv")]
    with caplog.at_level(logging.INFO, logger="sentune.adaptation.run"):
        assert main([*args, "--methods", "whitening", "--out", str(tmp_path / "run")]) == 0
    ran = [r.getMessage() for r in caplog.records if r.name == "sentune.adaptation.run" and r.getMessage().startswith("phase ")]
    assert [line.split(":")[0].removeprefix("phase ") for line in ran] == names
    assert all(line.endswith(" s") for line in ran)
    assert f"phases: {', '.join(names)}" in caplog.text
    results = json.loads((tmp_path / "run" / "results.json").read_text())
    assert {"unchanged", "whitening"} <= set(results["candidates"])
    assert list(results["meta"]["phases"]) == names and results["meta"]["phases"]["write"] is None  # written before it ends
    assert all(results["meta"]["phases"][name] >= 0 for name in names[:-1])


def test_the_run_state_is_the_only_thing_a_run_changes(tiny_st, tmp_path):
    """The context's inputs are frozen (its settings, the user's data, where it writes): assigning any of them raises,
    and the context keeps no state of its own; the state (records, time plan, evidence, ...) is one mutable object."""
    ctx = _context(_files(tmp_path), tiny_st, ("whitening",))
    for owner, name in ((ctx, "records"), (ctx, "time_plan"), (ctx, "config"), (ctx.run, "inputs"), (ctx.config, "seed"), (ctx.inputs, "corpus")):
        with pytest.raises((dataclasses.FrozenInstanceError, AttributeError)):
            setattr(owner, name, None)
    ctx.state.records["x"] = None  # type: ignore[assignment]
    ctx.state.time_plan = "planned"  # type: ignore[assignment]
    assert ctx.records is ctx.state.records and "x" in ctx.records and ctx.time_plan == "planned"
    assert [f.name for f in dataclasses.fields(ctx)] == ["run", "state"]


def test_each_recipe_is_built_and_validated_once(tiny_st, tmp_path, monkeypatch):
    """Asking the run's recipe book for the same candidate recipe again returns the one already validated; another
    (a second seed, fewer minutes left) is validated on its own."""
    import sentune.training.recipe as recipes

    checked: list[str] = []
    validate = recipes.validate_recipe
    monkeypatch.setattr(recipes, "validate_recipe", lambda recipe, name, **kinds: checked.append(name) or validate(recipe, name, **kinds))
    ctx = _context(_files(tmp_path), tiny_st, ("simcse",))
    first = ctx.recipe("adapt/simcse")
    assert ctx.recipe("adapt/simcse") is first and checked == ["adapt/simcse"]
    seeded = ctx.recipe("adapt/simcse", seed=7)
    assert seeded.training.seed == 7 and checked == ["adapt/simcse"] * 2
    assert first.eval.dev == ctx.training_dev() and first.training.max_steps == 4  # 120 sentences, batches of 32: one pass


def test_the_dev_and_test_pairs_stay_the_kinds_given(tmp_path):
    """The run reads the pairs the user gave, each naming its file and line (not a copy rebuilt as OUT/data writes
    it); pairs built in memory are read as every reader reads text (white space collapsed), keeping their sources."""
    from sentune.data.readers import Pair
    from sentune.data.user_data import RowSource, ScoredPairs, read_scored_pairs

    files = _files(tmp_path)
    built = [Pair("a  man   plays", "the dog runs", float(i % 5), RowSource("--test", i)) for i in range(40)]
    config = AdaptConfig(corpus=files / "corpus.txt", dev=files / "dev.tsv", test=ScoredPairs(built, "scores", "--test"), show_progress=False)
    task = prepare(config, tmp_path / "run", None).task
    assert [(p.source.path, p.source.line) for p in task.dev.pairs[:2]] == [(str(files / "dev.tsv"), 1), (str(files / "dev.tsv"), 2)]
    assert task.dev == read_scored_pairs(files / "dev.tsv") and (tmp_path / "run" / "data" / "dev.tsv").is_file()  # still recorded
    assert task.test is not None and task.test.pairs[3].a == "a man plays" and task.test.pairs[3].source == RowSource("--test", 3)


def test_the_base_models_runtime_encodes_the_corpus_and_scores_the_candidates(tiny_st, tmp_path, encoder_runtimes):
    """The runtime the base model was loaded with (several GPUs on an unnumbered cuda) reaches what encodes with it:
    the corpus's encoder and the scorer of every candidate (a PyTorch runtime that shares out its batches)."""
    from sentune.core.runtime import Runtime

    spread = Runtime(spread=True)  # on the CPU it changes nothing: what is checked is that it is given
    config = AdaptConfig(corpus=tmp_path / "corpus.txt", dev=tmp_path / "dev.tsv", model="tiny", methods=("whitening",), show_progress=False)
    _files(tmp_path)
    out = tmp_path / "run"
    run = RunInputs(config, prepare(config, out, None), out, None, tiny_st, runtime=spread)
    ctx = context_of(run, plan(("whitening",), "mean", reference=False))
    given = encoder_runtimes
    ctx.corpus_vectors()
    assert given[-1] is spread
    ctx.scorer.of_model(tiny_st)
    assert given[-1].spread and given[-1].backend == "torch"
