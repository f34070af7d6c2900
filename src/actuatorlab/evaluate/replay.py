"""Replay logs with a fitted model (never refitting) and collect :class:`LogResult` objects: one per
log for one joint (:func:`replay`), one per log and joint for a whole robot (:func:`replay_robot`),
so that the metrics and regimes of :mod:`actuatorlab.evaluate.metrics` judge both."""

from __future__ import annotations

from typing import Any, Iterable

import numpy as np
import jax.numpy as jnp

from ..precision import physics
from ..robots.loader import Robot
from ..sim.arm_data import log_arrays as robot_log_arrays, replay_setup
from ..sim.arm_windows import make_windows
from ..sim.backends import rollout
from ..identify.fit import fit_model, substeps_for
from ..learned.joint import JointModel, log_set, onestep_logs, rollout_logs
from ..learned.joint_train import load_joint_model
from ..models.actuator_model import LEARNED_KINDS
from ..models.modelfile import params_from_model
from ..logs.format import Trajectory
from ..models.registry import get_model
from ..sim.rollout import Batch, make_batches, one_step, rollout_batch
from .envelope import joint_effort
from .metrics import LogResult, summarize

__all__ = ["replay", "replay_batches", "evaluate_model", "timestep_sensitivity", "replay_robot", "robot_regimes"]


def log_results(b: Batch, out, q_onestep, with_effort: bool = True) -> list[LogResult]:
    """One :class:`LogResult` per log of batch ``b`` from rollout outputs ``out`` (leaves (B, T))
    and one-step predictions (B, T); ``with_effort``: ``out.u`` is comparable with the measured
    controller output (analytic models)."""
    q1 = np.asarray(q_onestep)
    results = []
    for i, name in enumerate(b.names):
        n = int(b.mask[i].sum())
        eff_meas = b.effort_meas[i][:n]
        has_eff = with_effort and bool(np.isfinite(eff_meas).all())
        results.append(LogResult(
            name=name, unit=b.unit, t=b.t[i][:n], q_meas=b.q_meas[i][:n],
            q_sim=np.asarray(out.q[i])[:n], dq_meas=b.dq_meas[i][:n], dq_sim=np.asarray(out.dq[i])[:n],
            q_target=b.q_target[i][:n], torque_enable=b.enable[i][:n], mask=np.ones(n, bool),
            motor_torque_sim=np.asarray(out.tau_motor[i])[:n],
            external_torque_sim=np.asarray(out.tau_ext[i])[:n],
            q_onestep=q1[i][:n],
            effort_meas=eff_meas if has_eff else None,
            effort_sim=np.asarray(out.u[i])[:n] if has_eff else None,
            conditions=dict(b.conditions[i]) if b.conditions else {},
            effort_level=None if b.effort_level is None else b.effort_level[i][:n],
            winding_temperature_sim=(None if getattr(out, "temperature", None) is None
                                     else np.asarray(out.temperature[i])[:n])))
    return results


@physics
def replay_batches(model: str, params: dict, batches: list[Batch]) -> list[LogResult]:
    """Full closed-loop rollouts and one-step predictions of every log of every batch."""
    spec = get_model(model)
    p = {k: jnp.asarray(float(v), dtype=jnp.float64) for k, v in params.items()}
    results = []
    for b in batches:
        cfg = b.step_config(spec.compliant, substeps_for(spec), spec.thermal)
        arr = b.arrays()
        results.extend(log_results(b, rollout_batch(cfg, p, arr), one_step(cfg, p, arr)))
    return results


@physics
def replay_joint(model: JointModel, batches) -> list:
    """Full closed-loop replays and one-step predictions, as :class:`LogResult` objects (the same
    as the analytic replay, :func:`replay_batches`)."""
    results = []
    for b in batches:
        ls = log_set(model, b)
        results.extend(log_results(b, rollout_logs(model, ls), onestep_logs(model, ls),
                                   with_effort=model.kind == "residual"))
    return results


@physics
def replay(model_dict: dict, trajs: list[Trajectory], dt: float | None = None) -> list[LogResult]:
    """Replay ``trajs`` with the model of a loaded model.json (at its fitted dt unless given)."""
    dt = float(dt if dt is not None else model_dict.get("fit", {}).get("dt") or 0) or None
    if model_dict.get("kind") in LEARNED_KINDS:  # learned / residual (load_model checked the kind)
        return replay_joint(load_joint_model(model_dict, model_dict["_path"]), make_batches(trajs, dt))
    return replay_batches(model_dict["model"], params_from_model(model_dict), make_batches(trajs, dt))


@physics
def evaluate_model(model_dict: dict, trajs: list[Trajectory], dt: float | None = None) -> dict:
    """Metrics of a fitted model on logs (see :func:`actuatorlab.evaluate.summarize`)."""
    return summarize(replay(model_dict, trajs, dt))


@physics
def timestep_sensitivity(model_dict: dict, trajs: list[Trajectory], *, refit: bool = True,
                         refit_evals: int = 600, seed: int = 0) -> dict:
    """Position MAE of the same parameters replayed at dt/2, dt and 2 dt, and (``refit``) how far
    the parameters move when refitted at dt/2 and 2 dt (short CMA-ES from the fitted optimum).

    A model whose error or parameters change a lot with dt has parameters that compensate the
    integrator rather than describe the actuator.
    """
    dt = float(model_dict.get("fit", {}).get("dt") or 0.005)
    params = params_from_model(model_dict)
    free = [n for n, e in model_dict["parameters"].items() if e.get("free")]
    # the refits search the boxes the model was fitted in (model.json records them, e.g. a calibration's)
    boxes = {n: (float(model_dict["parameters"][n]["lower"]), float(model_dict["parameters"][n]["upper"]))
             for n in free if "lower" in model_dict["parameters"][n] and "upper" in model_dict["parameters"][n]}
    rows = {}
    for label, f in (("dt/2", 0.5), ("dt", 1.0), ("2dt", 2.0)):
        s = summarize(replay(model_dict, trajs, dt * f))
        row = {"dt": dt * f, "position_mae": s["position_mae"]}
        if refit and f != 1.0 and free:
            r = fit_model(trajs, model_dict["model"], seed=seed, max_evals=refit_evals, n_starts=1,
                          grad_steps=0, init=params, dt=dt * f, sigma0=0.03, bounds=boxes or None)
            row["refit_position_mae"] = r.train_mae
            # relative to the value, or to 1 % of the search range for values near zero
            scale = {n: max(abs(params[n]), 0.01 * (model_dict["parameters"][n].get("upper", 1.0)
                                                   - model_dict["parameters"][n].get("lower", 0.0)))
                     for n in free}
            row["parameter_change"] = {n: (r.params[n] - params[n]) / scale[n] for n in free}
            row["max_abs_relative_change"] = max(abs(v) for v in row["parameter_change"].values())
        rows[label] = row
    base = rows["dt"]["position_mae"] or float("nan")
    for row in rows.values():
        row["ratio_to_dt"] = (row["position_mae"] / base) if base and row["position_mae"] is not None else None
    return rows


@physics
def replay_robot(robot: str | Robot, params: dict | None, trajs: Iterable[Trajectory], horizon: int,
                 model: str | None = None) -> dict[str, list[LogResult]]:
    """{joint: one :class:`LogResult` per multi-joint log that records it}, from the native window
    rollouts that :func:`~actuatorlab.sim.arm_data.evaluate_arm` scores at ``horizon`` control
    steps (same arguments): each log cut into windows of ``horizon`` steps that restart from the
    measured state, stitched back on the log's time base (``q_sim`` restarts at every window start;
    ``mask`` is the samples a window covers; a log shorter than ``horizon`` is skipped, as there).
    ``effort_level`` is the logged ``pwm_duty/<joint>`` / ``max_duty``
    (:func:`~actuatorlab.evaluate.envelope.joint_effort`; NaN with the torque off), so the
    ``stall`` regime needs that channel."""
    r0, r, p, cfg, nm = replay_setup(robot, params, model)
    h = int(horizon)
    out: dict[str, list[LogResult]] = {}
    for t in trajs:
        lg = robot_log_arrays(r0, t)
        T = lg.q_meas.shape[0]
        if h > T:
            continue
        w = make_windows(r, lg.q_meas, lg.dq_meas, lg.inputs, h, cfg=cfg, temperature=lg.temperature)
        _, o = rollout(r, p, w.inputs, w.state0, backend="native", cfg=cfg, model=nm)
        idx = (w.start[:, None] + np.arange(h)[None, :])[w.mask]  # (K,) log sample of each simulated one
        covered = np.zeros(T, bool)
        covered[idx] = True

        def stitch(x) -> np.ndarray:  # (W, L, n) -> (T, n), NaN where no window
            y = np.full((T, r0.n_joints), np.nan)
            y[idx] = np.asarray(x)[w.mask]
            return y

        q, dq, tau, ext = (stitch(v) for v in (o.q, o.dq, o.tau_motor, o.tau_ext))
        enable = np.asarray(lg.inputs.enable, float)
        for i, j in enumerate(r0.joint_names):
            if not lg.scored[i]:
                continue
            effort = joint_effort(r0, t, j)
            out.setdefault(j, []).append(LogResult(
                name=t.name, unit="m" if lg.units.get(j) == "m" else "rad", t=np.asarray(t.time, float),
                q_meas=lg.q_meas[:, i], q_sim=q[:, i], dq_meas=lg.dq_meas[:, i], dq_sim=dq[:, i],
                q_target=np.asarray(lg.inputs.q_target)[:, i], torque_enable=enable[:, i], mask=covered,
                motor_torque_sim=tau[:, i], external_torque_sim=ext[:, i],
                conditions={str(k): str(v) for k, v in t.conditions.items()},
                effort_level=None if effort is None else np.where(enable[:, i] > 0.5, effort, np.nan)))
    return out


def robot_regimes(robot: str | Robot, params: dict | None, trajs: Iterable[Trajectory], horizon: int,
                  model: str | None = None) -> dict[str, Any]:
    """The one-joint evaluation's regime breakdown (:func:`~actuatorlab.evaluate.metrics.summarize`)
    of each joint of a whole robot, pooled over the logs at ``horizon`` control steps
    (:func:`replay_robot`). Returns {"per_joint_regimes": {joint: {regime: {"position_mae",
    "n_samples", "fraction"}}}, "regime_horizon": horizon, "regime_warnings": [...]}; a joint's
    pooled position MAE over the covered samples is evaluate_arm's per-joint MAE at that horizon."""
    per = {j: summarize(rs) for j, rs in replay_robot(robot, params, trajs, horizon, model).items()}
    return {"per_joint_regimes": {j: s["regimes"] for j, s in per.items()}, "regime_horizon": int(horizon),
            "regime_warnings": [f"{j}: {w}" for j, s in per.items() for w in s["regime_warnings"]]}
