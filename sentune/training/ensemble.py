"""The 'full ensemble' of the SED paper (Table 3): the average of several models' sentence embeddings,
saved as one sentence-transformers model (sentune.modules.ensemble_mean.EnsembleMean) that
`SentenceTransformer(path)` loads and `sentune eval --model FOLDER` measures like any model."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sentune.errors import UserError


def build_ensemble(members: Sequence[Any], pooling: str = "mean", *, device: str = "cpu"):
    """A SentenceTransformer whose embedding is the mean of the members' embeddings under `pooling`; a member is a
    model's name or folder, or a SentenceTransformer in memory (taken as it is)."""
    from sentence_transformers import SentenceTransformer

    from sentune.core.models import load_model
    from sentune.modules.build import with_pooling
    from sentune.modules.ensemble_mean import EnsembleMean

    if not members:
        raise UserError("an ensemble needs at least one member")
    return SentenceTransformer(
        modules=[EnsembleMean([with_pooling(load_model(m, device=device) if isinstance(m, str) else m, pooling) for m in members])], device=device
    )


def save_ensemble(members: list[str], folder: Path, pooling: str = "mean", *, device: str = "cpu") -> Path:
    """Save the full ensemble of `members` into `folder` (atomically; every member's weights inside)."""
    from sentune.modules.build import save_atomic

    return save_atomic(build_ensemble(members, pooling, device=device), Path(folder), readme_extra=ensemble_card(members, pooling))


def ensemble_card(members: Sequence[str], pooling: str) -> str:
    """What the ensemble's model card says of its members (names or folders; "a model in memory" for one given so)."""
    return "\n## Full ensemble (sentune)\n\nThe mean of these models' embeddings (" + pooling + " pooling):\n\n" + "\n".join(f"- `{m}`" for m in members) + "\n"
