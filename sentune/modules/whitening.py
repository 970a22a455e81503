"""WhiteningModule: a fitted whitening kernel saved inside a sentence-transformers model."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from sentence_transformers.base.modules.module import Module


class WhiteningModule(Module):
    """y = normalise((x − μ) W) on `sentence_embedding`; μ and W come from sentune.postprocess.Whitening."""

    config_keys = ["in_features", "n_components", "normalize"]

    def __init__(self, in_features: int, n_components: int, normalize: bool = True) -> None:
        super().__init__()
        self.in_features, self.n_components, self.normalize = in_features, n_components, normalize
        self.register_buffer("mean", torch.zeros(in_features))
        self.register_buffer("kernel", torch.zeros(in_features, n_components))

    def forward(self, features: dict[str, Any], **kwargs) -> dict[str, Any]:
        x = features["sentence_embedding"]
        y = (x - self.mean.to(x.dtype)) @ self.kernel.to(x.dtype)
        features["sentence_embedding"] = F.normalize(y, p=2, dim=-1) if self.normalize else y
        return features

    def get_embedding_dimension(self) -> int:
        return self.n_components

    def save(self, output_path: str, *args, safe_serialization: bool = True, **kwargs) -> None:
        self.save_config(output_path)
        self.save_torch_weights(output_path, safe_serialization=safe_serialization)

    @classmethod
    def load(cls, model_name_or_path: str, subfolder: str = "", **kwargs) -> WhiteningModule:
        hub = {k: kwargs[k] for k in ("token", "cache_folder", "revision", "local_files_only") if k in kwargs}
        config = cls.load_config(model_name_or_path, subfolder=subfolder, **hub)
        module = cls(**{k: config[k] for k in cls.config_keys if k in config})
        cls.load_torch_weights(model_name_or_path, subfolder=subfolder, model=module, **hub)
        return module
