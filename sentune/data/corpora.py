"""Named sentence sets (corpora.yaml), or any text file given as `file:PATH`."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import yaml

from sentune.data import readers

CORPORA_FILE = Path(__file__).with_name("corpora.yaml")


@lru_cache(maxsize=None)
def corpus_catalog() -> dict[str, list[dict]]:
    return yaml.safe_load(CORPORA_FILE.read_text(encoding="utf-8"))


def _pairs_to_sentences(pairs) -> list[str]:
    return [s for p in pairs for s in (p.a, p.b)]


def load_sentences(name: str, data_dir: Path, *, unique: bool = True) -> list[str]:
    """Sentences of a named set (nli, wiki, stsb, qqp), of `file:PATH` (one sentence per line), or of
    `tasks:SELECTION` (every sentence of the evaluation tasks selected, e.g. `tasks:STS12,STS13,STS14,
    STS15,STS16`, the set seeds 003/004 fit their flow on)."""
    if name.startswith("file:"):
        sentences = readers.read_corpus(name[5:], skip_blank=True)
    elif name.startswith("tasks:"):
        from sentune.data.catalog import load_task, select_tasks, sentences_of  # the catalog reads data through this package

        sentences = [text for task in select_tasks(name[6:]) for text, _ in sentences_of(load_task(task, data_dir))]
    else:
        catalog = corpus_catalog()
        if name not in catalog:
            raise ValueError(f"unknown sentence set {name!r}; choose {', '.join(catalog)}, file:PATH or tasks:SELECTION")
        sentences = []
        for part in catalog[name]:
            path = data_dir / part["path"]
            fmt = part["format"]
            if part.get("optional") and not path.exists():
                continue
            if fmt == "lines":
                sentences += readers.read_corpus(path)
            elif fmt == "stsb":
                sentences += _pairs_to_sentences(readers.read_stsb_csv(path))
            elif fmt == "pair-tsv":
                sentences += _pairs_to_sentences(readers.read_pair_tsv(path))
            elif fmt == "nli-senteval":
                for split in part["splits"]:
                    sentences += _pairs_to_sentences(readers.read_nli_senteval(path, split))
            else:
                raise ValueError(f"{CORPORA_FILE}: unknown format {fmt!r} in set {name!r}")
    return list(dict.fromkeys(sentences)) if unique else sentences
