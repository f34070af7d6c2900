"""What the operating envelope says about an evaluation: where the error comes from, warnings, and
the JSON-ready summary of the per-log checks (:mod:`actuatorlab.evaluate.envelope` computes the
envelope and the per-sample outside masks; this module reads only those masks).

The same summary serves one joint (one :class:`~actuatorlab.evaluate.envelope.EnvelopeCheck` per
log) and a whole robot (:func:`robot_outside`: one check per joint of each multi-joint log):
fractions weight samples, a sample is outside when it is outside in at least one dimension.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from ..logs.format import Trajectory
from ..robots.loader import Robot
from ..sim.arm_data import _robot
from .envelope import EnvelopeCheck, check_robot_log

__all__ = ["error_attribution", "describe", "envelope_warnings", "summarize_envelope", "robot_outside"]

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


def robot_outside(robot: str | Robot, envelope: Mapping[str, Mapping[str, Any]],
                  trajs: Iterable[Trajectory]) -> dict[str, Any]:
    """Share of each multi-joint log's samples outside ``envelope`` ({joint: envelope dict}): per
    joint (any dimension the joint's envelope and the log both have) and pooled over the joints
    they share (:func:`summarize_envelope` of the log's per-joint checks).

    Returns {"outside_fraction": {log: share | None (no shared joint)}, "per_joint": {log: {joint:
    share}}, "outside_dimensions": {log: {joint: {dimension: share}}}, "warnings": [...]}.
    """
    r = _robot(robot)
    out: dict[str, Any] = {"outside_fraction": {}, "per_joint": {}, "outside_dimensions": {}, "warnings": []}
    for t in trajs:
        checks = check_robot_log(r, envelope, t)
        s = summarize_envelope(checks, None, "rad")
        out["outside_fraction"][t.name] = s["outside_fraction"] if checks else None
        out["per_joint"][t.name] = {j: v["outside_fraction"] for j, v in s["per_log"].items()}
        out["outside_dimensions"][t.name] = {j: v["outside_dimensions"] for j, v in s["per_log"].items()}
        out["warnings"] += [f"{t.name}: {w}" for w in s["warnings"]]
    return out
