#!/usr/bin/env bash
# Build the API reference from the docstrings (pdoc; docs/development.md says why) into build/api (or the folder given),
# failing on any warning pdoc gives (an annotation it cannot resolve, a module it cannot import): warnings as errors.
# The modules documented: `sentune` (the Python API's names), sentune.api.* and the data kinds (sentune.data.kinds).
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck disable=SC1091
. "$repo/scripts/setup.sh"
cd "$repo"
export HF_HUB_OFFLINE=1
python - "${1:-build/api}" <<'PY'
import os
import sys
import warnings
from pathlib import Path

import pdoc

modules = ["sentune", "sentune.api", "sentune.data.kinds"]
out = Path(sys.argv[1])
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    pdoc.pdoc(*modules, "!sentune.api.common", "!sentune.api.given", output_directory=out)
# pdoc's own warnings only: a library's deprecation notice at import is not the reference's problem
own = [w for w in caught if w.filename.startswith(os.path.dirname(pdoc.__file__))]
for w in own:
    print(f"docs: {w.category.__name__}: {w.message}", file=sys.stderr)
if own:
    sys.exit(f"docs: {len(own)} warning(s) from pdoc: the reference is not built clean")
print(f"docs: API reference in {out}/index.html ({len(list(out.rglob('*.html')))} pages)")
PY
