"""Post-processors fitted on the corpus's embeddings (sentune.postprocess: whitening, the flow)."""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from sentune.adaptation.candidates.base import Candidate, PlanSetup
from sentune.adaptation.names import POSTPROCESSED
from sentune.adaptation.records import CandidateRecord

if TYPE_CHECKING:
    import numpy as np

    from sentune.adaptation.context import Context
    from sentune.adaptation.time_plan import Costs


@dataclass
class PostProcessed(Candidate):
    """Fitted on the corpus's embeddings (the model's own pipeline); saved with the post-processor as its last modules."""

    postprocessor: str = ""
    kind: ClassVar[str] = "postprocess"

    @classmethod
    def planned(cls, setup: PlanSetup) -> list[Candidate]:
        return [cls(p, p) for p in POSTPROCESSED if p in setup.methods]

    def describe(self, ctx: Context) -> str:
        return f"fitting {self.postprocessor} on the corpus"

    def depends_on(self, ctx: Context) -> dict:
        # a search run fits on the documents' vectors (SearchContext.corpus_vectors): a record fitted otherwise is redone
        return {"fitted_on": "documents"} if ctx.inputs.task.search else {}

    def expected_seconds(self, ctx: Context, costs: Costs) -> float:
        return costs.encode(ctx.corpus_to_encode())  # the corpus encoded once for the post-processors (the first pays)

    def run(self, ctx: Context) -> tuple[dict[str, np.ndarray], CandidateRecord]:
        from sentence_transformers import SentenceTransformer

        from sentune.modules.build import save_atomic
        from sentune.postprocess import get_postprocessor

        kind = get_postprocessor(self.postprocessor)
        offered = {"show_progress": ctx.config.show_progress, "device": ctx.device}  # each takes those its __init__ names
        settings = {k: v for k, v in offered.items() if k in inspect.signature(kind).parameters}
        fitted = kind(**settings).fit(ctx.corpus_vectors())
        save_atomic(SentenceTransformer(modules=list(ctx.base) + fitted.to_modules(), device=ctx.device), self.folder(ctx) / "model")
        scores = ctx.scorer.of_vectors(fitted.transform(ctx.untuned_vectors()))
        return scores, CandidateRecord(self.name, self.kind, detail={"setting": self.postprocessor})
