"""The operating envelope of a fitted model: the region its training logs covered, recorded in
model.json (one joint) or arm_model.json (``{joint: envelope}``, a whole robot), checked against every
log that ``evaluate`` replays and, at run time, by the environments (:mod:`actuatorlab.envs.envelope`).

A model is only trusted where it was fitted. The envelope describes that region on the model's
control grid (the same grid, ``dt`` and interpolation as the replay, :func:`~actuatorlab.sim.rollout.log_arrays`),
so that a sample of an evaluated log can be said to be inside or outside it, and in which dimension.

Per-sample signals (:func:`log_features`), all (T,) on the grid:

* ``position`` [rad | m], ``velocity`` [rad/s | m/s] (measured);
* ``effort`` [1]: the controller output as a fraction of its limit, signed: the measured PWM duty
  / ``max_duty`` when the log has ``pwm_duty``; else the logged ``controller_output`` over its
  limit; else the firmware law (``Setup.controller``) evaluated on the logged command and the
  *measured* position (``gain_scale`` = 1). NaN while the torque is off;
* ``gravity_torque`` [N.m]: ``-(m l + m_arm l / 2) g sin(q)`` from the bench (revolute benches
  with a mass; the model's ``q_offset`` is not used so that the envelope does not depend on the
  fit);
* ``temperature`` [degC] and ``supply_voltage`` [V] where the log has those channels;
* ``enabled`` (torque on), ``rest`` (``|velocity| <= rest_speed`` over a whole centred window
  of ``rest_window_s``, so that a velocity zero-crossing at a reversal is not rest) and
  ``saturated`` (``|effort| >= saturation_level``).

The envelope (:func:`compute_envelope`) holds:

1. **1-D ranges** of every continuous signal: the ``quantiles`` (default 0.1 % and 99.9 %) of the
   pooled training samples, widened on each side by ``margin`` (default 5 %) of their span and at
   least by the signal's resolution (the median step between distinct logged values, e.g. 1 degC
   for an integer temperature sensor). Quantiles rather than min/max: a single spike does not widen
   the envelope. About 0.2 % of the training samples themselves fall outside by construction.
2. **2-D occupancy** on a ``bins`` x ``bins`` grid spanning the 1-D ranges, where a cell is
   occupied when it holds at least ``min_count`` training samples, then dilated by one cell
   (a neighbouring cell counts as seen): ``position_velocity`` (all samples),
   ``velocity_effort`` (torque on). A sample inside every 1-D range that falls in an unoccupied
   cell is an unseen *combination* (e.g. high speed at an extreme position).
3. **rest_saturated**: positions (``bins`` bins, dilated by one) x sign of the effort at which
   the training logs held the joint *at rest with a saturated controller* (a stall: full duty
   against gravity or an end stop). Motor models are usually fitted on moving data, and a stall
   exercises the torque limit, so it is its own region: a stall beyond the position range counts
   as outside here too (other planes leave samples beyond a 1-D range to that range).
4. **torque_disabled**: whether the training logs had torque-off spans (free swing).
5. **Conditions**: the values of the tags ``load``, ``gain`` and ``excitation``
   (``Trajectory.conditions``) seen in training; a log with another value is under an unseen
   condition as a whole, even if every sample is in range. ``session`` and other tags are
   recorded but not checked (a new session is the normal case for an evaluation).

**Whole robot** (:func:`robot_envelope`): the same envelope per joint, from the joint's signals in the
multi-joint logs that record it (:func:`robot_features`, on the robot's control grid): ``position``,
``velocity`` (logged, else the gradient of the position) and ``effort`` = ``pwm_duty/<joint>`` /
``max_duty`` where every log has that channel (multi-joint logs rarely carry the controller output,
and an effort computed through the fitted model would describe the model, not the data). It records
the 1-D ranges, regimes, torque-off spans and conditions, but no 2-D occupancy (``planes`` empty) and
checks no condition (``checked_conditions`` empty): what a policy can be held to joint by joint.

**Outside** is defined once: a sample is outside a 1-D range when it is finite and below ``lower``
or above ``upper`` (:func:`beyond`), and saturated when finite with ``|effort| >= saturation_level``
(:func:`saturated`); ``check_log`` and the environments' run-time counters use both.

A log checked against the envelope (:func:`check_log`) gets a per-sample outside mask per
dimension; ``outside_fraction`` is the share of samples outside in at least one dimension (an
unseen checked condition puts the whole log outside). :func:`~actuatorlab.evaluate.envelope_summary.error_attribution` then compares
the position error on those samples with the rest: the error *comes from outside* when the
outside samples carry at least ``min_error_share`` (20 %) of the log's absolute error and their
mean absolute error is at least ``ratio`` (2x) that of the inside samples. Rollout errors
accumulate over time, so an error made outside persists for a while after the log returns inside;
the attribution is a diagnosis, not a decomposition.

Everything here is a pure function of arrays and plain dicts (the dict form is what model.json
stores, format ``ENVELOPE_VERSION``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from ..errors import DataError, ModelError
from ..logs.format import Trajectory
from ..models.actuator_model import CONTINUOUS, ENVELOPE_VERSION, _unrows, validate_envelope
from ..robots.loader import Robot
from .metrics import STALL_LEVEL
from ..sim.arm_data import _robot, log_arrays as robot_log_arrays
from ..sim.rollout import _constants, controller_level, log_arrays

__all__ = [
    "ENVELOPE_VERSION",
    "CHECKED_CONDITIONS",
    "CONTINUOUS",
    "PLANES",
    "DEFAULTS",
    "EnvelopeCheck",
    "log_features",
    "robot_features",
    "joint_effort",
    "signal_range",
    "compute_envelope",
    "robot_envelope",
    "validate_envelope",
    "beyond",
    "saturated",
    "check_log",
    "check_trajectories",
    "check_robot_log",
]

#: Condition tags that define a different operating condition when their value is unseen.
CHECKED_CONDITIONS: tuple[str, ...] = ("load", "gain", "excitation")

#: 2-D planes: name -> (x signal, y signal, sample filter).
PLANES: dict[str, tuple[str, str, str]] = {
    "position_velocity": ("position", "velocity", "all"),
    "velocity_effort": ("velocity", "effort", "enabled"),
}

DEFAULTS: dict[str, Any] = {
    "quantiles": (0.001, 0.999),
    "margin": 0.05,
    "bins": 16,
    "min_count": 2,
    "rest_speed_fraction": 0.03,
    "rest_window_s": 0.1,
    "saturation_level": STALL_LEVEL,
}


# --------------------------------------------------------------------------------------------
# Per-sample signals
# --------------------------------------------------------------------------------------------


def _rest_mask(speed: np.ndarray, rest_speed: float, window: int) -> np.ndarray:
    """(T,) bool: |velocity| <= rest_speed over the whole centred window of 2*window+1 samples."""
    slow = np.isfinite(speed) & (speed <= rest_speed)
    if window <= 0 or slow.size == 0:
        return slow
    # a sample is at rest when no sample within +-window is moving: erosion of ``slow``
    moving = np.concatenate([[0], np.cumsum(~slow)])  # (T+1,) count of moving samples before k
    k = np.arange(slow.size)
    lo = np.clip(k - window, 0, slow.size)
    hi = np.clip(k + window + 1, 0, slow.size)
    return (moving[hi] - moving[lo]) == 0


def log_features(tr, dt: float) -> dict[str, Any]:
    """The envelope signals of one log on the model grid (see the module docstring).

    Args:
        tr: a :class:`~actuatorlab.logs.format.Trajectory`.
        dt: [s] the model's control period (the replay grid).

    Returns:
        {"n": T, "dt": dt, "unit": "rad" | "m", "signals": {name: (T,) float array} (only the signals the
        log has), "raw": {name: logged values behind the signal}, "enabled": (T,) bool, "speed": (T,) [unit/s], "effort_source": str,
        "conditions": {tag: value}}.
    """

    a = log_arrays(tr, dt)
    n = a["t"].size
    grid = tr.time[0] + a["t"]
    time = np.asarray(tr.time, float)
    _, pc = _constants(tr, dt)
    q, dq = a["q_meas"], a["dq_meas"]
    enabled = a["enable"] > 0.5
    sig: dict[str, np.ndarray] = {"position": q, "velocity": dq}

    def interp(name: str) -> np.ndarray:
        return np.interp(grid, time, np.asarray(tr[name], float))

    effort, source = controller_level(tr, a, dt)
    sig["effort"] = effort
    k = float(pc.mass * pc.length + 0.5 * pc.arm_mass * pc.length) * float(pc.gravity)
    if tr.setup.joint_type == "revolute" and k > 0:
        sig["gravity_torque"] = -k * np.sin(q)
    for name in ("temperature", "supply_voltage"):
        if name in tr.data:
            x = interp(name)
            if np.isfinite(x).all():
                sig[name] = x
    # logged values of the channels behind the signals (their resolution: the grid interpolates)
    raw_names = {"position": "position", "velocity": "velocity", "temperature": "temperature",
                 "supply_voltage": "supply_voltage"}
    if source.startswith("measured"):
        raw_names["effort"] = "pwm_duty"
    raw = {k: np.asarray(tr[c], float) for k, c in raw_names.items() if c in tr.data and k in sig}
    return {"n": n, "dt": float(dt), "unit": "rad" if tr.setup.joint_type == "revolute" else "m", "signals": sig,
            "raw": raw,
            "enabled": enabled, "speed": np.abs(dq), "effort_source": source,
            "conditions": {str(k_): str(v_) for k_, v_ in tr.conditions.items()}}


def joint_effort(robot: Robot, traj: Trajectory, joint: str) -> np.ndarray | None:
    """(T,) [1] a multi-joint log's ``pwm_duty/<joint>`` / the joint's ``max_duty`` (1 where it is
    not positive); None when the log has no such channel."""
    if not traj.has(f"pwm_duty/{joint}"):
        return None
    max_duty = np.broadcast_to(np.asarray(robot.law_constants().max_duty, float), (robot.n_joints,))
    md = max_duty[robot.index(joint)]
    return np.asarray(traj[f"pwm_duty/{joint}"], float) / (md if md > 0 else 1.0)


def robot_features(robot: str | Robot, traj: Trajectory) -> dict[str, dict[str, Any]]:
    """{joint: the :func:`log_features` dict of that joint} for the joints one multi-joint log
    records, on the robot's control grid (module docstring: position, velocity, effort where
    ``pwm_duty/<joint>`` is logged; each signal's resolution from the values themselves)."""
    r = _robot(robot)
    a = robot_log_arrays(r, traj)
    out: dict[str, dict[str, Any]] = {}
    for j in r.joint_names:
        i = r.index(j)
        if not a.scored[i]:
            continue
        q, dq = a.q_meas[:, i], a.dq_meas[:, i]
        sig = {"position": q, "velocity": dq}
        raw = {"position": q, "velocity": dq}
        effort = joint_effort(r, traj, j)
        if effort is not None:
            sig["effort"], raw["effort"] = effort, np.asarray(traj[f"pwm_duty/{j}"], float)
        out[j] = {"n": int(q.size), "dt": float(r.control_dt), "unit": a.units.get(j) or "rad", "signals": sig,
                  "raw": raw, "enabled": np.asarray(a.inputs.enable[:, i]) > 0.5, "speed": np.abs(dq),
                  "effort_source": "measured pwm_duty / max_duty" if effort is not None else "none",
                  "conditions": {str(k_): str(v_) for k_, v_ in traj.conditions.items()}}
    return out


# --------------------------------------------------------------------------------------------
# Envelope from training logs
# --------------------------------------------------------------------------------------------


def _resolution(x: np.ndarray) -> float:
    """Typical step between distinct logged values: a quantized sensor's resolution (1 degC for an
    integer thermometer); 0 with fewer than 5 distinct values (nothing to infer a step from)."""
    u = np.unique(x[np.isfinite(x)])
    if u.size < 5:
        return 0.0
    return float(np.median(np.diff(u)))


def _rows(a: np.ndarray) -> list[str]:
    return ["".join("1" if v else "0" for v in row) for row in np.asarray(a, bool)]


def _dilate(occ: np.ndarray, dx: int, dy: int) -> np.ndarray:
    out = occ.copy()
    nx, ny = occ.shape
    for i in range(-dx, dx + 1):
        for j in range(-dy, dy + 1):
            src = occ[max(0, -i):nx - max(0, i), max(0, -j):ny - max(0, j)]
            out[max(0, i):nx - max(0, -i), max(0, j):ny - max(0, -j)] |= src
    return out


def _cells(x: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """Bin index of x in ``edges`` (len B+1); -1 outside [edges[0], edges[-1]] or non-finite."""
    i = np.searchsorted(edges, x, side="right") - 1
    i = np.where(x == edges[-1], edges.size - 2, i)
    ok = np.isfinite(x) & (x >= edges[0]) & (x <= edges[-1])
    return np.where(ok, i, -1)


def _edges(dim: Mapping[str, Any], bins: int) -> np.ndarray:
    lo, hi = float(dim["lower"]), float(dim["upper"])
    if not hi > lo:
        hi = lo + 1e-9
    return np.linspace(lo, hi, bins + 1)


def _sign_edges() -> np.ndarray:
    return np.array([-np.inf, 0.0, np.inf])


def _filter(f: Mapping[str, Any], which: str) -> np.ndarray:
    if which == "all":
        return np.ones(f["n"], bool)
    if which == "enabled":
        return f["enabled"]
    if which == "rest_saturated":
        return f["rest"] & f["saturated"] & f["enabled"]
    raise ModelError(f"envelope: unknown sample filter {which!r} (known: all, enabled, rest_saturated)")


def beyond(x, lower, upper, xp: Any = np):
    """Outside the 1-D range [lower, upper]: finite and below ``lower`` or above ``upper`` (arrays
    of ``xp`` = numpy | jax.numpy; non-finite samples are never outside)."""
    return xp.isfinite(x) & ((x < lower) | (x > upper))


def saturated(effort, level, xp: Any = np):
    """A saturated controller: finite ``|effort| >= level`` [1] (``xp`` = numpy | jax.numpy)."""
    return xp.isfinite(effort) & (xp.abs(effort) >= level)


def _add_states(f: dict, rest_speed: float, rest_window_s: float, saturation_level: float, dt: float) -> dict:
    w = int(round(0.5 * rest_window_s / dt))
    f = dict(f)
    f["rest"] = _rest_mask(f["speed"], rest_speed, w)
    effort = f["signals"].get("effort")
    with np.errstate(invalid="ignore"):
        f["saturated"] = (np.zeros(int(f["n"]), bool) if effort is None
                          else saturated(effort, saturation_level))
    return f


def signal_range(x: np.ndarray, raw: np.ndarray | None, quantiles: Sequence[float], margin: float,
                 resolution: bool = True) -> dict[str, Any]:
    """The 1-D range of samples ``x``: {"lower", "upper", "min", "max", "n"} (finite samples only):
    the ``quantiles`` widened on each side by ``margin`` x their span and at least by the
    resolution of the logged values ``raw`` (0 for None, or with ``resolution`` false)."""
    sig = np.asarray(x, float)
    sig = sig[np.isfinite(sig)]
    lo, hi = (float(v) for v in np.quantile(sig, [float(quantiles[0]), float(quantiles[1])]))
    res = _resolution(np.asarray(raw, float)) if raw is not None and resolution else 0.0
    pad = max(float(margin) * (hi - lo), res)
    return {"lower": lo - pad, "upper": hi + pad, "min": float(sig.min()), "max": float(sig.max()),
            "n": int(sig.size)}


def compute_envelope(trajs: Sequence, dt: float, **options: Any) -> dict[str, Any]:
    """The envelope of training logs at the model's control period ``dt`` [s], as a JSON-ready dict.

    Options (defaults in :data:`DEFAULTS`, all recorded in the result's ``settings``):
    ``quantiles`` (lower, upper) of the 1-D ranges, ``margin`` (fraction of the span added on each
    side), ``bins`` per axis of the 2-D grids, ``min_count`` training samples for a cell to count,
    ``rest_speed_fraction`` (rest speed = this fraction of the pooled 95th-percentile training
    speed, stored as an absolute ``rest_speed`` [unit/s] so that every log is judged with the same
    threshold), ``rest_window_s`` [s], ``saturation_level`` [1] of ``|effort|``.

    Keys of the result: ``version``, ``dt``, ``unit``, ``settings``, ``n_samples``, ``logs``,
    ``effort_source``, ``dimensions`` ({signal: {unit, lower, upper, min, max, n}}), ``planes``
    ({name: {x, y, filter, x_edges, y_edges, dilation, occupied (rows of "0"/"1")}}),
    ``torque_disabled_seen`` (bool), ``regimes`` (share of training samples at rest, moving,
    saturated, at rest and saturated, torque off), ``conditions`` ({tag: sorted values seen}),
    ``checked_conditions``.
    """
    o = _options("compute_envelope", options)
    if not trajs:
        raise ModelError("envelope: no training logs")
    return _envelope([log_features(tr, dt) for tr in trajs], [tr.name for tr in trajs], float(dt), o)


def robot_envelope(robot: str | Robot, trajs: Iterable[Trajectory], **options: Any) -> dict[str, dict[str, Any]]:
    """{joint name: envelope dict} of the joints the multi-joint logs ``trajs`` record, each from
    that joint's :func:`robot_features` in the logs that record it, on the robot's control grid
    (module docstring: 1-D ranges, no 2-D occupancy, no checked condition); ``robot`` a name or a
    :class:`~actuatorlab.robots.Robot`; options as :func:`compute_envelope`."""
    o = _options("robot_envelope", options)
    r = _robot(robot)
    trajs = list(trajs)
    if not trajs:
        raise DataError(None, "envelope: no training logs")
    feats = [robot_features(r, t) for t in trajs]
    out: dict[str, dict[str, Any]] = {}
    for j in r.joint_names:
        mine = [(t.name, f[j]) for t, f in zip(trajs, feats) if j in f]
        if mine:
            out[j] = _envelope([f for _, f in mine], [n for n, _ in mine], float(r.control_dt), o,
                               occupancy=False, checked_conditions=())
    return out


def _options(who: str, options: Mapping[str, Any]) -> dict[str, Any]:
    unknown = set(options) - set(DEFAULTS)
    if unknown:
        raise ValueError(f"{who}: unknown options {sorted(unknown)} (known: {sorted(DEFAULTS)})")
    return {**DEFAULTS, **options}


def _envelope(feats: list[dict[str, Any]], names: list[str], dt: float, o: dict[str, Any], *, occupancy: bool = True,
              checked_conditions: Sequence[str] = CHECKED_CONDITIONS) -> dict[str, Any]:
    """The envelope dict of the features of one joint in several logs (:func:`compute_envelope`);
    ``occupancy``: record the 2-D occupancy planes; ``checked_conditions``: the tags a log is checked for."""
    units = {f["unit"] for f in feats}
    if len(units) > 1:
        raise ModelError(f"envelope: training logs mix units {sorted(units)}")
    unit = units.pop()
    ui = 1 if unit == "m" else 0
    speed = np.concatenate([f["speed"] for f in feats])
    v95 = float(np.percentile(speed[np.isfinite(speed)], 95)) if np.isfinite(speed).any() else 0.0
    rest_speed = float(o["rest_speed_fraction"]) * v95
    feats = [_add_states(f, rest_speed, o["rest_window_s"], o["saturation_level"], dt) for f in feats]

    dims: dict[str, dict[str, Any]] = {}
    for name, units_ in CONTINUOUS.items():
        if not all(name in f["signals"] for f in feats):
            continue  # a signal is part of the envelope only when every training log has it
        sig = np.concatenate([f["signals"][name] for f in feats])
        if not np.isfinite(sig).any():
            continue
        raw = [f["raw"][name] for f in feats if name in f.get("raw", {})]
        # gravity_torque follows position: no resolution of its own
        dims[name] = {"unit": units_[ui], **signal_range(sig, np.concatenate(raw) if raw else None, o["quantiles"],
                                                         o["margin"], not (name == "gravity_torque" and "position" in dims))}

    bins = int(o["bins"])
    planes: dict[str, dict[str, Any]] = {}
    specs = [(name, x, y, flt, _edges(dims[x], bins), _edges(dims[y], bins), (1, 1))
             for name, (x, y, flt) in PLANES.items() if occupancy and x in dims and y in dims]
    if occupancy and "position" in dims and "effort" in dims:
        specs.append(("rest_saturated", "position", "effort", "rest_saturated",
                      _edges(dims["position"], bins), _sign_edges(), (1, 0)))
    for name, x, y, flt, xe, ye, dil in specs:
        counts = np.zeros((xe.size - 1, ye.size - 1), int)
        for f in feats:
            m = _filter(f, flt)
            i, j = _cells(f["signals"][x][m], xe), _cells(f["signals"][y][m], ye)
            ok = (i >= 0) & (j >= 0)
            np.add.at(counts, (i[ok], j[ok]), 1)
        occ = _dilate(counts >= int(o["min_count"]), *dil)
        planes[name] = {"x": x, "y": y, "filter": flt, "x_edges": xe.tolist(),
                        "y_edges": [None if not math.isfinite(v) else v for v in ye.tolist()],
                        "dilation": list(dil), "occupied": _rows(occ)}

    n = sum(f["n"] for f in feats)

    def share(key: str) -> float:
        return float(sum(int(np.count_nonzero(f[key])) for f in feats) / n) if n else 0.0

    rest = sum(int(np.count_nonzero(f["rest"] & f["enabled"])) for f in feats)
    moving = sum(int(np.count_nonzero(~f["rest"] & f["enabled"])) for f in feats)
    rs = sum(int(np.count_nonzero(_filter(f, "rest_saturated"))) for f in feats)
    off = sum(int(np.count_nonzero(~f["enabled"])) for f in feats)
    conditions: dict[str, list[str]] = {}
    for f in feats:
        for k, v in f["conditions"].items():
            conditions.setdefault(k, [])
            if v not in conditions[k]:
                conditions[k].append(v)
    return {
        "version": ENVELOPE_VERSION, "dt": float(dt), "unit": unit,
        "settings": {**{k: (list(v) if isinstance(v, tuple) else v) for k, v in o.items()},
                     "rest_speed": rest_speed, "speed_p95": v95},
        "n_samples": int(n), "logs": list(names),
        "effort_source": sorted({f["effort_source"] for f in feats}),
        "dimensions": dims, "planes": planes, "torque_disabled_seen": off > 0,
        "regimes": {"rest": rest / n if n else 0.0, "moving": moving / n if n else 0.0,
                    "saturated": share("saturated"), "rest_saturated": rs / n if n else 0.0,
                    "torque_disabled": off / n if n else 0.0},
        "conditions": {k: sorted(v) for k, v in sorted(conditions.items())},
        "checked_conditions": list(checked_conditions),
    }


# --------------------------------------------------------------------------------------------
# Checking a log
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class EnvelopeCheck:
    """One log checked against an envelope.

    Attributes:
        log: log name.
        n: number of grid samples T.
        outside: {dimension: (T,) bool} samples outside in that dimension (signals, planes,
            ``torque_disabled``, and one entry per unseen checked condition, all True).
        unchecked: envelope dimensions the log cannot be checked in (it lacks the signal).
        conditions: {tag: {"value", "seen", "training_values", "checked"}} for the log's tags.
        signals: {signal: (T,)} the log's envelope signals (:func:`log_features`), for plots.
    """

    log: str
    n: int
    outside: dict[str, np.ndarray] = field(default_factory=dict)
    unchecked: tuple[str, ...] = ()
    conditions: dict[str, dict[str, Any]] = field(default_factory=dict)
    signals: dict[str, np.ndarray] = field(default_factory=dict)

    @property
    def any_outside(self) -> np.ndarray:
        """(T,) bool: outside in at least one dimension."""
        m = np.zeros(self.n, bool)
        for v in self.outside.values():
            m |= v
        return m

    @property
    def signal_outside(self) -> np.ndarray:
        """(T,) bool: outside in a per-sample dimension (unseen conditions not counted)."""
        m = np.zeros(self.n, bool)
        for k, v in self.outside.items():
            if not k.startswith("condition:"):
                m |= v
        return m

    @property
    def unseen_conditions(self) -> dict[str, str]:
        return {k: c["value"] for k, c in self.conditions.items() if c["checked"] and not c["seen"]}

    def fractions(self) -> dict[str, float]:
        """{dimension: share of the log's samples outside in it} (dimensions with none omitted)."""
        if self.n == 0:
            return {}
        return {k: float(np.count_nonzero(v)) / self.n for k, v in self.outside.items() if v.any()}


def check_log(env: Mapping[str, Any], features: Mapping[str, Any], name: str = "log") -> EnvelopeCheck:
    """Check one log's :func:`log_features` against an envelope dict (see the module docstring)."""
    s = env["settings"]
    f = _add_states(dict(features), float(s["rest_speed"]), float(s["rest_window_s"]),
                    float(s["saturation_level"]), float(features.get("dt", env["dt"])))
    n = int(f["n"])
    outside: dict[str, np.ndarray] = {}
    unchecked = []
    for dim, r in env["dimensions"].items():
        x = f["signals"].get(dim)
        if x is None:
            unchecked.append(dim)
            continue
        with np.errstate(invalid="ignore"):
            outside[dim] = beyond(x, r["lower"], r["upper"])
    for pname, p in env["planes"].items():
        x, y = f["signals"].get(p["x"]), f["signals"].get(p["y"])
        if x is None or y is None:
            unchecked.append(pname)
            continue
        xe = np.asarray(p["x_edges"], float)
        ye = np.array([(-np.inf if k == 0 else np.inf) if v is None else v for k, v in enumerate(p["y_edges"])])
        occ = _unrows(p["occupied"], (xe.size - 1, ye.size - 1), pname)
        m = _filter(f, p["filter"])
        i, j = _cells(x, xe), _cells(y, ye)
        ok = m & (i >= 0) & (j >= 0)  # outside a 1-D range: reported by that range, not the plane ...
        out = np.zeros(n, bool)
        out[ok] = ~occ[i[ok], j[ok]]
        if p["filter"] == "rest_saturated":  # ... except a stall, which is its own regime wherever it is
            out |= m & ~ok
        outside[pname] = out
    if not env.get("torque_disabled_seen", True):
        outside["torque_disabled"] = ~f["enabled"]
    conds = {}
    checked = env.get("checked_conditions", list(CHECKED_CONDITIONS))
    for tag, value in sorted(f["conditions"].items()):
        seen_values = env["conditions"].get(tag, [])
        c = {"value": value, "seen": value in seen_values, "training_values": list(seen_values),
             "checked": tag in checked and tag in env["conditions"]}
        conds[tag] = c
        if c["checked"] and not c["seen"]:
            outside[f"condition:{tag}"] = np.ones(n, bool)
    return EnvelopeCheck(log=name, n=n, outside=outside, unchecked=tuple(unchecked), conditions=conds,
                         signals=dict(f["signals"]))


def check_trajectories(env: Mapping[str, Any], trajs: Sequence, dt: float | None = None) -> list[EnvelopeCheck]:
    """:func:`check_log` of every trajectory on the grid of period ``dt`` [s] (default: the
    envelope's, i.e. the model's control period; pass the replay period when it differs)."""
    dt = float(env["dt"] if dt is None else dt)
    return [check_log(env, log_features(tr, dt), tr.name) for tr in trajs]



def check_robot_log(robot: str | Robot, envelope: Mapping[str, Mapping[str, Any]], traj: Trajectory) -> list[EnvelopeCheck]:
    """:func:`check_log` of each joint of one multi-joint log against ``envelope`` ({joint:
    envelope dict}, :func:`robot_envelope`), for the joints both record; each check is named after
    its joint."""
    feats = robot_features(robot, traj)
    return [check_log(env, feats[j], j) for j, env in envelope.items() if j in feats]
