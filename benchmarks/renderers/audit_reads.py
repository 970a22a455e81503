"""Run a renderer (a script, or `-m module`) and append every file it opens under benchmarks/results/runs to LOG:
check_renders.sh runs each renderer through this, then fails on a tracked file there that no renderer read.

    python benchmarks/renderers/audit_reads.py LOG SCRIPT [ARGS...]
    python benchmarks/renderers/audit_reads.py LOG -m MODULE [ARGS...]
"""

from __future__ import annotations

import os
import runpy
import sys
from pathlib import Path

KEPT = (Path(__file__).resolve().parents[1] / "results" / "runs").as_posix()


def main() -> None:
    log, target, *rest = sys.argv[1:]
    read: set[str] = set()

    def hook(event: str, args: tuple) -> None:
        if event == "open" and isinstance(args[0], str | os.PathLike):
            path = os.path.abspath(os.fspath(args[0]))
            if path.startswith(KEPT + "/"):
                read.add(os.path.relpath(path, Path(KEPT).parents[2]))

    sys.addaudithook(hook)
    status = 0
    try:
        if target == "-m":
            sys.argv = [rest[0], *rest[1:]]
            runpy.run_module(rest[0], run_name="__main__", alter_sys=True)
        else:
            sys.argv = [target, *rest]
            sys.path.insert(0, os.path.dirname(os.path.abspath(target)))  # as `python SCRIPT` does: its folder's modules import
            runpy.run_path(target, run_name="__main__")
    except SystemExit as exit_:
        status = exit_.code if isinstance(exit_.code, int) else 1
    with open(log, "a", encoding="utf-8") as handle:
        handle.writelines(f"{path}\n" for path in sorted(read))
    sys.exit(status)


if __name__ == "__main__":
    main()
