"""`sentune encode`: a text file in, embeddings out (.npy, or .jsonl with the sentence beside its vector)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

from sentune.core.encode import Encoder
from sentune.core.models import load_model
from sentune.data.readers import read_lines
from sentune.errors import UserError


def encode_file(
    model_name: str,
    pooling: str,
    input_path: Path,
    output_path: Path,
    *,
    trust_remote_code: bool = False,
    show_progress: bool = True,
    backend: str = "torch",
    device: str = "cpu",
) -> int:
    if output_path.suffix not in (".npy", ".jsonl"):
        raise UserError(f"output {output_path}: use a .npy or .jsonl file name")
    # Every line is encoded, blank ones too (as the empty string), so row i of the output is line i of the
    # input; the blank ones are counted on stderr.
    sentences = read_lines(input_path, user_file=True)
    blank = [number for number, line in enumerate(sentences, start=1) if not line.strip()]
    if blank:
        print(
            f"warning: {input_path}: {len(blank)} blank lines (first: line {blank[0]}) encoded as empty strings, so that row i is line i",
            file=sys.stderr,
        )
    encoder = Encoder(load_model(model_name, trust_remote_code=trust_remote_code, backend=backend, device=device), pooling, show_progress=show_progress)
    vectors = encoder.encode(sentences)
    output_path.parent.mkdir(parents=True, exist_ok=True)
    if output_path.suffix == ".npy":
        np.save(output_path, vectors)
    else:
        with output_path.open("w", encoding="utf-8") as handle:
            for sentence, vector in zip(sentences, vectors, strict=True):
                handle.write(json.dumps({"text": sentence, "embedding": [round(float(x), 7) for x in vector]}) + "\n")
    if encoder.truncated_indices:
        lines = ", ".join(f"{input_path}:{i + 1}" for i in encoder.truncated_indices[:5])
        print(f"warning: {len(encoder.truncated_indices)} lines longer than {encoder.model.max_seq_length} tokens were truncated: {lines}", file=sys.stderr)
    return len(sentences)
