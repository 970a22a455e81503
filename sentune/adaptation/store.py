"""OUT/candidates: what the candidates of one run keep beside their records (sentune.adaptation.records), reached through
CandidateStore's methods, never by path: each candidate's scores, its vectors of every dev and test text, and the
unchanged model's encodings every candidate reads (its poolings' scores, its own vectors, the corpus's vectors, the
documents' later windows).

Every file here is a cache a resumed run reads instead of encoding again (the run's own record is candidate.json and
results.json); a candidate's scores.npz has one shape: `select`, the selection units' scores, always (all a candidate
the race stopped has), and `dev`/`test`, every dev and test unit's, once it is scored on them. A folder written before
`select` was kept in every file (a finished candidate's dev and test only) reads the same."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from pathlib import Path

import numpy as np

SCORES_FILE = "scores.npz"
VECTORS_FILE = ".vectors.npy"
UNTUNED_FILE = ".untuned.npz"
CORPUS_FILE = ".corpus-model.npy"
PASSAGES_FOLDER = ".passages"
SELECT = "select"
# a cross-fitted candidate's fold (sentune.adaptation.crossfit) keeps what it made of its held-out rows, in its fold-K/
HELD_FILES = {"scores": "held_scores.npy", "vectors": "held_vectors.npy"}
OUT_OF_FOLD_TRAIN_FILE = "out-of-fold-train.npz"
EVIDENCE_FILE = "train-scores.npz"  # a candidate's scores of --train's evidence pairs (sentune.adaptation.train_evidence)
UNTUNED_EVIDENCE_FILE = ".untuned-train.npz"  # the unchanged model's scores and pair vectors of them


class CandidateStore:
    """OUT/candidates of one run; `selection`: the dev units of the selection part (split.select), whose scores every
    candidate's `select` holds."""

    def __init__(self, out: Path, selection: np.ndarray) -> None:
        self.root = out / "candidates"
        self.selection = np.asarray(selection)

    def folder(self, name: str) -> Path:
        return self.root / name

    # -- a candidate's scores --
    def save_scores(self, name: str, scores: dict[str, np.ndarray]) -> None:
        """Keep a candidate's scores: every dev and test unit's (`dev`, `test`), or the selection units' alone
        (`select`: a candidate the race stopped)."""
        kept = dict(scores)
        if "dev" in kept:
            kept[SELECT] = kept["dev"][self.selection]
        np.savez(str(self.folder(name) / SCORES_FILE), **kept)  # type: ignore[arg-type]  # numpy stubs type **kwds as bool

    def scores(self, name: str) -> dict[str, np.ndarray]:
        """A candidate's scores as save_scores kept them: `select` always, `dev` and `test` once it was scored on them."""
        found = dict(np.load(self.folder(name) / SCORES_FILE))
        if SELECT not in found:  # written before `select` was kept beside `dev`
            found[SELECT] = found["dev"][self.selection]
        return found

    @staticmethod
    def complete(scores: dict[str, np.ndarray]) -> bool:
        """Whether scores are every dev unit's (False: the selection units' only, a raced-out candidate's)."""
        return "dev" in scores

    # -- encodings, made once per run --
    def vectors(self, name: str, encode: Callable[[], np.ndarray]) -> np.ndarray:
        """A candidate model's vectors of every text the scorer reads, encoded by `encode` the first time."""
        return self._cached(self.folder(name) / VECTORS_FILE, encode)

    def kept_vectors(self, name: str) -> np.ndarray | None:
        """A candidate's vectors when it kept them (vectors), else None."""
        path = self.folder(name) / VECTORS_FILE
        return np.load(path) if path.is_file() else None

    def corpus_vectors(self, encode: Callable[[], np.ndarray]) -> np.ndarray:
        """The corpus under the unchanged model's own pipeline (what the post-processors fit on)."""
        return self._cached(self.root / CORPUS_FILE, encode)

    def has_untuned(self) -> bool:
        return (self.root / UNTUNED_FILE).is_file()

    def save_untuned(self, model_vectors: np.ndarray, scores: dict[str, dict[str, np.ndarray]]) -> None:
        """The unchanged model's own vectors of every text, and each untuned pooling's scores of every split."""
        self.root.mkdir(parents=True, exist_ok=True)
        flat = {f"{pooling}/{split}": found for pooling, splits in scores.items() for split, found in splits.items()}
        np.savez(str(self.root / UNTUNED_FILE), model_vectors=model_vectors, **flat)  # type: ignore[arg-type]

    def untuned_scores(self, pooling: str, splits: Iterable[str]) -> dict[str, np.ndarray]:
        with np.load(self.root / UNTUNED_FILE) as flat:
            return {split: flat[f"{pooling}/{split}"] for split in splits}

    def untuned_vectors(self) -> np.ndarray:
        with np.load(self.root / UNTUNED_FILE) as flat:
            return flat["model_vectors"]

    def later_windows(self, name: str, count: int, encode: Callable[[], np.ndarray]) -> np.ndarray:
        """The unchanged model's vectors of the documents' `count` later windows (sentune.adaptation.unchanged_passages)."""
        path = self.root / PASSAGES_FOLDER / f"{name}.npy"
        if path.is_file() and len(np.load(path, mmap_mode="r")) != count:  # another corpus or model: encoded again
            path.unlink()
        return self._cached(path, encode)

    # -- --train's evidence pairs (sentune.adaptation.train_evidence), kept for one draw of them (its digest) --
    def evidence_scores(self, name: str | None, digest: str) -> dict[str, np.ndarray] | None:
        """What save_evidence_scores kept of candidate `name` (None: the unchanged model's encodings) for the evidence
        pairs of `digest`; None when nothing is kept for them."""
        path = self.root / UNTUNED_EVIDENCE_FILE if name is None else self.folder(name) / EVIDENCE_FILE
        if not path.is_file():
            return None
        with np.load(path) as found:
            kept = {key: found[key] for key in found.files}
        return kept if str(kept.pop("digest")) == digest else None

    def save_evidence_scores(self, name: str | None, digest: str, scores: dict[str, np.ndarray]) -> None:
        path = self.root / UNTUNED_EVIDENCE_FILE if name is None else self.folder(name) / EVIDENCE_FILE
        path.parent.mkdir(parents=True, exist_ok=True)
        np.savez(str(path), digest=np.array(digest), **scores)  # type: ignore[arg-type]

    # -- a cross-fitted candidate's folds (sentune.adaptation.crossfit) --
    def fold_folder(self, name: str, fold: int) -> Path:
        """Where fold `fold` of candidate `name` trains (its train.tsv records the rows it trained on)."""
        return self.folder(name) / f"fold-{fold}"

    def save_held(self, name: str, fold: int, what: str, found: np.ndarray) -> None:
        """Keep what a fold made of its held-out rows: their scores (`scores`: the fold race's first fold, read back by
        the candidate's cross-fitting) or its vectors of them (`vectors`: a search fold's, read by the hybrid of it)."""
        path = self.fold_folder(name, fold) / HELD_FILES[what]
        path.parent.mkdir(parents=True, exist_ok=True)
        np.save(path, found)

    def has_held(self, name: str, fold: int, what: str) -> bool:
        return (self.fold_folder(name, fold) / HELD_FILES[what]).is_file()

    def held(self, name: str, fold: int, what: str) -> np.ndarray:
        return np.load(self.fold_folder(name, fold) / HELD_FILES[what])

    def save_out_of_fold_train(self, name: str, digest: str, indices: np.ndarray, mixes: np.ndarray, scores: np.ndarray) -> None:
        """A candidate cross-fitted over the --train evidence selection pairs (sentune.adaptation.candidates.supervised): the
        pairs (`indices` into --train), the mixes with the unchanged model it scored them at (1: the model itself,
        others: WiSE-FT's, sentune.adaptation.wise) and its scores (mixes x pairs), each from the fold model that never
        trained on the pair; `digest`: the evidence pairs they are of (sentune.adaptation.evidence.Evidence.digest)."""
        np.savez(str(self.folder(name) / OUT_OF_FOLD_TRAIN_FILE), digest=np.array(digest), indices=indices, mixes=mixes, scores=scores)

    def out_of_fold_train(self, name: str, digest: str) -> tuple[np.ndarray, dict[float, np.ndarray]] | None:
        """What save_out_of_fold_train kept for these evidence pairs: the --train indices, and each mix's scores of
        them; None when it kept none for them."""
        path = self.folder(name) / OUT_OF_FOLD_TRAIN_FILE
        if not path.is_file():
            return None
        with np.load(path) as found:
            if str(found["digest"]) != digest:
                return None
            return found["indices"], {round(float(mix), 6): row for mix, row in zip(found["mixes"], found["scores"], strict=True)}

    def cache_folder(self, name: str) -> Path:
        """A folder of the store for what a part of the run keeps to read back on resume (the selection pool)."""
        return self.root / name

    def _cached(self, path: Path, encode: Callable[[], np.ndarray]) -> np.ndarray:
        if not path.is_file():
            path.parent.mkdir(parents=True, exist_ok=True)
            partial = path.with_suffix(".partial.npy")
            np.save(partial, encode())
            os.replace(partial, path)  # a killed run leaves no half-written cache to read back
        return np.load(path)
