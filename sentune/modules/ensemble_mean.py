"""EnsembleMean: the 'full ensemble' of the SED paper (Table 3) as one sentence-transformers module.

The ensemble's embedding of a sentence is the mean of its members' embeddings (each member: its
transformer with masked-mean pooling of the last layer, the embedding SED distils). Saved as one model
folder with every member inside it (`0_EnsembleMean/member-1`, …), so the folder can be copied or
uploaded on its own. No sentence-transformers built-in can average models, so this class is sentune's:
`SentenceTransformer(path, trust_remote_code=True)` loads it (with sentune installed; the folder ships no
code), and sentune's own tools load it without the flag (sentune.core.models.load_model).

The members must share one tokenizer (SED's members are seeds of one recipe from one checkpoint): the
sentences are tokenized once and every member reads the same ids.
"""

from __future__ import annotations

import os
import typing
from typing import Any

import torch
from sentence_transformers import SentenceTransformer

from sentune.errors import UserError
from sentune.modules.base import SentuneModule


class EnsembleMean(SentuneModule):
    config_keys = ["num_members"]

    def __init__(self, members: list[SentenceTransformer], num_members: int | None = None) -> None:
        super().__init__()
        if not members:
            raise ValueError("an ensemble needs at least one member")
        vocab = members[0].tokenizer.get_vocab()
        for index, member in enumerate(members[1:], start=2):
            if member.tokenizer.get_vocab() != vocab:
                raise UserError(f"ensemble member {index} has another tokenizer than member 1; the members must share one")
        self.members = torch.nn.ModuleList(members)
        self.num_members = len(members)

    def member(self, index: int) -> SentenceTransformer:
        return typing.cast(SentenceTransformer, self.members[index])

    @property
    def tokenizer(self):
        return self.member(0).tokenizer

    @property
    def max_seq_length(self) -> int | None:
        return self.member(0).max_seq_length

    @max_seq_length.setter
    def max_seq_length(self, value: int | None) -> None:
        for index in range(self.num_members):
            self.member(index).max_seq_length = value

    def preprocess(self, inputs, prompt: str | None = None, **kwargs) -> dict[str, Any]:
        return self.member(0).preprocess(inputs, prompt=prompt, **kwargs)

    def tokenize(self, texts, **kwargs) -> dict[str, Any]:
        return self.preprocess(texts, **kwargs)

    def forward(self, features: dict[str, Any], **kwargs) -> dict[str, Any]:
        inputs = {key: value for key, value in features.items() if isinstance(value, torch.Tensor)}
        # Each member gets its own copy of the inputs: a member's modules add their outputs to the dict.
        embeddings = [member(dict(inputs))["sentence_embedding"] for member in self.members]
        features["sentence_embedding"] = torch.stack(embeddings).mean(dim=0)
        return features

    def get_embedding_dimension(self) -> int:
        dim = self.member(0).get_embedding_dimension()
        if dim is None:
            raise RuntimeError("the first ensemble member does not report its embedding size")
        return dim

    def save(self, output_path: str, *args, safe_serialization: bool = True, **kwargs) -> None:
        for index in range(self.num_members):
            self.member(index).save(os.path.join(output_path, f"member-{index + 1}"), safe_serialization=safe_serialization)
        self.save_config(output_path)

    @classmethod
    def restore(cls, model_name_or_path: str, subfolder: str, hub: dict[str, Any], config: dict[str, Any], **kwargs: Any) -> EnsembleMean:
        folder = str(cls.load_dir_path(model_name_or_path, subfolder=subfolder, **hub))
        trust = bool(kwargs.get("trust_remote_code"))  # members with sentune poolings (e.g. WK) need it too
        members = [
            SentenceTransformer(os.path.join(folder, f"member-{index}"), device="cpu", trust_remote_code=trust, model_kwargs={"weights_only": True})
            for index in range(1, config["num_members"] + 1)
        ]
        return cls(members)
