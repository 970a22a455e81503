"""A candidate's record (OUT/candidates/NAME/candidate.json, written last: it marks the candidate done) and its scores
(scores.npz): written here and read back here, for every kind of candidate (sentune.adapt.candidates)."""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from sentune.core.memory import peak_resident_mib, release_unreferenced
from sentune.core.results import write_atomic

logger = logging.getLogger(__name__)
RECORD_FILE = "candidate.json"


@dataclass
class CandidateRecord:
    """What candidate.json holds: the fields every kind has, and `detail`, what its kind adds (its setting, run, source,
    mix, ...), kept at the top level of the JSON, as results.json shows it."""

    name: str
    kind: str
    seconds: float
    peak_memory_mib: float | None
    dev_score: float | None = None  # the selection score: None when the candidate was skipped
    detail: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        found = {"name": self.name, "kind": self.kind, "seconds": self.seconds, "peak_memory_mib": self.peak_memory_mib, **self.detail}
        if self.dev_score is not None:
            found["dev_score"] = self.dev_score
        return found


def record_path(folder: Path) -> Path:
    return folder / RECORD_FILE


def read_back(candidate: Any, label: str, ctx: Any) -> dict | None:
    """The candidate's record when it finished before (a resumed run), else None."""
    done = record_path(candidate.folder(ctx))
    if not done.is_file():
        return None
    print(f"{label} {candidate.name}: done before, read back", flush=True)
    return json.loads(done.read_text())


def write_record(candidate: Any, scores: dict[str, np.ndarray], detail: dict, seconds: float, label: str, ctx: Any) -> dict:
    """Save the candidate's per-unit scores and write its record; `scores` empty: the candidate was skipped."""
    folder = candidate.folder(ctx)
    detail = {**detail, **candidate.depends_on(ctx)}
    if scores:
        np.savez(str(folder / "scores.npz"), **scores)  # type: ignore[arg-type]  # numpy stubs type **kwds as bool
    record = CandidateRecord(candidate.name, candidate.kind, seconds, peak_resident_mib(), detail=detail)
    if scores:
        record.dev_score = ctx.selection_score(scores["dev"])  # every choice reads this, never the confirmation part
        print(f"{label} {candidate.name}: selection {ctx.metric} {record.dev_score:.2f} ({seconds / 60:.1f} min)", flush=True)
    elif "skipped" in detail:
        print(f"{label} {candidate.name}: skipped: {detail['skipped']}", flush=True)
    found = record.to_dict()
    write_atomic(record_path(folder), json.dumps(found, indent=2))
    release_unreferenced()  # the candidate's model is garbage now (sentune.core.memory)
    return found


def trained_record(candidate: Any, run: Path, label: str, ctx: Any, extra: dict | None = None) -> dict:
    """A finished training run scored on the dev (and test) data with its saved model, and recorded."""
    from sentune.core.models import load_model

    started = time.perf_counter()
    results = json.loads((run / "results.json").read_text())
    scores = ctx.scorer.of_model(load_model(str(run / "model"), device=ctx.device), f"{candidate.name}: scoring")
    detail = {
        "setting": results["meta"]["recipe"]["name"],
        "run": str(run.relative_to(ctx.out)),
        "recipe": results["meta"]["recipe"],
        "best_checkpoint": results["meta"]["best_checkpoint"],
        "training_seconds": results["meta"].get("training_seconds"),
        "finalize": results["meta"].get("finalize"),
        **(extra or {}),
    }
    seconds = (results["meta"].get("training_seconds") or 0.0) + time.perf_counter() - started + (extra or {}).get("member_seconds", 0.0)
    return write_record(candidate, scores, detail, seconds, label, ctx)


def finish_trained(candidate: Any, label: str, ctx: Any, extra: dict | None = None) -> dict[str, np.ndarray]:
    """Record a finished run (the race's `finish`) and return its scores."""
    trained_record(candidate, candidate.run_folder(ctx), label, ctx, extra)
    return dict(np.load(candidate.folder(ctx) / "scores.npz"))


def load_record(folder: Path) -> dict:
    return json.loads(record_path(folder).read_text())
