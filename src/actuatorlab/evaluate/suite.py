"""Calibration replay as a regression suite: stored calibration logs with per-log tolerances.

A suite is a folder::

    SUITE/suite.json      manifest (format "actuatorlab-replay-suite", version "1")
    SUITE/logs/NAME.*     the calibration logs, copied in the native format (parquet + json)

:func:`create_suite` replays the logs with a model, measures per log the position MAE, the maximum
absolute position error and the MAE in each motion regime (rest, low/high speed, reversal, ...; one-
joint models) or per joint (whole-robot models), and stores ``tolerance = margin x measured``
(``margin`` 1.2 by default) beside the measured values, together with what the numbers depend
on: replay ``dt``, controller gains per log, model file (name, sha256), actuatorlab, MuJoCo, JAX
and NumPy versions. :func:`run_suite` replays the stored logs with a (possibly changed) model, at a
(possibly changed) ``dt`` and gains, and lists every metric above its tolerance; it warns when the
environment differs from the stored one. ``actuatorlab replay SUITE MODEL`` exits 1 on a failure;
the pytest plugin (:mod:`actuatorlab.pytest_plugin`) turns each log into a test.

Replays are deterministic (same model, logs, dt and gains give the same numbers bit for bit on
one machine), so an unchanged setup always passes; the margin absorbs platform rounding.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import shutil
import time
from pathlib import Path
from typing import Mapping

import numpy as np

from ..errors import ActuatorlabError, ModelError
from ..models.actuator_model import load
from ..models.modelfile import joint_dict
from ..sim.arm_data import evaluate_arm
from ..robots import load_robot
from ..files import atomic_write, read_json
from ..logs import load_logs, save_trajectory
from ..sim.rollout import default_dt
from .metrics import summarize
from .replay import replay
from .. import __version__

__all__ = ["SUITE_FORMAT", "SUITE_VERSION", "MANIFEST", "SuiteError", "create_suite", "load_suite", "run_suite",
           "environment", "MIN_REGIME_SAMPLES"]

SUITE_FORMAT = "actuatorlab-replay-suite"
SUITE_VERSION = "1"
MANIFEST = "suite.json"
#: regimes with fewer samples in a log get no tolerance of their own (their MAE is too noisy to gate on)
MIN_REGIME_SAMPLES = 20


class SuiteError(ActuatorlabError):
    """A replay suite is unusable: names the file and the problem."""


def _sha256(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def environment() -> dict[str, str]:
    """Versions of what a replay depends on."""
    import jax
    import mujoco

    return {"actuatorlab": __version__, "mujoco": mujoco.__version__, "jax": jax.__version__,
            "numpy": np.__version__}


def _with_gains(trajs, gains: Mapping[str, float] | None):
    if not gains:
        return trajs
    return [t.replace(setup=dataclasses.replace(t.setup, gains={**t.setup.gains, **{k: float(v) for k, v in gains.items()}}))
            for t in trajs]


def _read_model(path: Path) -> tuple[dict, str]:
    """(model dict, kind) where kind is "joint" (model.json) or "arm" (arm_model.json)."""
    m = load(path)
    if not m.one_joint:
        if m.kind != "analytic":
            raise ModelError(f"{path}: learned whole-robot models are not supported by replay suites yet")
        return dict(m.document), "arm"
    return joint_dict(m), "joint"


def _robot_with(r, physics_dt: float | None, gains: Mapping[str, float] | None):
    """The robot with another MuJoCo timestep (``physics_dt`` [s], must divide the control and
    firmware periods) and/or controller gains on every joint."""
    if physics_dt is not None:
        for what, period in (("control_dt", r.control_dt), ("firmware_dt", r.firmware_dt)):
            k = period / physics_dt
            if abs(k - round(k)) > 1e-6 or round(k) < 1:
                raise SuiteError(f"replay --dt {physics_dt:g}: a whole-robot replay needs a MuJoCo timestep that "
                                 f"divides {what} {period:g} s")
        r = dataclasses.replace(r, physics_dt=float(physics_dt))
    if gains:
        r = dataclasses.replace(r, joints=tuple(
            dataclasses.replace(j, gains=tuple({**dict(j.gains), **{k: float(v) for k, v in gains.items()}}.items()))
            for j in r.joints))
    return r


def _measure(model: dict, kind: str, trajs, *, dt: float | None, robot: str | None,
             horizon: int | None, gains: Mapping[str, float] | None = None) -> tuple[dict[str, dict[str, float]], dict]:
    """{log: {metric: value}} and replay settings. Metrics: ``position_mae``,
    ``position_max_abs_error``, ``regime:NAME`` (one joint) or ``joint:NAME`` (whole robot).
    One joint: ``dt`` is the replay period and ``gains`` replace the logs' controller gains; whole
    robot: ``dt`` is the MuJoCo timestep and ``gains`` replace the robot config's."""
    if kind == "joint":
        trajs = _with_gains(trajs, gains)

        rdt = float(dt if dt is not None else model.get("fit", {}).get("dt") or 0) or default_dt(trajs)
        s = summarize(replay(model, trajs, rdt))
        out = {}
        for row in s["per_log"]:
            m = {"position_mae": row["position_mae"], "position_max_abs_error": row["position_max_abs_error"]}
            for reg, r in (row.get("regimes") or {}).items():
                if r.get("position_mae") is not None and (r.get("n_samples") or 0) >= MIN_REGIME_SAMPLES:
                    m[f"regime:{reg}"] = r["position_mae"]
            out[row["log"]] = {k: float(v) for k, v in m.items() if v is not None}
        return out, {"dt": rdt, "unit": s["unit"]}
    # whole robot: native MuJoCo windows of ``horizon`` control steps (identify.arm_fit.evaluate_arm)

    if robot is None:
        robot = model.get("robot")
        if robot is None:
            raise SuiteError("whole-robot model: it names no robot; give one (--robot)")
    r = _robot_with(load_robot(robot), dt, gains)
    h = int(horizon or 300)
    out = {}
    for t in trajs:
        e = evaluate_arm(r, model["params"], [t], horizons=(h,), model=model.get("model"))
        if e["position_mae"] is None:
            raise SuiteError(f"{t.source_file or t.name}: shorter than the suite's horizon of {h} control steps")
        m = {"position_mae": e["position_mae"]}
        m.update({f"joint:{j}": v[str(h)] for j, v in e["per_joint"].items() if str(h) in v})
        out[t.name] = {k: float(v) for k, v in m.items()}
    return out, {"dt": None, "control_dt": float(r.control_dt), "physics_dt": float(r.physics_dt), "horizon": h,
                 "unit": "rad", "robot": robot, "gains": {j.name: dict(j.gains) for j in r.joints}}


def create_suite(suite: str | Path, model_path: str | Path, log_paths, *, margin: float = 1.2,
                 dt: float | None = None, robot: str | None = None, horizon: int | None = None,
                 mapping: str | None = None, overwrite: bool = False) -> dict:
    """Copy ``log_paths`` into ``SUITE/logs``, replay them with the model and write ``SUITE/suite.json``
    with per-log tolerances ``margin x measured``. Returns the manifest."""

    if not margin >= 1.0:
        raise SuiteError(f"replay --create: margin must be >= 1 (got {margin})")
    suite = Path(suite)
    if (suite / MANIFEST).exists() and not overwrite:
        raise SuiteError(f"{suite / MANIFEST}: a suite exists already (pass --overwrite to replace it)")
    model, kind = _read_model(Path(model_path))
    if robot is not None and model.get("robot") not in (None, str(robot)):
        raise SuiteError(f"{model_path}: fitted for robot {model.get('robot')!r}, not {str(robot)!r} (--robot; "
                         "without it the file's robot is used)")
    trajs = load_logs(list(log_paths), mapping=mapping)
    names = [t.name for t in trajs]
    if len(set(names)) != len(names):
        raise SuiteError(f"replay --create: two logs are named alike ({names}); rename one")
    measured, settings = _measure(model, kind, trajs, dt=dt, robot=robot, horizon=horizon)
    logs_dir = suite / "logs"
    if logs_dir.exists() and overwrite:
        shutil.rmtree(logs_dir)
    logs_dir.mkdir(parents=True, exist_ok=True)
    entries = []
    for t in trajs:
        p = save_trajectory(t.replace(source_file=""), logs_dir / t.name)
        m = measured[t.name]
        entries.append({"name": t.name, "file": str(p.relative_to(suite)), "sha256": _sha256(p),
                        "controller": t.setup.controller, "gains": dict(t.setup.gains),
                        "conditions": dict(t.conditions), "measured": m,
                        "tolerance": {k: max(margin * v, v + 1e-12) for k, v in m.items()}})
    manifest = {"format": SUITE_FORMAT, "format_version": SUITE_VERSION,
                "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "kind": kind, "margin": margin,
                "model": {"file": str(Path(model_path).resolve()), "model": model.get("model"),
                          "sha256": _sha256(Path(model_path))},
                "replay": settings, "environment": environment(), "logs": entries}
    atomic_write(suite / MANIFEST, json.dumps(manifest, indent=2) + "\n")
    return manifest


def load_suite(suite: str | Path) -> tuple[dict, Path]:
    """Read and validate ``SUITE/suite.json`` (or the manifest path itself)."""
    p = Path(suite)
    path = p / MANIFEST if p.is_dir() or not p.suffix else p

    m = read_json(path, SuiteError, "no replay suite here (create one with `actuatorlab replay --create`)")
    if not isinstance(m, dict) or m.get("format") != SUITE_FORMAT:
        raise SuiteError(f"{path}: not a replay suite (missing format {SUITE_FORMAT!r})")
    if m.get("format_version") != SUITE_VERSION:
        raise SuiteError(f"{path}: suite version {m.get('format_version')!r} is not supported (this version reads "
                         f"{SUITE_VERSION!r})")
    for key in ("kind", "logs", "replay", "environment", "model"):
        if key not in m:
            raise SuiteError(f"{path}: missing key {key!r}")
    for i, e in enumerate(m["logs"]):
        if not isinstance(e, dict) or not all(k in e for k in ("name", "file", "tolerance")):
            raise SuiteError(f"{path}: log entry {i} needs 'name', 'file' and 'tolerance'")
        for k, v in e["tolerance"].items():
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not np.isfinite(v) or v < 0:
                raise SuiteError(f"{path}: log {e['name']!r}: tolerance {k!r} must be a finite number >= 0")
        if not (path.parent / e["file"]).is_file():
            raise SuiteError(f"{path}: log {e['name']!r}: file {e['file']} is missing")
    return m, path.parent


def run_suite(suite: str | Path, model_path: str | Path | None = None, *, dt: float | None = None,
              gains: Mapping[str, float] | None = None) -> dict:
    """Replay the suite's logs with ``model_path`` (default: the model the suite was created with)
    and compare with the stored tolerances.

    ``dt`` [s]: replay period (default: the suite's); ``gains``: controller gains that override the
    logs' (what a simulation configured with other gains would do).

    Returns {"passed", "n_failed", "logs": [{"name", "passed", "checks": [{"metric", "value",
    "tolerance", "measured_at_creation", "ratio", "passed"}]}], "warnings", "replay", "model"}."""

    m, root = load_suite(suite)
    model_path = Path(model_path) if model_path is not None else Path(m["model"]["file"])
    model, kind = _read_model(model_path)
    if kind != m["kind"]:
        raise SuiteError(f"{model_path}: a {kind} model cannot replay a suite of {m['kind']} models")
    warnings = []
    env_now, env_then = environment(), m["environment"]
    for k in sorted(set(env_now) | set(env_then)):
        if env_now.get(k) != env_then.get(k):
            warnings.append(f"{k} {env_now.get(k)} differs from the suite's {env_then.get(k)}")
    if _sha256(model_path) != m["model"].get("sha256"):
        warnings.append(f"model file {model_path} differs from the one the suite was created with "
                        f"({m['model'].get('file')})")
    rdt = dt if dt is not None else m["replay"].get("dt") if kind == "joint" else None
    if kind == "joint" and dt is not None and m["replay"].get("dt") is not None and not np.isclose(dt, m["replay"]["dt"]):
        warnings.append(f"replay dt {dt:g} s differs from the suite's {m['replay']['dt']:g} s")
    for e in m["logs"]:
        p = root / e["file"]
        if e.get("sha256") and _sha256(p) != e["sha256"]:
            warnings.append(f"{p}: the stored log changed since the suite was created")
    trajs = load_logs([root / e["file"] for e in m["logs"]])
    if gains and kind == "joint":
        for e in m["logs"]:
            old = {k: e.get("gains", {}).get(k) for k in gains}
            if any(old[k] is None or not np.isclose(float(gains[k]), float(old[k])) for k in gains):
                warnings.append(f"{e['name']}: gains {dict(gains)} differ from the logged {old}")
    measured, settings = _measure(model, kind, trajs, dt=rdt, gains=gains, robot=m["replay"].get("robot"), horizon=m["replay"].get("horizon"))
    for k in ("control_dt", "physics_dt", "gains"):
        if k in m["replay"] and settings.get(k) != m["replay"][k]:
            warnings.append(f"robot config {k} {settings.get(k)} differs from the suite's {m['replay'][k]}")
    rows = []
    for e in m["logs"]:
        got = measured.get(e["name"], {})
        checks = []
        for metric, tol in e["tolerance"].items():
            v = got.get(metric)
            # a regime with too few samples in this replay has no MAE: not gated (the pooled MAE is)
            ok = (v <= tol) if v is not None else metric.startswith("regime:")
            checks.append({"metric": metric, "value": v, "tolerance": tol,
                           "measured_at_creation": (e.get("measured") or {}).get(metric),
                           "ratio": (v / tol) if v is not None and tol > 0 else None, "passed": ok})
        rows.append({"name": e["name"], "passed": all(c["passed"] for c in checks), "checks": checks})
    n_failed = sum(not r["passed"] for r in rows)
    return {"suite": str(root), "passed": n_failed == 0, "n_failed": n_failed, "n_logs": len(rows), "logs": rows,
            "warnings": warnings, "replay": settings, "model": str(model_path), "unit": settings.get("unit")}
