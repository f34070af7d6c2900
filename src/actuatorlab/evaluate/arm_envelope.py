"""The operating envelope of a whole-robot fit: per joint, the region its training logs covered.

``actuatorlab fit --robot`` records it in arm_model.json (``envelope``: {joint name: envelope
dict}); the environments (:mod:`actuatorlab.envs`) read it from there and count, per joint and
episode, the time a policy drives the joint outside it (:mod:`actuatorlab.envs.envelope`).

Per joint that the logs record (``position/<joint>``), on the robot's control grid
(:func:`~actuatorlab.identify.arm_fit.log_arrays`):

* ``position`` [rad | m] and ``velocity`` [rad/s | m/s] (the logged velocity, else the gradient of
  the position), pooled over the logs, with the 1-D range rule of the one-joint envelope
  (:func:`actuatorlab.evaluate.envelope.compute_envelope`): the ``quantiles`` (default 0.1 % and
  99.9 %) widened on each side by ``margin`` (default 5 %) of their span and at least by the
  signal's resolution (median step between distinct logged values);
* ``effort`` [1] and the saturation check only where every log has ``pwm_duty/<joint>``
  (signed duty / the joint's ``max_duty``): multi-joint logs rarely carry the controller output,
  and an effort computed through the fitted model would describe the model, not the data.
  ``regimes.saturated`` is the share of those samples with ``|effort| >= saturation_level``.

The dict has the keys of the one-joint envelope (``version``, ``dt``, ``unit``, ``settings``,
``n_samples``, ``logs``, ``dimensions``, ``planes`` (empty: no 2-D occupancy), ``regimes``,
``conditions``), so :func:`~actuatorlab.evaluate.envelope.validate_envelope` and
:func:`~actuatorlab.evaluate.envelope.check_log`'s 1-D checks read it.
"""

from __future__ import annotations

from typing import Any, Iterable, Sequence

import numpy as np

from ..errors import DataError
from .envelope import DEFAULTS, ENVELOPE_VERSION, _resolution
from ..sim.arm_data import _robot, log_arrays

__all__ = ["arm_envelope", "joint_range", "outside_fraction"]

UNITS = {"position": ("rad", "m"), "velocity": ("rad/s", "m/s"), "effort": ("1", "1")}


def joint_range(x: np.ndarray, raw: np.ndarray | None = None, quantiles: Sequence[float] = DEFAULTS["quantiles"],
                margin: float = DEFAULTS["margin"]) -> tuple[float, float, float, float]:
    """(lower, upper, min, max) of samples ``x``: quantile range widened by ``margin`` x span and at
    least by the resolution of ``raw`` (default ``x``)."""
    x = np.asarray(x, float)
    x = x[np.isfinite(x)]
    lo, hi = (float(v) for v in np.quantile(x, [float(quantiles[0]), float(quantiles[1])]))
    res = _resolution(np.asarray(raw if raw is not None else x, float))
    pad = max(float(margin) * (hi - lo), res)
    return lo - pad, hi + pad, float(x.min()), float(x.max())


def arm_envelope(robot, trajs: Iterable, *, quantiles: Sequence[float] = DEFAULTS["quantiles"],
                 margin: float = DEFAULTS["margin"],
                 saturation_level: float = DEFAULTS["saturation_level"]) -> dict[str, dict[str, Any]]:
    """{joint name: envelope dict} of the joints the multi-joint logs ``trajs`` record (module
    docstring); ``robot`` a name or :class:`~actuatorlab.robots.Robot`."""

    r = _robot(robot)
    trajs = list(trajs)
    if not trajs:
        raise DataError(None, "envelope: no training logs")
    logs = [log_arrays(r, t) for t in trajs]
    lc = r.law_constants()
    max_duty = np.broadcast_to(np.asarray(lc.max_duty, float), (r.n_joints,))
    out: dict[str, dict[str, Any]] = {}
    for j in r.joint_names:
        i = r.index(j)
        mine = [(t, a) for t, a in zip(trajs, logs) if a.scored[i]]
        if not mine:
            continue
        unit = mine[0][1].units.get(j) or "rad"
        ui = 1 if unit == "m" else 0
        q = np.concatenate([a.q_meas[:, i] for _, a in mine])
        dq = np.concatenate([a.dq_meas[:, i] for _, a in mine])
        dims = {}
        for name, x in (("position", q), ("velocity", dq)):
            lo, hi, mn, mx = joint_range(x, None, quantiles, margin)
            dims[name] = {"unit": UNITS[name][ui], "lower": lo, "upper": hi, "min": mn, "max": mx, "n": int(x.size)}
        regimes: dict[str, float] = {}
        if all(t.has(f"pwm_duty/{j}") for t, _ in mine):
            raw = np.concatenate([np.asarray(t[f"pwm_duty/{j}"], float) for t, _ in mine])
            e = raw / (max_duty[i] if max_duty[i] > 0 else 1.0)
            lo, hi, mn, mx = joint_range(e, raw, quantiles, margin)
            dims["effort"] = {"unit": "1", "lower": lo, "upper": hi, "min": mn, "max": mx, "n": int(e.size)}
            ok = e[np.isfinite(e)]
            regimes["saturated"] = float(np.mean(np.abs(ok) >= saturation_level)) if ok.size else 0.0
        out[j] = {"version": ENVELOPE_VERSION, "dt": float(r.control_dt), "unit": unit,
                  "settings": {"quantiles": [float(v) for v in quantiles], "margin": float(margin),
                               "saturation_level": float(saturation_level), "rest_speed": 0.0,
                               "rest_window_s": float(DEFAULTS["rest_window_s"])},
                  "n_samples": int(q.size), "logs": [t.name for t, _ in mine], "dimensions": dims,
                  "planes": {}, "regimes": regimes, "conditions": {}, "checked_conditions": [],
                  "source": "whole-robot training logs (identify.arm_envelope)"}
    return out


def outside_fraction(robot, envelope: dict[str, dict], traj) -> dict[str, Any]:
    """Share of one multi-joint log's samples outside ``envelope`` ({joint: dict}): per joint (any
    recorded dimension; effort only when the log has ``pwm_duty/<joint>``) and pooled over the
    joints the envelope and the log share. {"outside_fraction": float | None, "per_joint":
    {joint: float}}."""

    r = _robot(robot)
    a = log_arrays(r, traj)
    max_duty = np.broadcast_to(np.asarray(r.law_constants().max_duty, float), (r.n_joints,))
    per, n_out, n_all = {}, 0, 0
    for j, env in envelope.items():
        if j not in r.joint_names or not a.scored[r.index(j)]:
            continue
        i = r.index(j)
        sig = {"position": a.q_meas[:, i], "velocity": a.dq_meas[:, i]}
        if traj.has(f"pwm_duty/{j}"):
            sig["effort"] = np.asarray(traj[f"pwm_duty/{j}"], float) / (max_duty[i] if max_duty[i] > 0 else 1.0)
        bad = np.zeros(a.q_meas.shape[0], bool)
        for dim, d in env["dimensions"].items():
            if dim in sig:
                x = sig[dim]
                bad |= np.isfinite(x) & ((x < d["lower"]) | (x > d["upper"]))
        per[j] = float(bad.mean())
        n_out += int(bad.sum())
        n_all += bad.size
    return {"outside_fraction": n_out / n_all if n_all else None, "per_joint": per}
