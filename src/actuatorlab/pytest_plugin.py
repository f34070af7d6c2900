"""pytest plugin: each log of a calibration replay suite becomes a test.

    pytest --actuatorlab-replay SUITE [--actuatorlab-model MODEL] [--actuatorlab-dt DT]

Registered as a ``pytest11`` entry point (``actuatorlab.pytest_plugin``), so it is active
wherever actuatorlab is installed; without ``--actuatorlab-replay`` it does nothing. Enable it
explicitly with ``-p actuatorlab.pytest_plugin`` where entry points are not loaded. With
only replay suites on the command line (no test paths), only the suites run. The suite is replayed
once (first test of the suite) and each test reports its log's checks
(:func:`actuatorlab.evaluate.suite.run_suite`); environment differences become warnings.

This module imports nothing heavy at import time (pytest loads it in every run).
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest

#: the pytest hooks this plugin implements (pytest finds them by name)
__all__ = ["pytest_addoption", "pytest_configure", "pytest_collect_file"]

MANIFEST = "suite.json"


class ReplayWarning(UserWarning):
    """The replay environment differs from the suite's (versions, dt, gains, model file)."""


class ReplayFailure(AssertionError):
    pass


def pytest_addoption(parser):
    g = parser.getgroup("actuatorlab", "actuatorlab calibration replay")
    g.addoption("--actuatorlab-replay", action="append", default=[], metavar="SUITE",
                help="replay suite folder (actuatorlab replay --create); one test per stored log")
    g.addoption("--actuatorlab-model", default=None, metavar="MODEL",
                help="model file to check (default: the one the suite was created with)")
    g.addoption("--actuatorlab-dt", type=float, default=None, metavar="DT", help="replay period [s]")


def _manifests(config) -> list[Path]:
    out = []
    for s in config.getoption("actuatorlab_replay") or []:
        p = Path(s)
        out.append((p / MANIFEST if p.is_dir() else p).resolve())
    return out


def pytest_configure(config):
    suites = _manifests(config)
    if not suites:
        return
    if getattr(config, "args_source", None) != pytest.Config.ArgsSource.ARGS:
        config.args = []  # suites only, unless test paths were given explicitly
    config.args.extend(str(s) for s in suites)


def pytest_collect_file(file_path: Path, parent):
    if file_path.name == MANIFEST and file_path.resolve() in _manifests(parent.config):
        return ReplaySuite.from_parent(parent, path=file_path)
    return None


class ReplaySuite(pytest.File):
    """One suite.json: one :class:`ReplayLog` per stored log."""

    _result: dict | None = None

    def collect(self):
        m = json.loads(self.path.read_text())
        for e in m.get("logs", []):
            yield ReplayLog.from_parent(self, name=str(e.get("name")))

    def result(self) -> dict:
        if self._result is None:
            from actuatorlab.evaluate.suite import run_suite
            from actuatorlab.precision import physics_precision

            cfg = self.config
            with physics_precision():
                self._result = run_suite(self.path.parent, cfg.getoption("actuatorlab_model"),
                                         dt=cfg.getoption("actuatorlab_dt"))
            for w in self._result["warnings"]:
                warnings.warn(ReplayWarning(w), stacklevel=1)
        return self._result


class ReplayLog(pytest.Item):
    """The checks of one stored log (position MAE, max error, per-regime / per-joint MAE)."""

    def runtest(self):
        r = self.parent.result()
        row = next(x for x in r["logs"] if x["name"] == self.name)
        bad = [c for c in row["checks"] if not c["passed"]]
        if bad:
            raise ReplayFailure("\n".join(
                f"{c['metric']}: {c['value']!s:.8} > tolerance {c['tolerance']:.4g} (at creation "
                f"{c['measured_at_creation']!s:.8})" for c in bad))

    def repr_failure(self, excinfo):
        if isinstance(excinfo.value, ReplayFailure):
            return f"replay of {self.name} exceeds its tolerances:\n{excinfo.value}"
        return super().repr_failure(excinfo)

    def reportinfo(self):
        return self.path, None, f"replay {self.parent.path.parent.name}::{self.name}"
