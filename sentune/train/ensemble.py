"""The 'full ensemble' of the SED paper (Table 3): the average of several models' sentence embeddings,
saved as one sentence-transformers model (sentune.modules.ensemble_mean.EnsembleMean) that
`SentenceTransformer(path)` loads and `sentune eval --model FOLDER` measures like any model."""

from __future__ import annotations

from pathlib import Path

from sentune.errors import UserError


def build_ensemble(members: list[str], pooling: str = "mean", *, device: str = "cpu"):
    """A SentenceTransformer whose embedding is the mean of the members' embeddings under `pooling`."""
    from sentence_transformers import SentenceTransformer

    from sentune.core.models import load_model
    from sentune.modules.build import with_pooling
    from sentune.modules.ensemble_mean import EnsembleMean

    if not members:
        raise UserError("an ensemble needs at least one member")
    return SentenceTransformer(modules=[EnsembleMean([with_pooling(load_model(m, device=device), pooling) for m in members])], device=device)


def save_ensemble(members: list[str], folder: Path, pooling: str = "mean", *, device: str = "cpu") -> Path:
    """Save the full ensemble of `members` into `folder` (atomically; every member's weights inside)."""
    from sentune.modules.build import save_atomic

    card = "\n## Full ensemble (sentune)\n\nThe mean of these models' embeddings (" + pooling + " pooling):\n\n" + "\n".join(f"- `{m}`" for m in members) + "\n"
    return save_atomic(build_ensemble(members, pooling, device=device), Path(folder), readme_extra=card)
