"""A `sentune adapt` run split in two: what it reads and never changes (RunInputs: the settings, the user's data as
kinds, where it writes, the base model) and what it changes as it goes (RunState, the one mutable place: the plan as
--time trims it, the records so far, the time plan, --train's evidence, the races' verdicts, the results). The Context
every candidate reads (sentune.adaptation.context) holds one of each and keeps no state of its own."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sentune.adaptation.evidence import Evidence
    from sentune.adaptation.inputs import AdaptConfig, Inputs
    from sentune.adaptation.records import CandidateRecord
    from sentune.tasks.user_pairs import Scorer


@dataclass(frozen=True)
class RunInputs:
    """What one run reads and never changes."""

    config: AdaptConfig
    inputs: Inputs  # the user's data as kinds (corpus, dev/test pairs or the search task), split into select and confirm
    out: Path
    data_dir: Path | None
    base: Any  # the unchanged model (a SentenceTransformer)
    started: float = 0.0  # when the command started (time.monotonic()): what --time counts from
    command: str | None = None  # the command line, for the report
    # what encodes the base model's texts (sentune.core.runtime: on an unnumbered cuda, every GPU takes a share); None: PyTorch
    runtime: Any = None


@dataclass
class RunState:
    """Everything one run changes, in one place (the phases of sentune.adaptation.phases write here, nothing else)."""

    plan: Any  # sentune.adaptation.candidates.Plan (which imports the context): --time takes out those that no longer fit
    scorer: Scorer  # scores every candidate; a search run's ranks the selection queries against their pool once it is made
    records: dict[str, CandidateRecord] = field(default_factory=dict)  # the candidates produced or read back so far
    planned: int = 0  # how many candidates the time plan kept: the n of each "[i/n]"
    labels: dict[str, str] = field(default_factory=dict)  # each candidate's "[i/n]" in the run's messages
    time_plan: Any = None  # sentune.adaptation.time_plan.TimePlan (which the race imports): --time's plan, or its default's
    evidence: Evidence | None = None  # --train's pairs that judge too (pairs runs; sentune.adaptation.train_evidence)
    # the supervised candidates' race (sentune.adaptation.candidates.supervised_race.SupervisedRace; None: no race), run
    # as a phase of its own before the first of them
    supervised_race: Any = None
    results: dict | None = None  # what results.json holds, once the run has chosen
    phases: dict[str, float | None] = field(default_factory=dict)  # each declared phase's seconds (None: not run yet)
