"""What every benchmark ends with: one JSON line on stdout, optionally also written to a file."""

from __future__ import annotations

import json
from pathlib import Path


def emit(summary: dict, out: Path | None = None) -> None:
    """Print ``summary`` as one JSON line (the benchmarks' machine-readable result) and, if
    ``out`` is given, write the same line there."""
    line = json.dumps(summary, default=float)
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(line + "\n")
    print(line, flush=True)
