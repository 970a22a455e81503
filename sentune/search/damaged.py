"""The one sentence every refusal of a damaged index ends with (documents, passages), apart from the modules that read
them so that none imports another for it."""

from __future__ import annotations

DAMAGED = "the index is damaged: build it again into an empty --out with `sentune index`"
