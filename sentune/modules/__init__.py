"""sentence-transformers modules that sentune saves inside models.

sentence-transformers >= 6 loads classes outside its own namespace only with trust_remote_code=True,
so sentune saves every pooling and post-processor it can as built-in modules (Pooling,
WeightedLayerPooling, Dense, Normalize: see sentune.modules.build) and falls back to these classes only where no
built-in can express the computation (WK pooling, max over several layers).
"""

from sentune.modules.layer_pooling import LayerPooling
from sentune.modules.live_flow import LiveFlow

__all__ = ["LayerPooling", "LiveFlow"]
