"""LayerPooling: any sentune pooling (sentune.core.pooling) as a saved sentence-transformers module."""

from __future__ import annotations

from typing import Any

from sentence_transformers.base.modules.module import Module

from sentune.core.pooling import PoolingSpec, pool


class LayerPooling(Module):
    """Pools `token_embeddings` / `all_layer_embeddings` into `sentence_embedding` by a pooling name.

    Poolings that read other layers than the last need the transformer to return every hidden state;
    `on_model_ready` switches that on when the model is loaded, so a saved model needs nothing else.
    """

    config_keys = ["pooling", "embedding_dimension", "wk_layer_start", "wk_window"]

    def __init__(self, pooling: str, embedding_dimension: int, wk_layer_start: int = 4, wk_window: int = 2) -> None:
        super().__init__()
        parsed = PoolingSpec.parse(pooling)
        if parsed.tokens == "model":
            raise ValueError("LayerPooling cannot be the 'model' pooling")
        self.spec = PoolingSpec(parsed.name, parsed.tokens, parsed.layers, wk_layer_start, wk_window)
        self.pooling = self.spec.name
        self.embedding_dimension = embedding_dimension
        self.wk_layer_start = wk_layer_start
        self.wk_window = wk_window

    def on_model_ready(self, model: Any) -> None:
        if self.spec.needs_all_layers:
            enable_hidden_states(model)

    def forward(self, features: dict[str, Any], **kwargs) -> dict[str, Any]:
        states = features["all_layer_embeddings"] if self.spec.needs_all_layers else (features["token_embeddings"],)
        features["sentence_embedding"] = pool(self.spec, states, features["attention_mask"])
        return features

    def get_embedding_dimension(self) -> int:
        return self.embedding_dimension

    def save(self, output_path: str, *args, safe_serialization: bool = True, **kwargs) -> None:
        self.save_config(output_path)


def enable_hidden_states(model: Any) -> None:
    """Make the model's first (transformer) module return every hidden state."""
    hf = getattr(model[0], "model", None)
    if hf is None:
        raise ValueError("this pooling needs every hidden state, but the first module is not a transformer")
    hf.config.output_hidden_states = True
