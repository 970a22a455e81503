"""Post-processors: fit on embeddings, transform embeddings, and become a module of the saved model."""

from sentune.postprocess.whitening import Whitening

POSTPROCESSORS = {"whitening": Whitening}

__all__ = ["POSTPROCESSORS", "Whitening"]
