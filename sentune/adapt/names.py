"""The names `sentune adapt` is configured by, importable without loading any model code (the CLI's help and its
option checks read them before anything heavy is imported)."""

UNCHANGED = "unchanged"
UNTUNED_POOLINGS = ("cls", "mean", "max", "first-last", "last2")
POSTPROCESSED = ("whitening", "flow")
TRAINED = ("simcse", "mirror", "ct", "sg-opt", "tsdae")  # each a bundled recipe sentune/recipes/adapt/NAME.yaml
SED = "sed"
WISE = "wise"
REFERENCE = "st-simcse"
BM25 = "bm25"  # retrieval with --reference: the lexical baseline, never chosen
GENQ = "genq"  # trained on the user's generated queries (--queries-from); not in METHODS: it runs whenever they are given
METHODS = ("poolings", *POSTPROCESSED, *TRAINED, SED, WISE)  # what --methods picks from
RULE = "select-confirm"  # results.json's meta.rule; runs before issue 27 have none (one bootstrap on all dev pairs)
