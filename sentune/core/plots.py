"""The one way sentune saves a figure (analysis, adapt's report, the result pages' renderers)."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def save_figure(fig: Any, path: Path) -> Path:
    """Lay out `fig`, write it to `path` at 120 dpi (making the folder), and close it: pyplot keeps every open figure
    in memory until it is closed."""
    import matplotlib.pyplot as plt

    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
