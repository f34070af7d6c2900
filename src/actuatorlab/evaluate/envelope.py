"""The operating envelope of a fitted model: the region its training logs covered, recorded in
model.json and checked against every log that ``evaluate`` replays.

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

A log checked against the envelope (:func:`check_log`) gets a per-sample outside mask per
dimension; ``outside_fraction`` is the share of samples outside in at least one dimension (an
unseen checked condition puts the whole log outside). :func:`error_attribution` then compares
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
from typing import Any, Mapping, Sequence

import numpy as np

from ..errors import ModelError
from ..models.actuator_model import CONTINUOUS, ENVELOPE_VERSION, _unrows, validate_envelope
from .metrics import STALL_LEVEL
from ..sim.rollout import _constants, controller_level, log_arrays

__all__ = [
    "ENVELOPE_VERSION",
    "CHECKED_CONDITIONS",
    "CONTINUOUS",
    "PLANES",
    "DEFAULTS",
    "EnvelopeCheck",
    "log_features",
    "compute_envelope",
    "validate_envelope",
    "check_log",
    "check_trajectories",
    "error_attribution",
    "envelope_warnings",
    "describe",
    "summarize_envelope",
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


def _add_states(f: dict, rest_speed: float, rest_window_s: float, saturation_level: float, dt: float) -> dict:
    w = int(round(0.5 * rest_window_s / dt))
    f = dict(f)
    f["rest"] = _rest_mask(f["speed"], rest_speed, w)
    with np.errstate(invalid="ignore"):
        f["saturated"] = np.isfinite(f["signals"]["effort"]) & (np.abs(f["signals"]["effort"]) >= saturation_level)
    return f


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
    unknown = set(options) - set(DEFAULTS)
    if unknown:
        raise ValueError(f"compute_envelope: unknown options {sorted(unknown)} (known: {sorted(DEFAULTS)})")
    if not trajs:
        raise ModelError("envelope: no training logs")
    o = {**DEFAULTS, **options}
    feats = [log_features(tr, dt) for tr in trajs]
    units = {f["unit"] for f in feats}
    if len(units) > 1:
        raise ModelError(f"envelope: training logs mix units {sorted(units)}")
    unit = units.pop()
    ui = 0 if unit == "rad" else 1
    speed = np.concatenate([f["speed"] for f in feats])
    v95 = float(np.percentile(speed[np.isfinite(speed)], 95)) if np.isfinite(speed).any() else 0.0
    rest_speed = float(o["rest_speed_fraction"]) * v95
    feats = [_add_states(f, rest_speed, o["rest_window_s"], o["saturation_level"], dt) for f in feats]
    ql, qh = (float(x) for x in o["quantiles"])

    dims: dict[str, dict[str, Any]] = {}
    for name, units_ in CONTINUOUS.items():
        if not all(name in f["signals"] for f in feats):
            continue  # a signal is part of the envelope only when every training log has it
        sig = np.concatenate([f["signals"][name] for f in feats])
        sig = sig[np.isfinite(sig)]
        if sig.size == 0:
            continue
        lo, hi = (float(v) for v in np.quantile(sig, [ql, qh]))
        raw = [f["raw"][name] for f in feats if name in f.get("raw", {})]
        res = _resolution(np.concatenate(raw)) if raw else 0.0
        if name == "gravity_torque" and "position" in dims:
            res = 0.0  # follows position
        pad = max(float(o["margin"]) * (hi - lo), res)
        dims[name] = {"unit": units_[ui], "lower": lo - pad, "upper": hi + pad,
                      "min": float(sig.min()), "max": float(sig.max()), "n": int(sig.size)}

    bins = int(o["bins"])
    planes: dict[str, dict[str, Any]] = {}
    specs = [(name, x, y, flt, _edges(dims[x], bins), _edges(dims[y], bins), (1, 1))
             for name, (x, y, flt) in PLANES.items() if x in dims and y in dims]
    if "position" in dims and "effort" in dims:
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
        "n_samples": int(n), "logs": [tr.name for tr in trajs],
        "effort_source": sorted({f["effort_source"] for f in feats}),
        "dimensions": dims, "planes": planes, "torque_disabled_seen": off > 0,
        "regimes": {"rest": rest / n if n else 0.0, "moving": moving / n if n else 0.0,
                    "saturated": share("saturated"), "rest_saturated": rs / n if n else 0.0,
                    "torque_disabled": off / n if n else 0.0},
        "conditions": {k: sorted(v) for k, v in sorted(conditions.items())},
        "checked_conditions": list(CHECKED_CONDITIONS),
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
            outside[dim] = np.isfinite(x) & ((x < r["lower"]) | (x > r["upper"]))
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


# --------------------------------------------------------------------------------------------
# Where does the error come from?
# --------------------------------------------------------------------------------------------


def _split(abs_err: np.ndarray, out: np.ndarray) -> dict[str, Any]:
    ok = np.isfinite(abs_err)
    e, o = abs_err[ok], out[ok]
    total = float(e.sum())
    n_out = int(np.count_nonzero(o))
    n_in = int(e.size - n_out)
    mae_out = float(e[o].mean()) if n_out else None
    mae_in = float(e[~o].mean()) if n_in else None
    return {"sample_share": n_out / e.size if e.size else 0.0,
            "error_share": float(e[o].sum()) / total if total > 0 else 0.0,
            "mae_outside": mae_out, "mae_inside": mae_in}


def error_attribution(check: EnvelopeCheck, abs_err: np.ndarray, *, ratio: float = 2.0,
                      min_error_share: float = 0.2) -> dict[str, Any]:
    """How much of a log's absolute position error lies on its outside samples.

    ``abs_err`` (T,) [unit]: |q_sim - q_meas| on the same grid as the check. For the samples
    outside in any per-sample dimension, and for each dimension on its own (its outside samples
    against all the others), gives ``sample_share``, ``error_share`` (share of the summed
    absolute error), ``mae_outside``, ``mae_inside`` and ``concentrated``: the outside samples
    carry at least ``min_error_share`` of the error and their MAE is at least ``ratio`` times the
    MAE of the inside samples. Without inside samples there is nothing to compare with and
    ``concentrated`` is false. The top-level ``concentrated`` is true when the pooled outside
    samples or any single dimension qualify. Unseen conditions are left out (they cover the whole
    log, so the error cannot be split).

    Returns {"sample_share", "error_share", "mae_outside", "mae_inside", "concentrated",
    "by_dimension": {dimension: {same keys}}}.
    """
    abs_err = np.asarray(abs_err, float)
    if abs_err.shape != (check.n,):
        raise ValueError(f"{check.log}: error has shape {abs_err.shape}, the envelope check has {check.n} samples")

    def verdict(d: dict[str, Any]) -> dict[str, Any]:
        mo, mi = d["mae_outside"], d["mae_inside"]
        d["concentrated"] = bool(mo is not None and mi is not None and d["error_share"] >= min_error_share
                                 and mo >= ratio * mi)
        return d

    res = verdict(_split(abs_err, check.signal_outside))
    res["by_dimension"] = {k: verdict(_split(abs_err, v)) for k, v in check.outside.items()
                           if v.any() and not k.startswith("condition:")}
    res["concentrated"] = bool(res["concentrated"] or any(v["concentrated"] for v in res["by_dimension"].values()))
    return res


_DESCRIBE = {
    "position": "position outside the trained range",
    "velocity": "velocity outside the trained range",
    "effort": "controller effort outside the trained range",
    "gravity_torque": "gravity load outside the trained range",
    "temperature": "temperature outside the trained range",
    "supply_voltage": "supply voltage outside the trained range",
    "position_velocity": "position/velocity combination never seen in training",
    "velocity_effort": "velocity/effort combination never seen in training",
    "rest_saturated": "at rest with a saturated controller (stall) at a position/direction never seen so in training",
    "torque_disabled": "torque off, never the case in training",
}


def describe(dim: str) -> str:
    """One-phrase description of an envelope dimension."""
    if dim.startswith("condition:"):
        return f"unseen {dim.split(':', 1)[1]} condition"
    return _DESCRIBE.get(dim, dim)


def envelope_warnings(check: EnvelopeCheck, attribution: Mapping[str, Any] | None, unit: str, *,
                      mostly: float = 0.5) -> list[str]:
    """Human-readable warnings for one log: unseen conditions, a log ``mostly`` (default half)
    outside the envelope, and position error that comes from outside (:func:`error_attribution`)."""
    out = []
    for tag, c in check.conditions.items():
        if c["checked"] and not c["seen"]:
            out.append(f"{check.log}: {tag}={c['value']} was never seen in training (seen: "
                       f"{', '.join(c['training_values']) or 'none'}); the whole log is outside the "
                       "model's envelope of conditions")
    fr = {k: v for k, v in check.fractions().items() if not k.startswith("condition:")}
    share = float(np.count_nonzero(check.signal_outside)) / check.n if check.n else 0.0
    if share >= mostly:
        top = sorted(fr.items(), key=lambda kv: -kv[1])[:3]
        out.append(f"{check.log}: {100 * share:.0f} % of its samples are outside the training envelope ("
                   + "; ".join(f"{k}: {100 * v:.0f} %, {describe(k)}" for k, v in top)
                   + "); its error is that of an extrapolation")
    if attribution and attribution.get("concentrated"):
        dims = sorted(((k, v) for k, v in attribution["by_dimension"].items() if v["concentrated"]),
                      key=lambda kv: -kv[1]["error_share"])
        if not dims:  # only the pooled outside samples qualify: name the largest share
            dims = sorted(attribution["by_dimension"].items(), key=lambda kv: -kv[1]["error_share"])[:1]
        parts = [f"{k} ({describe(k)}): {100 * v['sample_share']:.1f} % of samples carry "
                 f"{100 * v['error_share']:.0f} % of the error, MAE {v['mae_outside']:.4g} {unit} there vs "
                 f"{v['mae_inside']:.4g} {unit} elsewhere" for k, v in dims[:3]]
        out.append(f"{check.log}: its position error comes from outside the training envelope: "
                   + "; ".join(parts))
    return out


def summarize_envelope(checks: Sequence[EnvelopeCheck], abs_errs: Sequence[np.ndarray] | None,
                       unit: str) -> dict[str, Any]:
    """JSON-ready envelope results: pooled and per log.

    Returns {"available": True, "outside_fraction", "outside_dimensions", "warnings",
    "per_log": {log: {"outside_fraction", "outside_signals_fraction", "outside_dimensions",
    "unchecked", "unseen_conditions", "error", "warnings"}}}. Fractions weight samples.
    """
    per_log: dict[str, Any] = {}
    n_tot = 0
    out_tot = 0
    dim_tot: dict[str, int] = {}
    warnings: list[str] = []
    for i, c in enumerate(checks):
        att = error_attribution(c, abs_errs[i]) if abs_errs is not None else None
        w = envelope_warnings(c, att, unit)
        warnings += w
        fr = c.fractions()
        any_out = int(np.count_nonzero(c.any_outside))
        per_log[c.log] = {
            "outside_fraction": any_out / c.n if c.n else 0.0,
            "outside_signals_fraction": float(np.count_nonzero(c.signal_outside)) / c.n if c.n else 0.0,
            "outside_dimensions": fr, "unchecked": list(c.unchecked),
            "unseen_conditions": c.unseen_conditions, "error": att, "warnings": w,
        }
        n_tot += c.n
        out_tot += any_out
        for k, v in c.outside.items():
            dim_tot[k] = dim_tot.get(k, 0) + int(np.count_nonzero(v))
    return {"available": True, "outside_fraction": out_tot / n_tot if n_tot else 0.0,
            "outside_dimensions": {k: v / n_tot for k, v in dim_tot.items() if v} if n_tot else {},
            "warnings": warnings, "per_log": per_log}
