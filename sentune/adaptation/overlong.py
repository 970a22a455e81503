"""The warning of a `sentune adapt` run whose sentences are longer than its model reads (sentune.adaptation.phases'
first phase): they are truncated, as every encoder does, and the first is named."""

from __future__ import annotations

import logging

from sentune.adaptation.inputs import Inputs

logger = logging.getLogger(__name__)


def warn_overlong(inputs: Inputs, base) -> None:
    """Sentences longer than the model reads are truncated (as every encoder does): say so, naming the first."""
    from sentune.core.encode import overlong_indices

    limit, task = base.max_seq_length, inputs.task
    corpus = overlong_indices(inputs.corpus, base)
    if corpus:
        first = inputs.corpus[corpus[0]]
        logger.warning(
            "%d of the %d corpus sentences are longer than the model's %d tokens and are read only up to there (the first: %r%s)",
            len(corpus),
            len(inputs.corpus),
            limit,
            first[:60],
            "..." if len(first) > 60 else "",
        )
    if task.search:
        long = overlong_indices([d.text for d in task.documents], base)
        if long:
            logger.info(
                "%d of the %d documents are longer than the model's %d tokens: their first %d are ranked, as BEIR does",
                len(long),
                len(task.documents),
                limit,
                limit,
            )
        return
    for name, pairs in (("dev", task.dev), ("test", task.test)):
        if pairs is None:
            continue
        sentences = [s for p in pairs.pairs for s in (p.a, p.b)]
        hits = sorted({i // 2 for i in overlong_indices(sentences, base)})
        if hits:
            source = pairs.pairs[hits[0]].source
            logger.warning(
                "%d of the %d %s pairs have a sentence longer than the model's %d tokens, read only up to there (the first: %s:%s)",
                len(hits),
                len(pairs.pairs),
                name,
                limit,
                source.path,
                source.line,
            )
