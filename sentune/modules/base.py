"""The one `load` of sentune's saved modules: it resolves the module's folder and config, local or on the
hub, and hands them to the class's `restore` (sentence-transformers calls `load` with these arguments)."""

from __future__ import annotations

from typing import Any, Self

from sentence_transformers.base.modules.module import Module


class SentuneModule(Module):
    @classmethod
    def load(
        cls,
        model_name_or_path: str,
        subfolder: str = "",
        token: bool | str | None = None,
        cache_folder: str | None = None,
        revision: str | None = None,
        local_files_only: bool = False,
        init_defaults: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> Self:
        hub: dict[str, Any] = {"token": token, "cache_folder": cache_folder, "revision": revision, "local_files_only": local_files_only}
        config = cls.load_config(model_name_or_path, subfolder=subfolder, **hub)
        return cls.restore(model_name_or_path, subfolder, hub, config, **kwargs)

    @classmethod
    def restore(cls, model_name_or_path: str, subfolder: str, hub: dict[str, Any], config: dict[str, Any], **kwargs: Any) -> Self:
        """The module from its saved config (and weights, members, ...): each module says how."""
        raise NotImplementedError
