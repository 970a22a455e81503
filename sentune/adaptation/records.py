"""A candidate's record (OUT/candidates/NAME/candidate.json, written last: it marks the candidate done), written here
and read back here for every kind of candidate (sentune.adaptation.candidates), with its scores (sentune.adaptation.store).

In memory a record is a CandidateRecord: the fields the run's choices read are typed (what it trained on, its weights and best checkpoint,
whether it read the selection part, why it was skipped or stopped and the race's check that did, its fusion and source, wise's mix); what only the report reads
stays in `detail`. On disk it is one flat JSON object (to_dict, from_dict), the shape results.json shows."""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np

from sentune.core.memory import peak_resident_mib, release_unreferenced
from sentune.core.progress import say
from sentune.core.results import write_atomic
from sentune.search.fusion import Fusion

logger = logging.getLogger(__name__)
RECORD_FILE = "candidate.json"
TrainedOn = Literal["train", "selection"]
# how candidate.json words what a supervised candidate trained on
TRAINED_ON_WORDS: dict[str, TrainedOn] = {"--train": "train", "the selection part (cross-fitted)": "selection"}


@dataclass(frozen=True)
class Stopped:
    """Why the race stopped a training candidate, at which step, and its best step so far (sentune.adaptation.race)."""

    reason: str
    at_step: int | None
    best_step: int | None


@dataclass(frozen=True)
class BestCheckpoint:
    """The step a training's best evaluation on the selection units was at, and its score there (`more`: what else the
    trainer says of it, kept for the report: its metric's name)."""

    step: int | None
    dev_score: float | None
    more: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {"step": self.step, "dev_score": self.dev_score, **self.more}

    @classmethod
    def from_dict(cls, saved: dict) -> BestCheckpoint:
        rest = dict(saved)
        return cls(rest.pop("step", None), rest.pop("dev_score", None), rest)


@dataclass(frozen=True)
class RaceCheck:
    """The race's check that stopped a candidate: its round, the steps it had planned, the dev and train units that round
    read (`rows`), their unit, their digest (a run resumed on other rows races it again: sentune.adaptation.race_rows)
    and its score there."""

    round: int
    steps: int
    rows: dict[str, int]
    unit: str = "pairs"
    rows_digest: str | None = None
    score: float | None = None

    def to_dict(self) -> dict:
        found = {"round": self.round, "steps": self.steps, "rows": self.rows, "unit": self.unit}
        return found | {key: value for key, value in (("rows_digest", self.rows_digest), ("score", self.score)) if value is not None}

    @classmethod
    def from_dict(cls, saved: dict) -> RaceCheck:
        return cls(saved["round"], saved["steps"], dict(saved["rows"]), saved.get("unit", "pairs"), saved.get("rows_digest"), saved.get("score"))


class RecordError(ValueError):
    """A candidate.json this sentune cannot read (written by another version, or damaged)."""


@dataclass
class CandidateRecord:
    """What candidate.json holds: the fields every kind has, the typed fields some kinds set (None: not this kind's),
    and `detail`, what only the report reads (its setting, recipe, curves, ...)."""

    name: str
    kind: str
    seconds: float = 0.0
    peak_memory_mib: float | None = None
    dev_score: float | None = None  # the selection score: None when the candidate was skipped
    skipped: str | None = None
    stopped: Stopped | None = None  # raced out: its selection score is from its best checkpoint so far
    run: str | None = None  # its training run's folder, relative to OUT
    trained_on: TrainedOn | None = None  # labels it trained on: --train's, or the selection part's (cross-fitted)
    dev_indices_trained_on: list[int] | None = None  # the dev units its training read ([]: none)
    fold_dev_indices_trained_on: list[list[int]] | None = None  # cross-fitted: each fold model's
    train_indices_trained_on: list[int] | None = None  # the --train pairs (their 0-based rows) its training read
    source: str | None = None  # the candidate it is built from (SED's seeds, wise's tuned end, a hybrid's dense part)
    fusion: Fusion | None = None  # search: how it fuses BM25 with its source
    best_checkpoint: BestCheckpoint | None = None  # a training's best evaluation (the weights SED and wise build on)
    race: RaceCheck | None = None  # stopped: the race's check that did (the report's note, a resumed run's rows)
    mix: float | None = None  # wise: the share of the tuned weights in its interpolation with the unchanged model
    detail: dict = field(default_factory=dict)

    @property
    def scored(self) -> bool:
        return self.dev_score is not None

    @property
    def read_selection(self) -> bool:
        """Whether its training read dev units: its scores of them would flatter it, so no choice may read them."""
        return bool(self.dev_indices_trained_on)

    @property
    def best_step(self) -> int | None:
        return None if self.best_checkpoint is None else self.best_checkpoint.step

    def weights(self, out: Path) -> Path | None:
        """The weights it stands for, to build on: a finished run's model, or a raced-out run's best checkpoint so far
        (the race chose against it as the answer, yet as SED's seed 1 or wise's tuned end it may still help). None
        without a run, or when they are gone (--prune, or a checkpoint the trainer rotated away)."""
        if self.run is None:
            return None
        if self.stopped is None:
            path = out / self.run / "model"
        else:
            path = out / self.run / "checkpoints" / f"checkpoint-{self.best_step}"
            if self.best_step is None or not (path / "modules.json").is_file():
                return None
        return path if path.is_dir() else None

    def to_dict(self) -> dict:
        found: dict[str, Any] = {"name": self.name, "kind": self.kind, "seconds": self.seconds, "peak_memory_mib": self.peak_memory_mib}
        words = {value: words for words, value in TRAINED_ON_WORDS.items()}
        typed = {
            "skipped": self.skipped,
            "stopped": None if self.stopped is None else {"reason": self.stopped.reason, "at_step": self.stopped.at_step, "best_step": self.stopped.best_step},
            "run": self.run,
            "trained_on": None if self.trained_on is None else words[self.trained_on],
            "dev_indices_trained_on": self.dev_indices_trained_on,
            "fold_dev_indices_trained_on": self.fold_dev_indices_trained_on,
            "train_indices_trained_on": self.train_indices_trained_on,
            "source": self.source,
            "fusion": None if self.fusion is None else self.fusion.to_dict(),
            "best_checkpoint": None if self.best_checkpoint is None else self.best_checkpoint.to_dict(),
            "race": None if self.race is None else self.race.to_dict(),
            "mix": self.mix,
        }
        found |= {key: value for key, value in typed.items() if value is not None} | self.detail
        if self.dev_score is not None:
            found["dev_score"] = self.dev_score
        return found

    @classmethod
    def from_dict(cls, saved: dict) -> CandidateRecord:
        """A record as to_dict wrote it; the typed fields are the same flat keys the records of earlier versions held."""
        rest = dict(saved)
        stopped, fusion, trained_on = rest.pop("stopped", None), rest.pop("fusion", None), rest.pop("trained_on", None)
        best, mix = rest.pop("best_checkpoint", None), rest.pop("mix", None)
        race = rest.pop("race", None) if stopped else None  # a supervised candidate's `race` is its race's summary (detail)
        return cls(
            rest.pop("name"),
            rest.pop("kind"),
            rest.pop("seconds"),
            rest.pop("peak_memory_mib", None),
            rest.pop("dev_score", None),
            skipped=rest.pop("skipped", None),
            stopped=Stopped(stopped["reason"], stopped.get("at_step"), stopped.get("best_step")) if stopped else None,
            run=rest.pop("run", None),
            trained_on=None if trained_on is None else TRAINED_ON_WORDS[trained_on],
            dev_indices_trained_on=rest.pop("dev_indices_trained_on", None),
            fold_dev_indices_trained_on=rest.pop("fold_dev_indices_trained_on", None),
            train_indices_trained_on=rest.pop("train_indices_trained_on", None),
            source=rest.pop("source", None),
            fusion=None if fusion is None else Fusion.from_dict(fusion),
            best_checkpoint=None if best is None else BestCheckpoint.from_dict(best),
            race=None if race is None else RaceCheck.from_dict(race),
            mix=None if mix is None else float(mix),
            detail=rest,
        )


def record_path(folder: Path) -> Path:
    return folder / RECORD_FILE


def standing(record: CandidateRecord | None) -> str | None:
    """How a record a candidate builds on stands (its name and selection score), kept among that candidate's inputs
    (Candidate.depends_on): a record built on another one, or on one produced again since, is redone."""
    return None if record is None else f"{record.name} {record.dev_score!r}"


def read_back(candidate: Any, ctx: Any) -> CandidateRecord | None:
    """The candidate's record when it finished before (a resumed run), else None; the caller says whether it is kept."""
    done = record_path(candidate.folder(ctx))
    if not done.is_file():
        return None
    return load_record(candidate.folder(ctx))


def write_record(candidate: Any, scores: dict[str, np.ndarray], record: CandidateRecord, seconds: float, label: str, ctx: Any) -> CandidateRecord:
    """Save the candidate's per-unit scores and write its record (`record`: what the candidate found, completed here);
    `scores` empty: the candidate was skipped."""
    folder = candidate.folder(ctx)
    record.detail |= candidate.depends_on(ctx)
    record.seconds, record.peak_memory_mib = seconds, peak_resident_mib()
    if scores:
        ctx.store.save_scores(candidate.name, scores)
        record.dev_score = ctx.selection_score(scores["dev"])  # every choice reads this, never the confirmation part
        say(f"{label} {candidate.name}: selection {ctx.metric} {record.dev_score:.2f} ({seconds / 60:.1f} min)")
    elif record.skipped is not None:
        say(f"{label} {candidate.name}: skipped: {record.skipped}")
    write_atomic(record_path(folder), json.dumps(record.to_dict(), indent=2))
    release_unreferenced()  # the candidate's model is garbage now (sentune.core.memory)
    return record


def trained_record(candidate: Any, run: Path, label: str, ctx: Any, source: str | None = None, member_seconds: float = 0.0) -> CandidateRecord:
    """A finished training run scored on the dev (and test) data with its saved model, and recorded (`source`, and the
    seconds its members took: SED's)."""
    from sentune.core.models import load_model

    started = time.perf_counter()
    results = json.loads((run / "results.json").read_text())
    scores = ctx.scorer.of_model(load_model(str(run / "model"), device=ctx.device), f"{candidate.name}: scoring")
    best = results["meta"]["best_checkpoint"]
    detail = {
        "setting": results["meta"]["recipe"]["name"],
        "recipe": results["meta"]["recipe"],
        "training_seconds": results["meta"].get("training_seconds"),
        "finalize": results["meta"].get("finalize"),
        **({"member_seconds": member_seconds} if source is not None else {}),
    }
    record = CandidateRecord(candidate.name, candidate.kind, run=str(run.relative_to(ctx.out)), source=source, detail=detail)
    record.best_checkpoint = None if best is None else BestCheckpoint.from_dict(best)
    seconds = (results["meta"].get("training_seconds") or 0.0) + time.perf_counter() - started + member_seconds
    return write_record(candidate, scores, record, seconds, label, ctx)


def finish_trained(candidate: Any, label: str, ctx: Any, source: str | None = None, member_seconds: float = 0.0) -> dict[str, np.ndarray]:
    """Record a finished run (the race's `finish`) and return its scores."""
    trained_record(candidate, candidate.run_folder(ctx), label, ctx, source, member_seconds)
    return ctx.store.scores(candidate.name)


def load_record(folder: Path) -> CandidateRecord:
    """The record in `folder`; one this sentune cannot read raises RecordError naming the file and what to do."""
    path = record_path(folder)
    try:
        return CandidateRecord.from_dict(json.loads(path.read_text()))
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise RecordError(
            f"{path}: not a candidate record this sentune reads ({type(exc).__name__}: {exc}); remove {folder} to produce that candidate again"
        ) from exc
