"""Whole-robot rollouts in native MuJoCo: the fast path (no gradients).

Same inputs, state, outputs and equations as :func:`actuatorlab.sim.arm.make_mjx_rollout` (read
that module's docstring for the timing and the torque law). Per physics step and per environment:
``mj_step1`` (positions, velocities, mass matrix, bias forces), the actuator torque for the whole
batch at once in NumPy, then ``qfrc_applied`` and ``mj_step2`` (acceleration, constraints,
integration). ``mj_step1``/``mj_step2`` are valid for the Euler and implicitfast integrators,
the two a robot config allows.

The actuator equations are not re-written for NumPy: :func:`numpy_twin` re-binds the library's
JAX functions (control laws, ``drive_effort``, ``friction_budget``, ``stick_slip_torque``,
``transmission_coupling``, ``dc_motor_current``) to ``numpy`` in place of ``jax.numpy``, so both paths run one source
of truth. This works because those functions only use array functions that NumPy has with the
same meaning (clip, where, abs, sign, exp, power, minimum, sqrt); :data:`NUMPY_KIT` is checked
against :data:`~actuatorlab.sim.arm.JAX_KIT` in tests/test_arm_sim.py and
tests/test_arm_backlash.py.
"""

from __future__ import annotations

import copy
import types
import weakref
from typing import Callable

import mujoco
import numpy as np

from ..errors import ModelError
from ..models.actuator import drive_effort, transmission_coupling
from ..models.control import CONTROL_LAWS
from ..models.friction import friction_budget, stick_slip_torque
from ..models.motor import dc_motor_current
from ..precision import physics
from ..robots.loader import Robot
from .arm import (ArmConfig, ArmInputs, ArmOutputs, ArmState, Kit, delayed, filter_gain, firmware_output,
                  hot_params, joint_effort, layout, motor_current, motor_effort, motor_side, mujoco_armature,
                  push, target_at, thermal_step)
from .arm_learned import combine_effort, frame, initial_history, LearnedArm, step_fn_batched, telemetry_or_empty

__all__ = ["numpy_twin", "NUMPY_KIT", "native_model", "rollout_native"]

_TWINS: dict = {}
#: MjData objects reused across calls, per model (creating one costs ~1 ms; resetting ~10 us).
#: Not shared between threads: give each thread its own model (:func:`native_model`).
_POOL: "weakref.WeakKeyDictionary[mujoco.MjModel, list[mujoco.MjData]]" = weakref.WeakKeyDictionary()


def numpy_twin(fn: Callable) -> Callable:
    """``fn`` with ``jnp`` bound to ``numpy`` (and the actuatorlab model functions it calls bound
    to their own twins). The code object is shared: the equations are the library's."""
    if fn in _TWINS:
        return _TWINS[fn]
    g = dict(fn.__globals__)
    twin = types.FunctionType(fn.__code__, g, fn.__name__, fn.__defaults__, fn.__closure__)
    _TWINS[fn] = twin
    g["jnp"] = np
    for name in fn.__code__.co_names:
        v = g.get(name)
        if isinstance(v, types.FunctionType) and v.__module__.startswith("actuatorlab.models"):
            g[name] = numpy_twin(v)
    return twin


NUMPY_KIT = Kit(np, {k: numpy_twin(v.fn) for k, v in CONTROL_LAWS.items()}, numpy_twin(drive_effort),
                numpy_twin(friction_budget), numpy_twin(stick_slip_torque), numpy_twin(transmission_coupling),
                numpy_twin(dc_motor_current))


def native_model(robot: Robot, params: dict, model_updates: dict | None = None) -> mujoco.MjModel:
    """A private copy of the robot's native model with the joints' armature from ``params``
    (parameter sets, as for the rollout; 0 for compliant joints, see
    :func:`~actuatorlab.sim.arm.mujoco_armature`) and ``model_updates`` (MjModel field -> array)
    written in."""
    m = copy.copy(robot.model())
    p = robot.joint_params(params)
    m.dof_armature[robot.dof_adr] = mujoco_armature(robot.compliant, p["armature"])
    for k, v in (model_updates or {}).items():
        getattr(m, k)[...] = np.asarray(v)
    return m


def _diag_index(m: mujoco.MjModel, dadr: np.ndarray) -> tuple[str, np.ndarray]:
    """Where the mass-matrix diagonal of dofs ``dadr`` lives in MjData (MuJoCo 4: CSR ``M``)."""
    if hasattr(m, "M_rowadr") and hasattr(mujoco.MjData, "M"):
        return "M", (m.M_rowadr + m.M_rownnz - 1)[dadr]
    return "qM", m.dof_Madr[dadr]


@physics
def rollout_native(robot: Robot, params, inputs: ArmInputs, state: ArmState,
                   cfg: ArmConfig | None = None, model_updates: dict | None = None,
                   model: mujoco.MjModel | None = None, *, heads: bool = False, ctrl=None,
                   body_force: tuple[int, np.ndarray] | None = None):
    """Native MuJoCo rollout; arrays as in the MJX path, optionally with a leading batch axis B
    on ``inputs`` and ``state``. Returns NumPy arrays (ArmState, ArmOutputs), and the learned
    model's heads (T, ...) per control step (None for analytic parameters) as a third item when
    ``heads``.

    ``params`` may be a learned / residual model (:class:`~actuatorlab.sim.arm_learned.LearnedArm`,
    inputs :class:`~actuatorlab.sim.arm_learned.LearnedInputs` when it reads telemetry): its
    network is evaluated once per control step for the whole batch by one jitted JAX call, the
    physics stays native (the MJX path's equations, :mod:`actuatorlab.sim.arm_learned`).

    ``params`` values are (n_groups,) (shared by the batch) or (B, n_groups): one parameter set
    per environment, e.g. a whole CMA-ES population times the fit windows in one call. A
    per-environment armature runs each environment on its own copy of the model (MuJoCo puts the
    armature in the mass matrix).

    ``ctrl``: None or (T, nu) (batched (B, T, nu)) MuJoCo ``ctrl`` held over each control step, for
    the model's own actuators (a mixed robot's built-in joints, as the MJX path).

    ``model``: a model from :func:`native_model` to reuse (it must hold the same parameters;
    with per-environment armature only its structure and other fields are used); built from
    ``params``/``model_updates`` when omitted.

    ``body_force``: (body id, force (B, 3) or (3,) [N], world frame) an external force on that
    body's centre of mass (MuJoCo ``xfrc_applied``), held constant over the call (e.g. a push on
    the end effector); its joint torque J^T f (``mj_applyFT``) is part of the external effort the
    friction sees (``tau_smooth`` of :func:`~actuatorlab.sim.arm.joint_effort`), like a payload's
    weight in ``qfrc_bias``; None: no external force.
    """

    cfg = cfg or ArmConfig.from_robot(robot)
    learned = params if isinstance(params, LearnedArm) else None
    if learned is not None:
        params = learned.base
    x = ArmInputs(*[np.asarray(v, float) for v in inputs[:3]])
    s0 = ArmState(*[np.asarray(v, float) for v in state])
    batched = x.q_target.ndim == 3
    tele = getattr(inputs, "telemetry", None)
    past = getattr(inputs, "past", None)
    if ctrl is not None:
        ctrl = np.asarray(ctrl, float)
        ctrl = ctrl if batched else ctrl[None]
    if not batched:
        x = ArmInputs(*[v[None] for v in x])
        s0 = ArmState(*[v[None] for v in s0])
        tele = None if tele is None else np.asarray(tele)[None]
        past = None if past is None else np.asarray(past)[None]
    B, T, n = x.q_target.shape
    if (n != robot.n_joints or s0.qpos.shape != (B, robot.nq) or s0.qvel.shape != (B, robot.nv)
            or s0.qm.shape != (B, n) or s0.dqm.shape != (B, n) or s0.temperature.shape != (B, n)):
        raise ModelError(f"{robot.name}: inputs (B, T, {robot.n_joints}) and states (B, nq={robot.nq}, "
                         f"nv={robot.nv}, qm/dqm/temperature n={robot.n_joints}) expected, got "
                         f"{x.q_target.shape}, {s0.qpos.shape}, {s0.qvel.shape}, {s0.qm.shape}, "
                         f"{s0.temperature.shape}")
    if s0.hist_target.shape[-2] != cfg.delay_steps:
        raise ModelError(f"state delay line holds {s0.hist_target.shape[-2]} steps, the config {cfg.delay_steps}")

    p = {k: np.asarray(v) for k, v in robot.joint_params(params).items()}
    if any(v.ndim > 1 and v.shape[0] != B for v in p.values()):
        raise ModelError(f"per-environment parameters must have shape ({B}, n_groups)")
    arm_b = p["armature"].ndim > 1
    shared = {k: (v[0] if v.ndim > 1 else v) for k, v in params.items()} if arm_b else params
    m = native_model(robot, shared, model_updates) if model is None else model
    models = [m] * B
    if arm_b:  # one model copy per distinct armature row
        copies: dict = {}
        for b in range(B):
            key = p["armature"][b].tobytes()
            if key not in copies:
                copies[key] = copy.copy(m)
                copies[key].dof_armature[robot.dof_adr] = mujoco_armature(robot.compliant, p["armature"][b])
            models[b] = copies[key]
    lay = layout(robot)
    lc0 = robot.law_constants()
    lc = lc0._replace(dt=np.full_like(lc0.dt, cfg.firmware_dt))
    kit, h = NUMPY_KIT, cfg.physics_dt
    qadr, dadr = lay.qadr, lay.dadr
    mfield, madr = _diag_index(m, dadr)
    a_filt = filter_gain(cfg)
    dsteps = p["delay"] / cfg.control_dt

    pool = _POOL.setdefault(m, [])
    pool.extend(mujoco.MjData(m) for _ in range(B - len(pool)))
    datas = pool[:B]
    ext = None if body_force is None else np.ascontiguousarray(np.broadcast_to(np.asarray(body_force[1], float), (B, 3)))
    ext_body = None if body_force is None else int(body_force[0])
    q_ext, zero3 = np.zeros((B, m.nv)), np.zeros(3)
    for b, d in enumerate(datas):
        mujoco.mj_resetData(models[b], d)
        d.qpos[:] = s0.qpos[b]
        d.qvel[:] = s0.qvel[b]
        if ext is not None:
            d.xfrc_applied[ext_body, :3] = ext[b]
    qpos_v = [d.qpos for d in datas]
    qvel_v = [d.qvel for d in datas]
    mm_v = [getattr(d, mfield) for d in datas]
    bias_v = [d.qfrc_bias for d in datas]
    pas_v = [d.qfrc_passive for d in datas]
    app_v = [d.qfrc_applied for d in datas]

    q_prev, q_prev2, u = s0.q_prev.copy(), s0.q_prev2.copy(), s0.u.copy()
    t_prev, filt = s0.target_prev.copy(), s0.target_filt.copy()
    hist_t, hist_e = s0.hist_target.copy(), s0.hist_enable.copy()
    qm, dqm = s0.qm.copy(), s0.dqm.copy()
    temp = s0.temperature.copy()
    compliant = bool(lay.compliant.any())
    unit_rows = np.zeros((n, m.nv))
    unit_rows[np.arange(n), dadr] = 1.0
    minv_cols = np.empty((B, n, m.nv))
    outs = {k: np.empty((B, T, n)) for k in ("q", "dq", "u", "tau_motor", "tau_friction", "tau_ext", "qm", "dqm",
                                                 "temperature", "current")}
    qpos_out, qvel_out = np.empty((B, T, robot.nq)), np.empty((B, T, robot.nv))

    if learned is not None:
        if learned.n_joints != n:
            raise ModelError(f"learned model has {learned.n_joints} joints, {robot.name} {n}")
        if not learned.residual and lay.compliant[learned.mask].any():
            raise ModelError(f"{robot.name}: a learned (not residual) effort needs rigid channels; "
                             f"compliant transmissions are only corrected (residual)")
        import jax

        tele = np.stack([np.asarray(telemetry_or_empty(learned, None if tele is None else tele[b], T))
                         for b in range(B)])
        hist_n = np.stack([np.asarray(initial_history(
            learned, frame(learned, x.q_target[b, 0], s0.qpos[b, qadr], s0.qvel[b, dadr], x.v_supply[b, 0],
                           x.enable[b, 0], tele[b, 0]), None if past is None else past[b])) for b in range(B)])
        heads_out = []
    for k in range(T):
        if learned is not None:  # the network's effort for the whole batch, held over the step
            tau_net, hd, hist_n = step_fn_batched(learned, hist_n, x.q_target[:, k], np.array(qpos_v)[:, qadr],
                                                  np.array(qvel_v)[:, dadr], x.v_supply[:, k], x.enable[:, k],
                                                  tele[:, k])
            tau_net = np.asarray(tau_net, float)
            heads_out.append(jax.tree.map(np.asarray, hd))
        hist_t = push(np, hist_t, x.q_target[:, k])
        hist_e = push(np, hist_e, x.enable[:, k])
        tgt, en = delayed(np, hist_t, dsteps), delayed(np, hist_e, dsteps)
        vs = x.v_supply[:, k]
        if ctrl is not None:
            for b, d in enumerate(datas):
                d.ctrl[:] = ctrl[b, k]
        for b in range(B):
            qpos_out[b, k] = qpos_v[b]
            qvel_out[b, k] = qvel_v[b]
        for s in range(cfg.substeps):
            for mb, d in zip(models, datas):
                mujoco.mj_step1(mb, d)
            # one copy of each whole array per step, then one gather (cheaper than per-env indexing)
            q, dq = np.array(qpos_v)[:, qadr], np.array(qvel_v)[:, dadr]
            m_diag = np.array(mm_v)[:, madr]
            if compliant:  # 1 / (M^-1)[i, i] from MuJoCo's factorisation of M (mj_step1 made it)
                for b, d in enumerate(datas):
                    mujoco.mj_solveM(models[b], d, minv_cols[b], unit_rows)
                i_load = 1.0 / minv_cols[:, np.arange(n), dadr]
            else:
                i_load = None
            tau_s = (np.array(pas_v) - np.array(bias_v))[:, dadr]
            if ext is not None:  # the push is a load on the joints too (the friction's stick/slip sees it)
                q_ext.fill(0.0)
                for b, d in enumerate(datas):
                    mujoco.mj_applyFT(models[b], d, ext[b], zero3, d.xipos[ext_body], ext_body, q_ext[b])
                tau_s = tau_s + q_ext[:, dadr]
            qm, dqm = motor_side(lay, np, q, dq, qm, dqm)
            if s % cfg.law_every == 0:
                filt = filt + a_filt * (tgt - filt)
                q_meas = q - p["q_offset"]
                u = firmware_output(kit, lay, p, lc, target_at(np, cfg, s, tgt, t_prev, filt),
                                    q_meas, q_prev, q_prev2, dq, vs)
                q_prev, q_prev2 = q_meas, q_prev
            p_hot = hot_params(kit, lay, p, temp)
            tau_m = motor_effort(kit, lay, p_hot, lc, u, dqm, en)
            cur = motor_current(kit, lay, p_hot, u, dqm, en)
            applied, tau_f, tau_e, qm1, dqm1 = joint_effort(kit, lay, p, tau_m, q, dq, qm, dqm, m_diag, i_load,
                                                            tau_s, h)
            if learned is not None:
                applied = combine_effort(learned, applied, tau_net, np)
                if not learned.residual:
                    tau_m = np.where(learned.mask, tau_net, tau_m)
                    tau_f = np.where(learned.mask, 0.0, tau_f)
            for b, d in enumerate(datas):
                app_v[b][dadr] = applied[b]
                mujoco.mj_step2(models[b], d)
            if s == 0:
                for key, val in (("q", q), ("dq", dq), ("u", u), ("tau_motor", tau_m),
                                 ("tau_friction", tau_f), ("tau_ext", tau_e), ("qm", qm), ("dqm", dqm),
                                 ("temperature", temp), ("current", cur)):
                    outs[key][:, k] = val
            qm, dqm = qm1, dqm1
            temp = thermal_step(kit, lay, p_hot, temp, cur, h)
        t_prev = tgt

    qpos_f, qvel_f = np.array(qpos_v), np.array(qvel_v)
    qm, dqm = motor_side(lay, np, qpos_f[:, qadr], qvel_f[:, dadr], qm, dqm)
    final = ArmState(qpos_f, qvel_f, q_prev, q_prev2, u, t_prev, filt, hist_t, hist_e, qm, dqm, temp)
    out = ArmOutputs(outs["q"], outs["dq"], outs["u"], outs["tau_motor"], outs["tau_friction"],
                     outs["tau_ext"], qpos_out, qvel_out, outs["qm"], outs["dqm"], outs["temperature"],
                     outs["current"])
    hd = None
    if learned is not None:  # (B, T, ...)
        import jax

        hd = jax.tree.map(lambda *a: np.stack(a, axis=1), *heads_out)
    if not batched:
        final = ArmState(*[v[0] for v in final])
        out = ArmOutputs(*[v[0] for v in out])
        hd = None if hd is None else jax.tree.map(lambda a: a[0], hd)
    return (final, out, hd) if heads else (final, out)
