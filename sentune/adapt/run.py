"""`sentune adapt`: try every candidate on the user's corpus, score each on the dev (and test) pairs, and keep the
unchanged model unless the candidate best on the selection half of the dev pairs is confirmed better on the other half
(sentune.adapt.decide: every choice reads the selection half only, so the confirmation is a calibrated test).

Output folder:
  adapt.json              the settings (model, data hashes, budget); a resume with other settings is refused
  data/                   corpus.txt (de-duplicated), dev.tsv, test.tsv: exactly what was used; dev-select.tsv: the
                          selection half, the only dev pairs training reads
  candidates/NAME/        one per candidate: candidate.json (its record, written last: marks it done), scores.npz (the
                          cosine of every dev and test pair), run/ (a trained candidate's run folder) or model/ (a
                          post-processed or interpolated one)
  model/                  the chosen model (SentenceTransformer(path) loads it)
  results.json/.md, report.html and its plots

A killed run continues where it stopped: finished candidates are read back, a training candidate resumes from its last
checkpoint. Test pairs are scored for every candidate but never reach the choice.
"""

from __future__ import annotations

import json
import logging
import math
import os
import shutil
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import numpy as np

from sentune.adapt.candidates import SED, TRAINED, WISE, Candidate, own_pooling, plan
from sentune.adapt.decide import MIN_DEV_PAIRS, DevSplit, split_dev
from sentune.adapt.select import RULE
from sentune.core.encode import Encoder
from sentune.core.models import load_model
from sentune.core.results import write_atomic
from sentune.data.catalog import load_task, select_tasks, sha256_of
from sentune.data.user_data import ScoredPairs, read_scored_pairs, read_user_corpus, write_corpus, write_scored_pairs
from sentune.errors import UserError
from sentune.modules.build import save_atomic, with_pooling
from sentune.postprocess import get_postprocessor
from sentune.tasks.bootstrap import METRICS
from sentune.tasks.sts import cosine_scores

logger = logging.getLogger(__name__)

DEFAULT_DEV = "STS-B-dev"  # without --dev (the report says so)
PATIENCE = 3  # evaluations without a new best on dev before a candidate stops early
EVALUATIONS = 10  # dev evaluations per candidate's planned steps
MIN_CORPUS_SENTENCES = 100


class AdaptError(UserError):
    pass


@dataclass
class Budget:
    """Per candidate: at most `steps` optimiser steps (None: one pass over the corpus) and `minutes` of training."""

    steps: int | None = None
    minutes: float | None = None

    @classmethod
    def parse(cls, text: str | None) -> Budget:
        """`500` (steps), `10m` (minutes), `500,10m` (both), `epoch` or nothing (one pass over the corpus)."""
        budget = cls()
        for part in (p.strip() for p in (text or "epoch").split(",")):
            try:
                if part == "epoch":
                    continue
                if part.endswith(("m", "min")):
                    budget.minutes = float(part.rstrip("min"))
                    if not budget.minutes > 0:
                        raise ValueError
                else:
                    budget.steps = int(part)
                    if budget.steps < 1:
                        raise ValueError
            except ValueError:
                raise AdaptError(f"--budget {text!r}: expected STEPS, MINUTESm, both (500,10m) or epoch") from None
        return budget


@dataclass
class AdaptConfig:
    corpus: Path
    model: str = "default"
    corpus_column: str | None = None
    dev: Path | None = None  # None: STS-B dev from the data directory
    test: Path | None = None
    methods: tuple[str, ...] = ()
    budget: Budget = field(default_factory=Budget)
    sed_members: int = 3
    baseline: bool = True
    seed: int = 0  # of the dev split, the bootstrap resamples and the permutations
    example: str | None = None  # the --example it came from, for the report
    show_progress: bool = True
    # What training candidates train: the model's own token pooling without its trailing Normalize when its pipeline is
    # that simple (set by adapt(); CT's dot product and TSDAE's decoder need the raw vector), else 'model'.
    training_pooling: str = "model"


@dataclass
class Inputs:
    corpus: list[str]
    dev: ScoredPairs
    test: ScoredPairs | None
    dev_label: str  # what the dev pairs are, for the report
    split: DevSplit  # which dev pairs select and which confirm (sentune.adapt.decide)


def prepare(config: AdaptConfig, out: Path, data_dir: Path | None) -> Inputs:
    """Read and check the user's files (every problem names file:line before any model loads) and claim the folder for
    these settings; only then write what is used under OUT/data (a refused run leaves a finished one untouched)."""
    corpus = read_user_corpus(config.corpus, config.corpus_column)
    if len(corpus) < MIN_CORPUS_SENTENCES:
        raise AdaptError(f"--corpus {config.corpus}: {len(corpus)} distinct sentence(s); adapt needs at least {MIN_CORPUS_SENTENCES} to train or fit on")
    if config.dev is not None:
        dev_rows, dev_label = [(p.a, p.b, p.score) for p in read_scored_pairs(config.dev).pairs], str(config.dev)
    else:
        if data_dir is None:
            raise AdaptError("--dev not given and no data directory (--data or SENTUNE_DATA) for the STS-B dev pairs it then uses")
        examples = load_task(select_tasks(DEFAULT_DEV)[0], data_dir)
        dev_rows, dev_label = [(p.a, p.b, p.score) for split in examples.values() for p in split], f"{DEFAULT_DEV} (no --dev given)"
    if len(dev_rows) < MIN_DEV_PAIRS:
        raise AdaptError(
            f"--dev {config.dev or DEFAULT_DEV}: {len(dev_rows)} pairs; adapt needs at least {MIN_DEV_PAIRS} (half select, half confirm the choice; "
            "with fewer, only gains of many points could ever be confirmed, see benchmarks/results/adapt_calibration.md)"
        )
    test = read_scored_pairs(config.test) if config.test is not None else None
    if test is not None:
        _warn_shared_pairs(dev_rows, test, config)
    split = split_dev(np.array([r[2] for r in dev_rows]), seed=config.seed)
    files = {
        "corpus.txt": lambda path: write_corpus(path, corpus),
        "dev.tsv": lambda path: write_scored_pairs(path, dev_rows),
        "dev-select.tsv": lambda path: write_scored_pairs(path, [dev_rows[i] for i in split.select]),
    }
    if test is not None:
        files["test.tsv"] = lambda path: write_scored_pairs(path, [(p.a, p.b, p.score) for p in test.pairs])
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out, prefix=".incoming-") as incoming:
        for name, write in files.items():
            write(Path(incoming) / name)
        _claim(out, config, Path(incoming))
        data = out / "data"
        data.mkdir(exist_ok=True)
        for name in files:
            os.replace(Path(incoming) / name, data / name)
    return Inputs(corpus, read_scored_pairs(data / "dev.tsv"), read_scored_pairs(data / "test.tsv") if test else None, dev_label, split)


def _warn_shared_pairs(dev_rows: list[tuple[str, str, float]], test: ScoredPairs, config: AdaptConfig) -> None:
    """A test pair that is also a dev pair (either order) was seen by the choice: its test score proves less."""
    seen = {frozenset((a, b)) for a, b, _ in dev_rows}
    shared = sum(frozenset((p.a, p.b)) in seen for p in test.pairs)
    if shared:
        print(
            f"warning: {shared} of the {len(test.pairs)} test pairs of {config.test} are also dev pairs: the choice has seen them, so their test "
            "score does not measure it independently",
            file=sys.stderr,
        )


def _claim(out: Path, config: AdaptConfig, data: Path) -> None:
    """Record the settings every candidate depends on; a folder holding other settings is refused, never mixed. The
    methods are not among them: a second run may add candidates to a finished one."""
    settings = {
        "model": config.model,
        "rule": RULE,
        "corpus_sha256": sha256_of(data / "corpus.txt"),
        "dev_sha256": sha256_of(data / "dev.tsv"),
        "test_sha256": sha256_of(data / "test.tsv") if (data / "test.tsv").is_file() else None,
        "budget": asdict(config.budget),
        "sed_members": config.sed_members,
        "seed": config.seed,
    }
    path = out / "adapt.json"
    if path.is_file():
        held = json.loads(path.read_text())
        changed = sorted(k for k in settings if held.get(k) != settings[k])
        if changed:
            raise AdaptError(f"{out} holds an adapt run with other {', '.join(changed)} ({path}): choose another --out, or remove that folder")
        return
    write_atomic(path, json.dumps(settings, indent=2))


class Scorer:
    """The cosine of every dev and test pair under a model's own pipeline, or of embeddings already computed. A subset
    of the splits may be asked for: a search on dev never encodes the test pairs."""

    def __init__(self, inputs: Inputs, show_progress: bool) -> None:
        self.show_progress = show_progress
        self.splits = {"dev": inputs.dev} | ({"test": inputs.test} if inputs.test else {})

    def sentences(self, splits: list[str] | None = None) -> list[str]:
        """Both sentences of every pair of the splits, pair by pair (the order of_vectors reads back)."""
        return [s for split in splits or list(self.splits) for p in self.splits[split].pairs for s in (p.a, p.b)]

    def of_vectors(self, vectors: np.ndarray, splits: list[str] | None = None) -> dict[str, np.ndarray]:
        out, start = {}, 0
        for split in splits or list(self.splits):
            rows = vectors[start : start + 2 * len(self.splits[split].pairs)]
            out[split] = cosine_scores(rows[0::2], rows[1::2])
            start += len(rows)
        return out

    def encode(self, model, poolings: list[str], desc: str, splits: list[str] | None = None) -> dict[str, np.ndarray]:
        return Encoder(model, poolings, show_progress=self.show_progress, desc=desc).encode_many(self.sentences(splits))

    def of_model(self, model, desc: str, splits: list[str] | None = None) -> dict[str, np.ndarray]:
        return self.of_vectors(self.encode(model, ["model"], desc, splits)["model"], splits)


def adapt(config: AdaptConfig, out: Path, *, data_dir: Path | None, command: str | None = None) -> dict:
    """Run (or resume) every candidate, choose, save the chosen model and the results; returns results.json's content."""
    from sentune.adapt.report import write_results
    from sentune.adapt.select import select

    inputs = prepare(config, out, data_dir)  # creates `out` only once every input is checked
    base = load_model(config.model)
    own = own_pooling(base)
    config = replace(config, training_pooling=own or "model")
    candidates = plan(config.methods, own, config.baseline)
    scorer = Scorer(inputs, config.show_progress)
    print(
        f"sentune adapt: {len(candidates)} candidates for {config.model} on {len(inputs.corpus)} corpus sentences; "
        f"dev {inputs.dev_label} ({len(inputs.dev.pairs)} pairs, {inputs.dev.metric}); "
        + (f"test {config.test} ({len(inputs.test.pairs)} pairs)" if inputs.test else "no test pairs"),
        flush=True,
    )
    records: dict[str, dict] = {}
    for index, candidate in enumerate(candidates, start=1):
        records[candidate.name] = _run_candidate(candidate, index, len(candidates), base, config, inputs, scorer, out, data_dir, records)
    results = select(records, candidates, inputs, inputs.split, out, config)
    _save_choice(results, candidates, base, out)
    write_results(results, out, command)
    return results


def _run_candidate(candidate, index, total, base, config, inputs, scorer, out, data_dir, records) -> dict:
    folder = out / "candidates" / candidate.name
    done = folder / "candidate.json"
    if done.is_file():
        record = json.loads(done.read_text())
        print(f"[{index}/{total}] {candidate.name}: done before, read back", flush=True)
        return record
    folder.mkdir(parents=True, exist_ok=True)
    print(f"[{index}/{total}] {candidate.name}: {_what(candidate, config, inputs)}", flush=True)
    started = time.perf_counter()
    detail: dict = {}
    if candidate.kind in ("unchanged", "pooling"):
        scores = _untuned(candidate, base, scorer, out)
    elif candidate.kind == "postprocess":
        scores = _postprocessed(candidate, base, scorer, inputs, folder, config)
    elif candidate.kind == "wise":
        scores, detail = _interpolated(base, scorer, inputs, folder, records)
    else:
        members = _sed_members(config, inputs, out, data_dir, records) if candidate.kind == "sed" else None
        if candidate.kind == "sed" and not members:
            scores, detail = {}, {"skipped": "no trained candidate to take an ensemble from (add one of " + ", ".join(TRAINED) + " to --methods)"}
        else:
            detail = _train(candidate, config, inputs, folder / "run", data_dir, members=members)
            scores = scorer.of_model(load_model(str(folder / "run" / "model")), f"{candidate.name}: scoring the pairs")
    if scores:
        np.savez(str(folder / "scores.npz"), **scores)  # type: ignore[arg-type]  # numpy stubs type **kwds as bool
    record = {"name": candidate.name, "kind": candidate.kind, "setting": candidate.setting, "seconds": time.perf_counter() - started, **detail}
    if scores:
        record["dev_score"] = _selection_score(inputs, scores["dev"])  # every choice reads this, never the confirmation pairs
        print(f"[{index}/{total}] {candidate.name}: selection {inputs.dev.metric} {record['dev_score']:.2f} ({record['seconds'] / 60:.1f} min)", flush=True)
    write_atomic(done, json.dumps(record, indent=2))
    return record


def _selection_score(inputs: Inputs, dev_scores: np.ndarray) -> float:
    """A system's score on the selection part of the dev pairs."""
    gold = np.array([p.score for p in inputs.dev.pairs])
    return METRICS[inputs.dev.metric](gold[inputs.split.select], dev_scores[inputs.split.select])


def _what(candidate: Candidate, config: AdaptConfig, inputs: Inputs) -> str:
    if candidate.kind in ("unchanged", "pooling"):
        return "scoring the untuned model" + (f" with {candidate.setting} pooling" if candidate.kind == "pooling" else "")
    if candidate.kind == "postprocess":
        return f"fitting {candidate.setting} on the corpus"
    if candidate.kind == "wise":
        return "interpolating the best tuned candidate's weights with the unchanged model's (WiSE-FT), α chosen on dev"
    if candidate.kind == "baseline":
        return "training sentence-transformers' SimCSE recipe (reported, never chosen)"
    limit = ", ".join(
        filter(
            None,
            [
                f"{config.budget.steps} steps" if config.budget.steps else "one pass over the corpus",
                f"{config.budget.minutes:g} min" if config.budget.minutes else "",
            ],
        )
    )
    return f"training ({limit}; early stop on dev)" + (f", {config.sed_members} members" if candidate.kind == "sed" else "")


def _untuned(candidate: Candidate, base, scorer: Scorer, out: Path) -> dict[str, np.ndarray]:
    """Every untuned pooling in one forward pass (cached for the others), then this candidate's column."""
    flat = dict(np.load(_untuned_cache(base, scorer, out)))
    return {split: flat[f"{candidate.setting}/{split}"] for split in scorer.splits}


def _untuned_cache(base, scorer: Scorer, out: Path) -> Path:
    """One forward pass over the pairs for every untuned pooling: their cosines, and the model's own vectors (the
    post-processors transform those instead of encoding the pairs again)."""
    cache = out / "candidates" / ".untuned.npz"
    if not cache.is_file():
        from sentune.adapt.candidates import UNTUNED_POOLINGS

        vectors = scorer.encode(base, ["model", *UNTUNED_POOLINGS], "scoring the untuned poolings")
        flat = {f"{name}/{split}": sims for name, v in vectors.items() for split, sims in scorer.of_vectors(v).items()}
        np.savez(str(cache), model_vectors=vectors["model"], **flat)  # type: ignore[arg-type]
    return cache


def _corpus_vectors(base, inputs: Inputs, out: Path, show_progress: bool) -> np.ndarray:
    """The corpus under the model's own pipeline, encoded once for every post-processor fitted on it."""
    cache = out / "candidates" / ".corpus-model.npy"
    if not cache.is_file():
        vectors = Encoder(base, "model", show_progress=show_progress, desc="encoding the corpus to fit the post-processors").encode(inputs.corpus)
        np.save(cache, vectors)
    return np.load(cache)


def _postprocessed(candidate: Candidate, base, scorer: Scorer, inputs: Inputs, folder: Path, config: AdaptConfig) -> dict[str, np.ndarray]:
    """Fit on the corpus's embeddings (the model's own pipeline), score the transformed pairs, and save the model with
    the post-processor as its last modules (SentenceTransformer(path) loads it)."""
    from sentence_transformers import SentenceTransformer

    settings = {"show_progress": config.show_progress} if candidate.setting == "flow" else {}
    fitted = get_postprocessor(candidate.setting)(**settings).fit(_corpus_vectors(base, inputs, folder.parents[1], config.show_progress))
    pairs = np.load(_untuned_cache(base, scorer, folder.parents[1]))["model_vectors"]
    save_atomic(SentenceTransformer(modules=list(base) + fitted.to_modules(), device=str(base.device)), folder / "model")
    return scorer.of_vectors(fitted.transform(pairs))


def _interpolated(base, scorer: Scorer, inputs: Inputs, folder: Path, records: dict) -> tuple[dict[str, np.ndarray], dict]:
    """WiSE-FT (sentune.adapt.wise) of the tuned candidate (trained or SED) with the best dev score: every α of the grid
    scored on dev, the best saved under folder/model and scored on dev and test."""
    from sentune.adapt.wise import ALPHAS, NotInterpolable, best_alpha, interpolate

    tuned = [r for r in records.values() if r["kind"] in ("trained", SED) and "dev_score" in r]
    if not tuned:
        return {}, {"skipped": "no tuned candidate to interpolate with (add one of " + ", ".join(TRAINED) + " to --methods)"}
    source = max(tuned, key=lambda r: r["dev_score"])
    path = folder.parents[1] / source["run"] / "model"
    if not path.is_dir():
        return {}, {"skipped": f"{source['name']}'s model is gone ({path}; --prune removes it)"}
    model = load_model(str(path), device=str(base.device))
    dev: dict[float, np.ndarray] = {}  # α → dev cosines, kept: the chosen α's are its dev scores
    try:
        for alpha in ALPHAS:
            dev[alpha] = scorer.of_model(interpolate(base, model, alpha), f"{WISE}: α = {alpha}", ["dev"])["dev"]
    except NotInterpolable as error:
        return {}, {"skipped": f"cannot interpolate with {source['name']}: {error}"}
    curve = {a: _selection_score(inputs, sims) for a, sims in dev.items()}  # α is chosen on the selection pairs only
    alpha = best_alpha(curve)
    print(f"    {WISE}: {source['name']} (dev {source['dev_score']:.2f}) × α = {alpha} (dev {curve[alpha]:.2f})", flush=True)
    chosen = interpolate(base, model, alpha)
    save_atomic(chosen, folder / "model")
    detail = {"source": source["name"], "alpha": alpha, "curve": [[a, s] for a, s in curve.items()] + [[1.0, source["dev_score"]]]}
    rest = [split for split in scorer.splits if split != "dev"]
    return {"dev": dev[alpha]} | (scorer.of_model(chosen, f"{WISE}: scoring the test pairs", rest) if rest else {}), detail


def _overrides(config: AdaptConfig, inputs: Inputs, out: Path, recipe_name: str, baseline: bool = False) -> list[str]:
    """What adapt sets on a bundled candidate recipe: the model, the corpus, the dev pairs, the steps and early stopping.
    The baseline keeps its own defaults (one epoch, the last checkpoint, no budget); only its dev curve is set."""
    from sentune.train.recipe import load_recipe

    data = out / "data"
    batch = load_recipe(recipe_name, check=False).training.batch_size
    epoch = max(1, math.ceil(len(inputs.corpus) / batch))
    overrides = [
        f"model={config.model}",
        f"train_data=file:{data / 'corpus.txt'}",
        f"eval.dev=pairs:{data / 'dev-select.tsv'}",
    ]  # checkpoints chosen on the selection pairs
    if baseline:
        return overrides + [f"training.eval_steps={max(1, math.ceil(epoch / EVALUATIONS))}"]
    steps = config.budget.steps or epoch
    overrides += [
        f"pooling={config.training_pooling}",
        f"training.max_steps={steps}",
        f"training.eval_steps={max(1, math.ceil(steps / EVALUATIONS))}",
        f"training.patience={PATIENCE}",
    ]
    if config.budget.minutes:
        overrides.append(f"training.max_minutes={config.budget.minutes}")
    return overrides


def _train(candidate: Candidate, config, inputs, run: Path, data_dir, *, members: list[str] | None = None, seed: int | None = None) -> dict:
    from sentune.train.recipe import load_recipe
    from sentune.train.trainer import train

    overrides = _overrides(config, inputs, run.parents[2], candidate.setting, baseline=candidate.kind == "baseline")
    if members is not None:
        overrides.append(f"params.members={json.dumps(members)}")
    if seed is not None:
        overrides.append(f"training.seed={seed}")
    recipe = load_recipe(candidate.setting, overrides)
    if not (run / "results.json").is_file():
        train(recipe, run, data_dir=data_dir or Path("."), resume=(run / "checkpoints").exists())
    results = json.loads((run / "results.json").read_text())
    return {
        "run": str(run.relative_to(run.parents[2])),
        "recipe": recipe.to_dict(),
        "best_checkpoint": results["meta"]["best_checkpoint"],
        "training_seconds": results["meta"].get("training_seconds"),
        "finalize": results["meta"].get("finalize"),
    }


def _sed_members(config: AdaptConfig, inputs: Inputs, out: Path, data_dir, records: dict) -> list[str]:
    """Seeds 1..N of the trained candidate with the best dev score: seed 1 is that candidate's own run, the others
    are trained with its recipe and budget under candidates/sed/member-K."""
    trained = [r for r in records.values() if r["kind"] == "trained" and "dev_score" in r]
    if not trained:
        return []
    best = max(trained, key=lambda r: r["dev_score"])
    print(f"    sed: members are seeds 1..{config.sed_members} of {best['name']} (the best trained candidate on dev)", flush=True)
    members = [str(out / best["run"] / "model")]
    source = Candidate(best["name"], "trained", best["setting"])
    for seed in range(2, config.sed_members + 1):
        run = out / "candidates" / SED / f"member-{seed}"
        _train(source, config, inputs, run, data_dir, seed=seed)
        members.append(str(run / "model"))
    return members


def _save_choice(results: dict, candidates: list[Candidate], base, out: Path) -> None:
    """OUT/model: the chosen candidate, loadable with SentenceTransformer(path), its card saying why it was chosen. A
    base model whose pipeline ends by normalising (all-MiniLM-L6-v2) keeps doing so: candidates trained or pooled without
    it get it back (the cosines they were scored on do not change)."""
    chosen = results["choice"]["name"]
    candidate = next(c for c in candidates if c.name == chosen)
    card = f"\n\n## Chosen by sentune adapt\n\n{results['choice']['reason']}\n"
    folder = out / "candidates" / chosen
    if candidate.kind == "unchanged":
        model = base
    elif candidate.kind == "pooling":
        model = with_pooling(base, candidate.setting)
    else:
        model = load_model(str(folder / "model" if candidate.kind in ("postprocess", "wise") else folder / "run" / "model"))
    if type(list(base)[-1]).__name__ == "Normalize" and type(list(model)[-1]).__name__ != "Normalize":
        from sentence_transformers import SentenceTransformer
        from sentence_transformers.models import Normalize

        model = SentenceTransformer(modules=[*model, Normalize()], device=str(model.device))
    save_atomic(model, out / "model", readme_extra=card)
    logger.info("saved the chosen model (%s) to %s", chosen, out / "model")


def prune(out: Path, chosen: str) -> list[Path]:
    """Remove the model folders of candidates not chosen (--prune); their scores and records stay."""
    removed = []
    for folder in (out / "candidates").glob("*"):
        if folder.name == chosen:
            continue
        for model in [folder / "model", *folder.glob("*/model")]:
            if model.is_dir():
                shutil.rmtree(model)
                removed.append(model)
    return removed
