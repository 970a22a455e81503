"""The 'full ensemble' of seeds 003/004 (Table 3): the average of several models' sentence embeddings.

A folder holding `ensemble.json` ({"members": [paths], "pooling": "mean"}) loads as an Ensemble through
`sentune.models.load_model`, so `sentune eval --model FOLDER` measures it like any model. Member paths
are relative to the folder or absolute."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

ENSEMBLE_FILE = "ensemble.json"


class Ensemble:
    def __init__(self, members: list, pooling: str = "mean") -> None:
        if not members:
            raise ValueError("an ensemble needs at least one member")
        self.members, self.pooling = members, pooling

    @property
    def max_seq_length(self):
        return self.members[0].max_seq_length

    def encode_many(self, sentences: list[str], poolings: list[str], **encoder_kwargs) -> dict[str, np.ndarray]:
        """Each pooling asked for: 'model' means the ensemble's own (members under `pooling`, averaged)."""
        from sentune.build import with_pooling
        from sentune.encode import Encoder

        total: dict[str, np.ndarray] = {}
        for member in self.members:
            pooled = with_pooling(member, self.pooling)
            names = ["model" if p == "model" else p for p in poolings]
            vectors = Encoder(pooled, names, **encoder_kwargs).encode_many(sentences)
            for name, array in vectors.items():
                total[name] = array.astype(np.float64) + total.get(name, 0)
        return {name: (array / len(self.members)).astype(np.float32) for name, array in total.items()}


def save_ensemble(members: list[str], folder: Path, pooling: str = "mean") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / ENSEMBLE_FILE).write_text(json.dumps({"members": [str(Path(m).resolve()) for m in members], "pooling": pooling}, indent=2))
    return folder


def load_ensemble(folder: Path, load_member) -> Ensemble:
    spec = json.loads((folder / ENSEMBLE_FILE).read_text())
    members = [load_member(str(p if Path(p).is_absolute() else folder / p)) for p in spec["members"]]
    return Ensemble(members, spec.get("pooling", "mean"))
