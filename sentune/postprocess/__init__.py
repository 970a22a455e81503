"""Post-processors: fit on embeddings, transform embeddings, and become a module of the saved model."""

from sentune.postprocess.flow import Flow
from sentune.postprocess.whitening import Whitening

POSTPROCESSORS = {"whitening": Whitening, "flow": Flow}

__all__ = ["POSTPROCESSORS", "Flow", "Whitening"]
