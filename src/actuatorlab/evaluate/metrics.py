"""Error metrics of a replayed log, split by operating regime.

A model is judged by replaying every log: the simulator starts from the log's initial state, feeds
the logged command (``q_target``, ``torque_enable``) to the model in closed loop for the whole log
and records the simulated position. The resulting :class:`LogResult` is the only thing this module
reads, so metrics do not depend on how the rollout was computed.

Definitions (``e = q_sim - q_meas`` over the samples where ``mask`` is true):

* ``position_mae  = mean(|e|)``, ``position_rmse = sqrt(mean(e**2))``;
* ``position_relative_error = ||e||_2 / ||q_meas||_2`` -- the relative output error used by the
  EMPS benchmark (Janot, Gautier, Brunot, "Data set and reference models of EMPS", 2019), which
  depends on where the position zero is, so compare it only between models on the same logs;
* ``onestep_mae = mean(|q_onestep - q_meas|)``: error of a prediction made one sample ahead from
  the *measured* state; it shows how well the local dynamics are captured, whereas the rollout MAE
  also accumulates drift. Both are reported side by side;
* ``effort_relative_error = ||effort_sim - effort_meas||_2 / ||effort_meas||_2`` for logs that
  carry a measured controller output (EMPS: the motor voltage reference, volts).

Pooled numbers (:func:`summarize`) weight *samples*, not logs: a log with twice as many valid
samples counts twice as much. Non-finite simulated values (a diverged rollout) are not hidden:
they make the affected metric NaN, which is written as ``None`` in the JSON-ready dicts.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from actuatorlab.errors import DataError

__all__ = [
    "REGIMES",
    "LogResult",
    "regime_masks",
    "log_metrics",
    "summarize",
    "stall_warnings",
    "format_table",
]

#: Regimes reported by :func:`regime_masks`, in display order.
REGIMES: tuple[str, ...] = (
    "near_reversal",
    "low_speed",
    "high_speed",
    "static",
    "stall",
    "driving",
    "backdriving",
    "torque_disabled",
)

_ARRAY_FIELDS = (
    "t",
    "q_meas",
    "q_sim",
    "dq_meas",
    "dq_sim",
    "q_target",
    "torque_enable",
    "mask",
    "motor_torque_sim",
    "external_torque_sim",
)
_OPTIONAL_ARRAY_FIELDS = ("q_onestep", "effort_meas", "effort_sim", "winding_temperature_sim", "effort_level")

# Default speed thresholds, as fractions of the log's 95th-percentile |dq_meas| (masked samples).
LOW_SPEED_FRACTION = 0.10
HIGH_SPEED_FRACTION = 0.50
STATIC_SPEED_FRACTION = 0.02
#: ``stall`` regime: |controller output| at or above this fraction of its limit (the operating
#: envelope's ``saturation_level``)
STALL_LEVEL = 0.95
#: :func:`stall_warnings`: a stall of at least this many seconds whose MAE is this many times the log's
STALL_WARN_SECONDS = 0.1
STALL_WARN_RATIO = 2.0


@dataclass(frozen=True, eq=False)
class LogResult:
    """One log replayed by one model (filled by the simulator, read by metrics and reports).

    All arrays are 1-D of the same length T and share the time base ``t``. Positions are joint
    (output-side) quantities in ``unit``; velocities in ``unit``/s; efforts in N.m (revolute) or
    N (prismatic). Arrays are converted to float64 numpy arrays (``mask`` to bool) on creation.

    Attributes:
        name: log identifier (the trajectory name).
        unit: "rad" (revolute joint) or "m" (prismatic joint).
        t: (T,) [s] sample times.
        q_meas: (T,) [rad | m] measured position.
        q_sim: (T,) [rad | m] simulated position: a full closed-loop rollout from the log's
            initial state driven by the logged command.
        dq_meas: (T,) [rad/s | m/s] measured (or estimated, e.g. differentiated) velocity.
        dq_sim: (T,) [rad/s | m/s] simulated velocity of the rollout.
        q_target: (T,) [rad | m] commanded position.
        torque_enable: (T,) [1] commanded enable, 1 = on, 0 = off (joint free).
        mask: (T,) bool, samples that count (False e.g. for padding added to batch logs).
        motor_torque_sim: (T,) [N.m | N] actuator effort at the joint in the rollout.
        external_torque_sim: (T,) [N.m | N] load effort (gravity, bench) in the rollout.
        q_onestep: (T,) [rad | m] or None: ``q_onestep[k]`` predicts ``q_meas[k]`` one sample
            ahead from the measured state at ``k - 1`` (entry 0 may be NaN; non-finite entries
            are ignored).
        effort_meas: (T,) or None: measured controller output (EMPS: voltage reference [V]).
        effort_sim: (T,) or None: the same quantity computed by the model in the rollout.
        conditions: condition tags of the log ("load", "gain", "excitation", "session").
        winding_temperature_sim: (T,) [degC] or None: the rollout's winding temperature
            (``+thermal`` models only).
        effort_level: (T,) [1] or None: the controller output as a fraction of its limit, from
            the log (:func:`~actuatorlab.sim.rollout.controller_level`; NaN with the torque off):
            1 = saturated. Defines the ``stall`` regime.
    """

    name: str
    unit: str
    t: np.ndarray
    q_meas: np.ndarray
    q_sim: np.ndarray
    dq_meas: np.ndarray
    dq_sim: np.ndarray
    q_target: np.ndarray
    torque_enable: np.ndarray
    mask: np.ndarray
    motor_torque_sim: np.ndarray
    external_torque_sim: np.ndarray
    q_onestep: np.ndarray | None = None
    effort_meas: np.ndarray | None = None
    effort_sim: np.ndarray | None = None
    conditions: dict[str, str] = field(default_factory=dict)
    winding_temperature_sim: np.ndarray | None = None
    effort_level: np.ndarray | None = None

    def __post_init__(self) -> None:
        if self.unit not in ("rad", "m"):
            raise ValueError(
                f"LogResult {self.name!r}: unit must be 'rad' or 'm', got {self.unit!r}"
            )
        n = None
        for name in _ARRAY_FIELDS + _OPTIONAL_ARRAY_FIELDS:
            value = getattr(self, name)
            if value is None:
                if name in _ARRAY_FIELDS:
                    raise ValueError(f"LogResult {self.name!r}: {name} is required")
                continue
            arr = np.asarray(value, dtype=bool if name == "mask" else np.float64)
            if arr.ndim != 1:
                raise ValueError(
                    f"LogResult {self.name!r}: {name} must be 1-D, got shape {arr.shape}"
                )
            if n is None:
                n = arr.shape[0]
            elif arr.shape[0] != n:
                raise ValueError(
                    f"LogResult {self.name!r}: {name} has {arr.shape[0]} samples, t has {n}"
                )
            object.__setattr__(self, name, arr)
        if (self.effort_meas is None) != (self.effort_sim is None):
            raise ValueError(
                f"LogResult {self.name!r}: effort_meas and effort_sim must be given together"
            )

    @property
    def n(self) -> int:
        """Number of samples T (masked or not)."""
        return int(self.t.shape[0])


# --------------------------------------------------------------------------------------------
# Regimes
# --------------------------------------------------------------------------------------------


def _speed_thresholds(
    r: LogResult,
    low_speed: float | None,
    high_speed: float | None,
    static_speed: float | None,
) -> dict[str, float]:
    """[unit/s] thresholds; defaults are fractions of the 95th-percentile masked |dq_meas|."""
    speed = np.abs(r.dq_meas[r.mask])
    speed = speed[np.isfinite(speed)]
    v95 = float(np.percentile(speed, 95)) if speed.size else 0.0
    return {
        "v95": v95,
        "low_speed": LOW_SPEED_FRACTION * v95 if low_speed is None else float(low_speed),
        "high_speed": HIGH_SPEED_FRACTION * v95 if high_speed is None else float(high_speed),
        "static_speed": (
            STATIC_SPEED_FRACTION * v95 if static_speed is None else float(static_speed)
        ),
    }


def _reversal_times(
    t: np.ndarray, dq: np.ndarray, mask: np.ndarray, threshold: float
) -> np.ndarray:
    """Times [s] at which the measured motion reverses (see :func:`regime_masks`)."""
    moving = mask & np.isfinite(dq) & (np.abs(dq) > threshold)
    idx = np.flatnonzero(moving)
    if idx.size < 2:
        return np.zeros(0)
    sign = np.sign(dq[idx])
    flips = np.flatnonzero(sign[1:] != sign[:-1])
    # A reversal may not bridge samples that do not count (padding, excluded spans).
    n_unmasked_before = np.concatenate([[0], np.cumsum(~mask)])  # (T+1,)
    times = []
    for f in flips:
        i, j = idx[f], idx[f + 1]
        if n_unmasked_before[j + 1] - n_unmasked_before[i] > 0:
            continue
        a, b = dq[i:j], dq[i + 1 : j + 1]
        ta, tb = t[i:j], t[i + 1 : j + 1]
        cross = np.isfinite(a) & np.isfinite(b) & (a * b <= 0) & (a != b)
        if not cross.any():  # only possible with NaNs inside the gap
            times.append(0.5 * (t[i] + t[j]))
            continue
        a, b, ta, tb = a[cross], b[cross], ta[cross], tb[cross]
        tc = ta + (tb - ta) * a / (a - b)  # linear zero crossing of dq in [ta, tb]
        times.append(0.5 * (tc[0] + tc[-1]))
    return np.asarray(times, dtype=np.float64)


def regime_masks(
    r: LogResult,
    *,
    low_speed: float | None = None,
    high_speed: float | None = None,
    reversal_window_s: float = 0.05,
    static_speed: float | None = None,
    stall_level: float = STALL_LEVEL,
) -> dict[str, np.ndarray]:
    """Boolean (T,) masks of the operating regimes of one log, each intersected with ``r.mask``.

    Speeds are measured speeds ``|dq_meas|``. Let ``v95`` be the 95th percentile of the masked
    measured speed of this log; thresholds default to fractions of it (pass absolute values in
    [rad/s | m/s] to compare logs on the same scale).

    * ``near_reversal``: within ``reversal_window_s`` [s] of a reversal of the *measured*
      motion. A reversal is a sign change of ``dq_meas`` between two consecutive samples that move
      faster than the low-speed threshold (so noise around standstill and stop-and-go in the same
      direction are not reversals), with no non-counting sample in between; its time is the zero
      crossing of ``dq_meas`` in that gap (linear interpolation; midpoint of the first and last
      crossing when noise makes several). The measured motion is used rather than the command
      because that is where friction and backlash act; commanded reversals lead it by the delay
      and are ill-defined for step commands.
    * ``low_speed``: ``|dq_meas| <= low_speed`` (default 0.10 * v95).
    * ``high_speed``: ``|dq_meas| > high_speed`` (default 0.50 * v95).
    * ``static``: torque enabled and ``|dq_meas| <= static_speed`` (default 0.02 * v95).
    * ``stall``: static, with the controller at its limit, ``|effort_level| >= stall_level``
      (default :data:`STALL_LEVEL`): the joint pushes as hard as the firmware lets it and does
      not move (against gravity, a stop, a jam). Empty when the log gives no controller level.
      A model's error here is its torque envelope at rest (supply, winding resistance, current
      limit) and its static friction.
    * ``driving``: torque enabled and ``motor_torque_sim * dq_sim > 0`` (the motor delivers
      mechanical power in the rollout).
    * ``backdriving``: torque enabled and ``motor_torque_sim * dq_sim < 0`` (the load drives
      the motor, which absorbs power).
    * ``torque_disabled``: ``torque_enable == 0`` (joint free).

    Regimes overlap (a sample can be near a reversal, low-speed and backdriving at once).
    Non-finite velocities belong to no speed-based regime.
    """
    th = _speed_thresholds(r, low_speed, high_speed, static_speed)
    m = r.mask
    with np.errstate(invalid="ignore"):
        speed = np.abs(r.dq_meas)
        finite = np.isfinite(speed)
        enabled = r.torque_enable > 0.5
        power = r.motor_torque_sim * r.dq_sim  # [W] sign of the mechanical power of the motor

        near = np.zeros(r.n, dtype=bool)
        times = _reversal_times(r.t, r.dq_meas, m, th["low_speed"])
        if times.size:
            pos = np.searchsorted(times, r.t)
            left = times[np.clip(pos - 1, 0, times.size - 1)]
            right = times[np.clip(pos, 0, times.size - 1)]
            dist = np.minimum(np.abs(r.t - left), np.abs(r.t - right))
            near = dist <= reversal_window_s

        masks = {
            "near_reversal": near,
            "low_speed": finite & (speed <= th["low_speed"]),
            "high_speed": finite & (speed > th["high_speed"]),
            "static": enabled & finite & (speed <= th["static_speed"]),
            "driving": enabled & (power > 0),
            "backdriving": enabled & (power < 0),
            "torque_disabled": ~enabled & np.isfinite(r.torque_enable),
        }
        level = (np.abs(r.effort_level) >= stall_level if r.effort_level is not None
                 else np.zeros(r.n, dtype=bool))
    masks["stall"] = masks["static"] & level
    masks = {k: masks[k] for k in REGIMES}  # display order
    return {k: v & m for k, v in masks.items()}


# --------------------------------------------------------------------------------------------
# Metrics
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Sums:
    """Sufficient statistics of one log, so that pooling over logs weights samples."""

    n: int
    abs_err: float  # [unit] sum |q_sim - q_meas|
    sq_err: float  # [unit^2] sum (q_sim - q_meas)^2
    sq_meas: float  # [unit^2] sum q_meas^2
    max_abs_err: float  # [unit]
    vel_abs_err: float  # [unit/s] sum |dq_sim - dq_meas|
    vel_n: int
    onestep_abs_err: float  # [unit]
    onestep_n: int
    effort_sq_err: float  # [effort^2]
    effort_sq_meas: float  # [effort^2]
    effort_n: int
    regime_abs_err: dict[str, float]
    regime_n: dict[str, int]
    thresholds: dict[str, float]


def _sums(r: LogResult, regime_kw: dict[str, Any]) -> _Sums:
    m = r.mask
    err = (r.q_sim - r.q_meas)[m]
    abs_err = np.abs(err)
    dq_meas = r.dq_meas[m]
    vel_ok = np.isfinite(dq_meas)
    vel_err = np.abs(r.dq_sim[m][vel_ok] - dq_meas[vel_ok])
    if r.q_onestep is not None:
        one = (r.q_onestep - r.q_meas)[m]
        one = np.abs(one[np.isfinite(one)])
    else:
        one = np.zeros(0)
    if r.effort_meas is not None and r.effort_sim is not None:
        e_meas = r.effort_meas[m]
        e_err = r.effort_sim[m] - e_meas
        eff = (float(np.sum(e_err**2)), float(np.sum(e_meas**2)), int(e_meas.size))
    else:
        eff = (0.0, 0.0, 0)
    masks = regime_masks(r, **regime_kw)
    abs_all = np.abs(r.q_sim - r.q_meas)
    return _Sums(
        n=int(err.size),
        abs_err=float(np.sum(abs_err)),
        sq_err=float(np.sum(err**2)),
        sq_meas=float(np.sum(r.q_meas[m] ** 2)),
        max_abs_err=float(np.max(abs_err)) if err.size else math.nan,
        vel_abs_err=float(np.sum(vel_err)),
        vel_n=int(vel_err.size),
        onestep_abs_err=float(np.sum(one)),
        onestep_n=int(one.size),
        effort_sq_err=eff[0],
        effort_sq_meas=eff[1],
        effort_n=eff[2],
        regime_abs_err={k: float(np.sum(abs_all[v])) for k, v in masks.items()},
        regime_n={k: int(np.count_nonzero(v)) for k, v in masks.items()},
        thresholds=_speed_thresholds(
            r,
            regime_kw.get("low_speed"),
            regime_kw.get("high_speed"),
            regime_kw.get("static_speed"),
        ),
    )


def _num(x: float) -> float | None:
    """JSON-ready float: NaN/inf (undefined or diverged) become None."""
    x = float(x)
    return x if math.isfinite(x) else None


def _div(a: float, b: float) -> float:
    return a / b if b > 0 else math.nan


def _metrics_from(s: list[_Sums]) -> dict[str, Any]:
    n = sum(x.n for x in s)
    abs_err = sum(x.abs_err for x in s)
    sq_err = sum(x.sq_err for x in s)
    sq_meas = sum(x.sq_meas for x in s)
    one_n = sum(x.onestep_n for x in s)
    eff_n = sum(x.effort_n for x in s)
    vel_n = sum(x.vel_n for x in s)
    mae = _div(abs_err, n)
    regimes = {}
    for k in REGIMES:
        rn = sum(x.regime_n[k] for x in s)
        regimes[k] = {
            "position_mae": _num(_div(sum(x.regime_abs_err[k] for x in s), rn)),
            "n_samples": rn,
            "fraction": _num(_div(rn, n)) if n else 0.0,
        }
    return {
        "n": n,
        "position_mae": _num(mae),
        "position_rmse": _num(math.sqrt(_div(sq_err, n)) if n else math.nan),
        "position_relative_error": _num(
            math.sqrt(sq_err) / math.sqrt(sq_meas) if sq_meas > 0 else math.nan
        ),
        "position_max_abs_error": _num(
            float(np.max([x.max_abs_err for x in s if x.n])) if n else math.nan  # NaN propagates
        ),
        "rollout_mae": _num(mae),
        "onestep_mae": _num(_div(sum(x.onestep_abs_err for x in s), one_n)) if one_n else None,
        "onestep_n_samples": one_n,
        "velocity_mae": _num(_div(sum(x.vel_abs_err for x in s), vel_n)),
        "effort_relative_error": (
            _num(
                _div(
                    math.sqrt(sum(x.effort_sq_err for x in s)),
                    math.sqrt(sum(x.effort_sq_meas for x in s)),
                )
            )
            if eff_n
            else None
        ),
        "effort_n_samples": eff_n,
        "regimes": regimes,
    }


def log_metrics(
    r: LogResult,
    *,
    low_speed: float | None = None,
    high_speed: float | None = None,
    reversal_window_s: float = 0.05,
    static_speed: float | None = None,
) -> dict[str, Any]:
    """Metrics of one replayed log as a JSON-serializable dict.

    Keys: ``log``, ``unit``, ``n`` (masked samples), ``position_mae``, ``position_rmse``,
    ``position_relative_error``, ``position_max_abs_error`` [unit], ``rollout_mae`` (= position
    MAE), ``onestep_mae`` (None without ``q_onestep``), ``onestep_n_samples``, ``velocity_mae``
    [unit/s], ``effort_relative_error`` (None without efforts), ``effort_n_samples``,
    ``regimes`` ({regime: {"position_mae", "n_samples", "fraction"}}), ``thresholds``
    ([unit/s] speed thresholds used for the regimes) and ``conditions``. Undefined or non-finite
    values are None. Regime options are those of :func:`regime_masks`.
    """
    kw = dict(
        low_speed=low_speed,
        high_speed=high_speed,
        reversal_window_s=reversal_window_s,
        static_speed=static_speed,
    )
    return _log_dict(r, _sums(r, kw))


def _log_dict(r: LogResult, s: _Sums) -> dict[str, Any]:
    out: dict[str, Any] = {"log": r.name, "unit": r.unit}
    out.update(_metrics_from([s]))
    out["thresholds"] = {k: _num(v) for k, v in s.thresholds.items()}
    out["conditions"] = {str(k): str(v) for k, v in r.conditions.items()}
    if r.winding_temperature_sim is not None:  # +thermal models: where the winding started and peaked
        w = np.asarray(r.winding_temperature_sim, float)[r.mask]
        out["winding_temperature_sim"] = {"start_degC": _num(float(w[0])) if w.size else None,
                                          "max_degC": _num(float(w.max())) if w.size else None}
    return out


def summarize(
    results: list[LogResult],
    *,
    low_speed: float | None = None,
    high_speed: float | None = None,
    reversal_window_s: float = 0.05,
    static_speed: float | None = None,
) -> dict[str, Any]:
    """Pooled metrics over several replayed logs, as a JSON-serializable dict.

    Pooling weights samples, not logs: every pooled number is computed from the masked samples of
    all logs taken together (MAE = total |error| / total samples; relative error =
    sqrt(sum e^2) / sqrt(sum q_meas^2) over all samples), so a long log weighs more than a short
    one. Regime thresholds are set per log (see :func:`regime_masks`) unless given.

    Keys: ``unit``, ``n_logs``, ``n_samples``, ``pooling`` ("samples"), the pooled metrics of
    :func:`log_metrics` (``position_mae``, ``position_rmse``, ``position_relative_error``,
    ``position_max_abs_error``, ``rollout_mae``, ``onestep_mae``, ``onestep_n_samples``,
    ``velocity_mae``, ``effort_relative_error``, ``effort_n_samples``, ``regimes``) and
    ``per_log``: one :func:`log_metrics` dict per log (each has ``log``, ``position_mae``,
    ``position_rmse``, ``position_relative_error``, ``onestep_mae``, ``n`` and more);
    ``regime_warnings``: :func:`stall_warnings`.

    Raises:
        DataError: no logs, or logs with different units (rad and m cannot be pooled).
    """
    if not results:
        raise DataError(None, "no replayed logs to summarize")
    units = sorted({r.unit for r in results})
    if len(units) > 1:
        by_unit = {u: [r.name for r in results if r.unit == u] for u in units}
        raise DataError(None, f"cannot pool logs with different position units: {by_unit}")
    kw = dict(
        low_speed=low_speed,
        high_speed=high_speed,
        reversal_window_s=reversal_window_s,
        static_speed=static_speed,
    )
    sums = [_sums(r, kw) for r in results]
    per_log = [_log_dict(r, s) for r, s in zip(results, sums)]
    pooled = _metrics_from(sums)
    n = pooled.pop("n")
    return {
        "unit": units[0],
        "n_logs": len(results),
        "n_samples": n,
        "pooling": "samples",
        **pooled,
        "per_log": per_log,
        "regime_warnings": stall_warnings(results, per_log),
    }


def stall_warnings(results: list[LogResult], per_log: list[dict[str, Any]], *,
                   min_seconds: float = STALL_WARN_SECONDS, ratio: float = STALL_WARN_RATIO) -> list[str]:
    """One warning per log whose ``stall`` regime lasts at least ``min_seconds`` [s] and carries a
    position MAE at least ``ratio`` times the log's: a model that misses where a servo stalls
    (its torque at rest, or its static friction, is off) can still score well on the whole log,
    because stalls are a small share of most logs."""
    out = []
    for r, d in zip(results, per_log):
        st = d["regimes"].get("stall") or {}
        n, mae_s, mae = st.get("n_samples", 0), st.get("position_mae"), d.get("position_mae")
        dt = float(np.median(np.diff(r.t))) if r.n > 1 else 0.0
        if not n or mae_s is None or not mae or n * dt < min_seconds or mae_s < ratio * mae:
            continue
        out.append(f"{r.name}: at stall (at rest with the controller at >= {STALL_LEVEL:.0%} of its limit; "
                   f"{n} samples, {n * dt:.2f} s) the position error is {mae_s:.3g} {r.unit}, {mae_s / mae:.1f}x "
                   "the log's: the model's torque at rest (supply, winding resistance, current limit) or its "
                   "static friction is off: the simulated joint does not stop where the servo does")
    return out


# --------------------------------------------------------------------------------------------
# Console table
# --------------------------------------------------------------------------------------------


def _fmt(x: float | None, spec: str = ".4g") -> str:
    return "-" if x is None else format(x, spec)


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100.0 * x:.1f} %"


def format_table(summary: dict[str, Any]):
    """A :class:`rich.table.Table` of a :func:`summarize` dict: one row per log, the pooled
    total, then one row per regime (pooled MAE, samples, share of all samples)."""
    from rich.table import Table

    u = summary.get("unit", "")
    table = Table(title=f"Position error by log and regime [{u}] (pooled over samples)")
    table.add_column("log / regime")
    table.add_column("n", justify="right")
    table.add_column(f"rollout MAE [{u}]", justify="right")
    table.add_column(f"RMSE [{u}]", justify="right")
    table.add_column("rel. error", justify="right")
    table.add_column(f"one-step MAE [{u}]", justify="right")
    table.add_column("effort rel. err", justify="right")
    table.add_column("share", justify="right")

    def row(name: str, d: dict[str, Any], style: str | None = None) -> None:
        table.add_row(
            name,
            str(d.get("n", d.get("n_samples", ""))),
            _fmt(d.get("position_mae")),
            _fmt(d.get("position_rmse")),
            _pct(d.get("position_relative_error")),
            _fmt(d.get("onestep_mae")),
            _pct(d.get("effort_relative_error")),
            "",
            style=style,
        )

    for d in summary.get("per_log", []):
        row(str(d["log"]), d)
    table.add_section()
    row("TOTAL", summary, style="bold")
    table.add_section()
    for name, d in summary.get("regimes", {}).items():
        table.add_row(
            name,
            str(d["n_samples"]),
            _fmt(d["position_mae"]),
            "",
            "",
            "",
            "",
            _pct(d["fraction"]),
            style="italic",
        )
    return table
