"""How a recipe's `eval.dev` names a user's own dev set instead of a catalog task: `pairs:PATH` (scored pairs) or
`queries:DIR` (a BEIR folder whose qrels split is `select`). Apart from the evaluators, which import
sentence-transformers, so a recipe is checked before it loads."""

from __future__ import annotations

PAIRS_PREFIX = "pairs:"
QUERIES_PREFIX = "queries:"
SELECT_SPLIT = "select"  # the qrels split a selection folder holds (OUT/data/dev-select/qrels/select.tsv)
