"""sentence-transformers modules that sentune saves inside models, so `SentenceTransformer(path)` loads them."""

from sentune.modules.layer_pooling import LayerPooling
from sentune.modules.whitening import WhiteningModule

__all__ = ["LayerPooling", "WhiteningModule"]
