"""Build the API reference from the docstrings (pdoc) into the folder given (default build/api), failing on any warning
pdoc gives (an annotation it cannot resolve, a module it cannot import): warnings as errors. The modules documented:
`sentune` (the Python API's names: every public function and class with its signature), sentune.api.* and the data
kinds (sentune.data.kinds). scripts/docs.sh runs it in the project's environment."""

from __future__ import annotations

import os
import sys
import warnings
from pathlib import Path

import pdoc

MODULES = ["sentune", "sentune.api", "sentune.data.kinds"]


def build(out: Path) -> list[str]:
    """The reference written into `out`; returns pdoc's own warnings (a library's deprecation notice at import is not
    the reference's problem)."""
    import sentune

    for name in sentune.__all__:  # `sentune` resolves its names when first used (a cheap import): pdoc reads the
        getattr(sentune, name)  # module's namespace, so they are resolved first, or the landing page lists none
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        pdoc.pdoc(*MODULES, "!sentune.api.common", "!sentune.api.given", output_directory=out)
    return [f"{w.category.__name__}: {w.message}" for w in caught if w.filename.startswith(os.path.dirname(pdoc.__file__))]


def main(argv: list[str]) -> int:
    out = Path(argv[0] if argv else "build/api")
    own = build(out)
    for warning in own:
        print(f"docs: {warning}", file=sys.stderr)
    if own:
        print(f"docs: {len(own)} warning(s) from pdoc: the reference is not built clean", file=sys.stderr)
        return 1
    print(f"docs: API reference in {out}/index.html ({len(list(out.rglob('*.html')))} pages)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
