"""LiveFlow: a trainable Glow flow at the end of a model while it is being trained (BERT-CF's joint
stage), so dev evaluation and checkpoints see the flow. For the final model it is compiled into
built-in Dense modules (sentune.postprocess.flow.compile_to_dense)."""

from __future__ import annotations

from typing import Any

from sentune.modules.base import SentuneModule
from sentune.postprocess.flow import GlowFlow


class LiveFlow(SentuneModule):
    config_keys = ["dim", "n_blocks", "hidden", "permutation", "seed"]

    def __init__(self, dim: int, n_blocks: int = 3, hidden: int = 32, permutation: str = "lu", seed: int = 0) -> None:
        super().__init__()
        self.dim, self.n_blocks, self.hidden, self.permutation, self.seed = dim, n_blocks, hidden, permutation, seed
        self.flow = GlowFlow(dim, n_blocks, hidden, permutation, seed)

    def forward(self, features: dict[str, Any], **kwargs) -> dict[str, Any]:
        features["sentence_embedding"] = self.flow(features["sentence_embedding"])[0]
        return features

    def get_embedding_dimension(self) -> int:
        return self.dim

    def save(self, output_path: str, *args, safe_serialization: bool = True, **kwargs) -> None:
        self.save_config(output_path)
        self.save_torch_weights(output_path, safe_serialization=safe_serialization)

    @classmethod
    def restore(cls, model_name_or_path: str, subfolder: str, hub: dict[str, Any], config: dict[str, Any], **kwargs: Any) -> LiveFlow:
        module = cls(**{k: config[k] for k in cls.config_keys if k in config})
        return cls.load_torch_weights(model_name_or_path, subfolder=subfolder, model=module, **hub)
