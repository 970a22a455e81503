"""What `sentune adapt` tries, in order: the model as it is (always), its other untuned poolings, whitening and the flow
fitted on the corpus (postprocessed), the label-free training methods (raced against each other, sentune.adaptation.race),
SED over seeds of the best trained one, for search the candidates trained on pseudo-queries from the documents (retrieval_native), the best tuned one's weights interpolated with the unchanged model's (WiSE-FT,
sentune.adaptation.wise) (trained), the model fine-tuned on the user's labels (supervised; for search also its query encoder alone, query_side), for search the hybrid of BM25 and
a dense candidate (search), and the baselines reported beside them and never chosen: BM25 and reciprocal rank fusion
for search, and, only when asked (--reference), sentence-transformers' own SimCSE recipe.

Each kind is one class (base.Candidate says what a kind is) and one line in plan.KINDS, the registry."""

from __future__ import annotations

from sentune.adaptation.candidates.base import PHASES, Candidate, PlanSetup, WithRun, best, tuned_sources
from sentune.adaptation.candidates.plan import KINDS, Plan, own_pooling, parse_methods, plan
from sentune.adaptation.candidates.postprocessed import PostProcessed
from sentune.adaptation.candidates.query_side import QuerySide
from sentune.adaptation.candidates.retrieval_native import HybridDistill, PseudoQueryTrained
from sentune.adaptation.candidates.search import Hybrid, HybridSupervised, Lexical, Rrf, UnchangedMaxp
from sentune.adaptation.candidates.supervised import Supervised, SupervisedSearch
from sentune.adaptation.candidates.trained import Ensemble, Reference, Trained, Wise
from sentune.adaptation.candidates.untuned import Pooling, Unchanged

__all__ = [
    "KINDS",
    "PHASES",
    "Candidate",
    "Ensemble",
    "Hybrid",
    "HybridDistill",
    "HybridSupervised",
    "Lexical",
    "Plan",
    "PlanSetup",
    "Pooling",
    "PostProcessed",
    "PseudoQueryTrained",
    "QuerySide",
    "Reference",
    "Rrf",
    "Supervised",
    "SupervisedSearch",
    "Trained",
    "Unchanged",
    "UnchangedMaxp",
    "Wise",
    "WithRun",
    "best",
    "own_pooling",
    "parse_methods",
    "plan",
    "tuned_sources",
]
