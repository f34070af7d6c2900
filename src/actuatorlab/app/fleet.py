"""Fit a fleet: one model per unit (a servo, a log group) and optionally a sweep over model families,
serially in this process (``backend="local"``, the default) or as Ray tasks (``backend="ray"``,
``pip install actuatorlab[ray]``).

Every task is :func:`actuatorlab.app.jobs.run_fit` on one unit's logs, writing
``OUT/UNIT/model.json`` (``OUT/UNIT/MODEL/model.json`` in a sweep over several models) with the same
seed for every task, so a task's result depends only on its logs, model and seed, never on the
scheduling: the Ray path gives the same parameters as the serial one. Each Ray task runs in a
worker process that enters float64 physics itself (:func:`~actuatorlab.precision.physics_precision`
is per thread and per process).

The per-unit model files feed ``actuatorlab randomize OUT/*/model.json`` (unit-to-unit spread).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Mapping, Sequence

from ..errors import ActuatorlabError, UnknownNameError
from ..identify.select import FamilyOptions
from .jobs import run_fit
from ..identify.select import BUDGETS
from ..models.registry import get_model

__all__ = ["BACKENDS", "FleetTask", "fleet_tasks", "fit_fleet", "units_from_folders"]

BACKENDS = ("local", "ray")


@dataclasses.dataclass(frozen=True)
class FleetTask:
    """One fit: ``unit`` [name], its log ``paths``, ``model`` (None: nested selection), ``out`` folder."""

    unit: str
    paths: tuple[str, ...]
    model: str | None
    out: str


def units_from_folders(folders: Sequence[str | Path]) -> dict[str, list[str]]:
    """{folder name: [folder]} for one folder of logs per unit; names must be unique."""
    units: dict[str, list[str]] = {}
    for f in folders:
        p = Path(f)
        if not p.exists():
            raise ActuatorlabError(f"{p}: no such unit folder or log")
        name = p.stem if p.is_file() else p.name
        if name in units:
            raise ActuatorlabError(f"{p}: two units are named {name!r}; units are named after their folders")
        units[name] = [str(p)]
    return units


def fleet_tasks(units: Mapping[str, Sequence[str | Path]], out: str | Path,
                models: Sequence[str | None] = (None,)) -> list[FleetTask]:
    """Tasks in a fixed order (units in the given order, then models)."""
    models = list(models) or [None]
    out = Path(out)
    tasks = []
    for unit, paths in units.items():
        for m in models:
            folder = out / unit if len(models) == 1 else out / unit / (m or "selected")
            tasks.append(FleetTask(str(unit), tuple(str(p) for p in paths), m, str(folder)))
    return tasks


def _fit_task(task: FleetTask, options: Mapping[str, Any]) -> dict:
    """Run one task (in this process or a Ray worker) and return its summary."""

    o = dict(options)
    d = run_fit(list(task.paths), task.out, model=task.model, mapping=o.pop("mapping", None),
                options=FamilyOptions(**o))
    return {"unit": task.unit, "requested_model": task.model, "model": d["model"], "out": task.out,
            "model_file": str(Path(task.out) / "model.json"),
            "train_mae": d["fit"]["train_mae"], "position_mae": d["metrics"]["train"]["position_mae"],
            "parameters": {n: e["value"] for n, e in d["parameters"].items() if e.get("free")},
            "wall_s": d["fit"]["wall_s"]}


def fit_fleet(units: Mapping[str, Sequence[str | Path]], out: str | Path, *,
              models: Sequence[str | None] = (None,), backend: str = "local", seed: int = 0,
              budget: str = "default", dt: float | None = None, mapping: str | Path | None = None,
              ray_address: str | None = None, num_cpus: int | None = None, progress=None) -> list[dict]:
    """Fit every unit (x every model of ``models``) and return one summary per task, in task order.

    Args:
        units: {unit name: log files / folders}.
        out: run folder; each task writes OUT/UNIT[/MODEL]/model.json (+ report.html).
        models: registry names (None = nested selection); several = a sweep.
        backend: "local" (serial, this process) | "ray" (one Ray task per fit; connects to a running
            Ray instance, ``ray_address``, or starts a local one with ``num_cpus`` and shuts it down).
        seed, budget, dt, mapping: passed to every :func:`~actuatorlab.app.jobs.run_fit`.
        progress: optional callback ``progress(done, total, summary)``.

    Returns: [{"unit", "requested_model", "model", "out", "model_file", "train_mae", "position_mae",
    "parameters" (free parameters), "wall_s"}].

    Note: with ``backend="ray"`` the calling process becomes a Ray driver, and Ray's core worker
    installs its own fatal-signal handlers over Python's :mod:`faulthandler` (measured with Ray 2.60:
    a segmentation fault after ``ray.init(); ray.shutdown()`` prints no traceback). A long-lived
    program that needs crash tracebacks should call this from a child process, as
    tests/test_fleet.py does.
    """
    if backend not in BACKENDS:
        raise UnknownNameError("backend", backend, BACKENDS)

    if budget not in BUDGETS:
        raise UnknownNameError("budget", budget, list(BUDGETS))
    for m in models:
        if m is not None:
            get_model(m)  # fail before any fit starts
    if not units:
        raise ActuatorlabError("fit-fleet: no units given")
    tasks = fleet_tasks(units, out, models)
    options = {"seed": seed, "budget": budget, "dt": dt, "mapping": mapping}
    if backend == "local":
        results = []
        for t in tasks:
            results.append(_fit_task(t, options))
            if progress:
                progress(len(results), len(tasks), results[-1])
        return results
    return _fit_ray(tasks, options, ray_address=ray_address, num_cpus=num_cpus, progress=progress)


def _fit_ray(tasks: list[FleetTask], options: Mapping[str, Any], *, ray_address: str | None,
             num_cpus: int | None, progress) -> list[dict]:
    try:
        import ray
    except ImportError:
        raise ActuatorlabError("backend 'ray' needs Ray: pip install 'actuatorlab[ray]'") from None
    started = False
    if not ray.is_initialized():
        ray.init(address=ray_address, num_cpus=num_cpus, include_dashboard=False, log_to_driver=False)
        started = True
    try:
        remote = ray.remote(_fit_task)
        refs = [remote.remote(t, dict(options)) for t in tasks]
        index = {r: i for i, r in enumerate(refs)}
        results: list[dict | None] = [None] * len(refs)
        pending = list(refs)
        while pending:
            done, pending = ray.wait(pending, num_returns=1)
            i = index[done[0]]
            try:
                results[i] = ray.get(done[0])
            except ray.exceptions.RayTaskError as e:
                cause = getattr(e, "cause", None)
                if isinstance(cause, ActuatorlabError):
                    raise cause from None
                raise
            if progress:
                progress(sum(r is not None for r in results), len(tasks), results[i])
        return results  # type: ignore[return-value]
    finally:
        if started:
            ray.shutdown()
