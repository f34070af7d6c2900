"""Where a job's logs come from: the bundled example and the loaded logs of a command, and the
setup summary a model file records."""

from __future__ import annotations

from pathlib import Path

from ..logs import load_logs
from ..logs.format import Trajectory


def example_data_dir() -> Path:
    """The real XL330 logs bundled with the package (used when no DATA is given)."""
    return Path(__file__).resolve().parents[1] / "examples" / "bam_xl330"


def load_data(paths: list[str | Path] | None, mapping: str | Path | None = None) -> list[Trajectory]:
    paths = list(paths or [example_data_dir()])
    return load_logs(paths, mapping=mapping)


def _setup_summary(trajs: list[Trajectory]) -> dict:
    """Representative setup (the first log's) plus the gains seen across logs."""
    s = trajs[0].setup.to_dict()
    s["gains_seen"] = sorted({str(t.setup.gains) for t in trajs})
    return s
