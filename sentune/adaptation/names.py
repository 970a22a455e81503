"""The names `sentune adapt` is configured by, importable without loading any model code (the CLI's help and its
option checks read them before anything heavy is imported)."""

from sentune.postprocess import POSTPROCESSORS

UNCHANGED = "unchanged"
UNTUNED_POOLINGS = ("cls", "mean", "max", "first-last", "last2")
POSTPROCESSED = tuple(POSTPROCESSORS)  # one candidate per registered post-processor, by its name
TRAINED = ("simcse", "mirror", "ct", "sg-opt", "tsdae")  # each a bundled recipe sentune/recipes/adapt/NAME.yaml
SED = "sed"
WISE = "wise"
REFERENCE = "st-simcse"
BM25 = "bm25"  # search: the lexical baseline (stemmed), reported, never chosen
BM25_UNSTEMMED = "bm25-unstemmed"  # search: BM25 without the stemmer, what stemming adds; reported
BM25_FITTED = "bm25-fitted"  # search: BM25 with k1, b and the title weight fitted on the selection queries; reported
HYBRID = "hybrid"  # search: BM25 fused with a dense candidate (sentune.search.fusion)
UNCHANGED_MAXP = "unchanged-maxp"  # search: the unchanged model, documents by their best passage (MaxP); reported, never chosen
RRF = "rrf"  # search: reciprocal rank fusion of BM25 and the unchanged model; reported, never chosen
GENQ = "genq"  # trained on the user's generated queries (--queries-from); not in METHODS: it runs whenever they are given
SUPERVISED_RECIPES = {"graded": "cosent", "binary": "online-contrastive", "search": "mnrl-hard-negatives"}  # adapt/NAME.yaml by labels
SUPERVISED = "supervised"  # fine-tuned on the user's labels (--train, else the selection part, cross-fitted); --no-labels leaves it out
SUPERVISED_STACKED = "supervised-stacked"  # the same, from the best label-free trained candidate
QUERY_SIDE = "query-side"  # search: the query encoder alone fine-tuned on the labels against the index's document vectors
CROSS_FIT, HELD_OUT = "cross-fitted", "held out"  # how a supervised candidate is judged on --train's evidence selection pairs (Supervised.evidence_mode)
EVIDENCE_CAP = 4000  # --train pairs that also judge the candidates that never trained on them (sentune.adaptation.evidence)
ICT = "ict"  # search: trained on Inverse Cloze Task pseudo-queries from the documents (sentune.adaptation.pseudo_queries)
CROP = "crop"  # search: trained on independent-cropping pseudo-queries from the documents
HYBRID_DISTILL = "hybrid-distill"  # search: MarginMSE with the hybrid (BM25 + the unchanged model) as teacher
RETRIEVAL_NATIVE = (ICT, CROP, HYBRID_DISTILL)  # search runs only; each a bundled recipe sentune/recipes/adapt/NAME.yaml
METHODS = (
    "poolings",
    *POSTPROCESSED,
    *TRAINED,
    SED,
    SUPERVISED,
    SUPERVISED_STACKED,
    QUERY_SIDE,
    *RETRIEVAL_NATIVE,
    WISE,
    HYBRID,
)  # what --methods picks from (hybrid, QUERY_SIDE and RETRIEVAL_NATIVE: search runs only)
# Asked for by name only. RETRIEVAL_NATIVE: they cost minutes and gigabytes each on a CPU and did not beat the
# unchanged model on SciFact, nor on Quora's selection queries (benchmarks/results/retrieval.md). tsdae: behind the
# unchanged model on the selection part at the race's first round in every example run (sick, mrpc, stsb, qqp:
# benchmarks/results/adapt.md; scifact: retrieval.md), so the race stopped it each time after minutes of training.
OPT_IN = ("tsdae", *RETRIEVAL_NATIVE)
DEFAULT_METHODS = tuple(m for m in METHODS if m not in OPT_IN)  # --methods left out, a run on pairs
# A search run's defaults also leave out the sentence-pair training methods and what is built from them: on SciFact's
# selection queries each was behind the unchanged model at the race's first round (benchmarks/results/retrieval.md),
# and each of its evaluations encodes the selection pool (minutes per evaluation on a CPU).
SEARCH_OPT_IN = tuple(m for m in (*TRAINED, SED, SUPERVISED_STACKED, WISE) if m not in OPT_IN)
SEARCH_DEFAULT_METHODS = tuple(m for m in DEFAULT_METHODS if m not in SEARCH_OPT_IN)

RULE = "select-confirm"  # results.json's meta.rule; a results.json without one chose by one bootstrap over all dev pairs


def default_methods(search: bool) -> tuple[str, ...]:
    """What a run without --methods tries: a search run's list leaves out SEARCH_OPT_IN."""
    return SEARCH_DEFAULT_METHODS if search else DEFAULT_METHODS
