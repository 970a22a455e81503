"""How a recipe's `eval.dev` names a user's own dev set instead of a catalog task: `pairs:PATH` (scored pairs) or
`queries:DIR` (a BEIR folder whose qrels split is `select`), parsed once into its data kind (read_dev). Apart from the
evaluators, which import sentence-transformers, so a recipe is checked before it loads."""

from __future__ import annotations

from sentune.data.kinds import RetrievalSet, ScoredPairs

PAIRS_PREFIX = "pairs:"
QUERIES_PREFIX = "queries:"
SELECT_SPLIT = "select"  # the qrels split a selection folder holds (OUT/data/dev-select/qrels/select.tsv)


def dev_file(dev: str) -> tuple[type[ScoredPairs] | type[RetrievalSet], str] | None:
    """`eval.dev` as written → the kind and the path of the user's own dev set it names (None: a catalog task); reads
    nothing."""
    if dev.startswith(PAIRS_PREFIX):
        return ScoredPairs, dev[len(PAIRS_PREFIX) :]
    if dev.startswith(QUERIES_PREFIX):
        return RetrievalSet, dev[len(QUERIES_PREFIX) :]
    return None


def read_dev(dev: str) -> ScoredPairs | RetrievalSet | str:
    """`eval.dev` as written: a user's pairs or queries, read and checked (a bad line is named by file:line), or the
    name of a catalog task, returned as it is."""
    named = dev_file(dev)
    if named is None:
        return dev
    kind, path = named
    return ScoredPairs.from_file(path) if kind is ScoredPairs else RetrievalSet.from_folder(path, SELECT_SPLIT)
