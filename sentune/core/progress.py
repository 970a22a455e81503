"""Progress lines: what a long run says as it goes (adapt's candidates, its race, the chosen index) are INFO records of
the `sentune.progress` logger, never `print`s. A Python caller sees them through logging (off by default, as any
library's INFO records; `logging.getLogger("sentune").setLevel(logging.INFO)` with a handler shows them, a higher level
silences them); a command shows them as plain lines on stdout (`shown_on_stdout`, the one place that configures it),
byte for byte what the command printed before. Progress bars are apart: each call's `show_progress` (--quiet)."""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager

progress = logging.getLogger("sentune.progress")


def say(line: str) -> None:
    """One progress line (an INFO record of `sentune.progress`)."""
    progress.info(line)


class _PlainLines(logging.Handler):
    """Each record's message as one line on the current sys.stdout (looked up at each line: a test's capture, a redirect)."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            sys.stdout.write(self.format(record) + "\n")
            sys.stdout.flush()
        except Exception:  # noqa: BLE001 (logging's own policy: a failed handler reports and goes on)
            self.handleError(record)


@contextmanager
def shown_on_stdout() -> Iterator[None]:
    """Within it (a command) progress lines print on stdout as plain lines, and only there (not also through the root's
    stderr handler the command configures for warnings)."""
    handler = _PlainLines()
    handler.setFormatter(logging.Formatter("%(message)s"))
    before = (progress.level, progress.propagate)
    progress.addHandler(handler)
    progress.setLevel(logging.INFO)
    progress.propagate = False
    try:
        yield
    finally:
        progress.removeHandler(handler)
        progress.setLevel(before[0])
        progress.propagate = before[1]
