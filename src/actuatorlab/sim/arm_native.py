"""Whole-robot rollouts in native MuJoCo: the fast backend (no gradients).

Same inputs, state, outputs and equations as the MJX backend
(:func:`actuatorlab.sim.arm.make_mjx_rollout`): both run the common physics step of
:mod:`actuatorlab.sim.arm_step` (read its docstring for the timing and the torque law), here with
``numpy`` as the array namespace. Per physics step and per environment: ``mj_step1`` (positions,
velocities, mass matrix, bias forces; :class:`~.arm_step.Sensed` for the whole batch at once), the
actuator step for the whole batch, then ``qfrc_applied`` and ``mj_step2`` (acceleration,
constraints, integration). ``mj_step1``/``mj_step2`` are valid for the Euler and implicitfast
integrators, the two a robot config allows.
"""

from __future__ import annotations

import copy
from collections import OrderedDict
from dataclasses import dataclass

import mujoco
import numpy as np

from ..errors import ModelError
from ..precision import physics
from ..robots.loader import Robot
from .arm_learned import frame, initial_history, LearnedArm, LearnedInputs, step_fn_batched, telemetry_or_empty
from .arm_step import (ActuatorState, ArmConfig, ArmInputs, ArmOutputs, ArmState, Command, Sensed, StepRecord,
                       actuator_step, actuators, arm_outputs, check_learned, command_step, motor_side,
                       mujoco_armature)

__all__ = ["native_model", "rollout_native"]

#: MjData objects reused across calls, per model (creating one costs ~1 ms; resetting ~10 us), for
#: the :data:`_POOL_MODELS` models used last. Not shared between threads: give each thread its own
#: model (:func:`native_model`). An MjData holds its model, so a weakly keyed pool would keep every
#: model alive (about 160 MB per OpenManipulator-X batch); the pool is bounded instead.
_POOL: "OrderedDict[int, tuple[mujoco.MjModel, list[mujoco.MjData]]]" = OrderedDict()
_POOL_MODELS = 8


def _pooled(m: mujoco.MjModel, B: int) -> list[mujoco.MjData]:
    """B MjData of model ``m`` from the pool (created as needed; least recently used models leave)."""
    hit = _POOL.get(id(m))
    if hit is None or hit[0] is not m:
        hit = _POOL[id(m)] = (m, [])
    _POOL.move_to_end(id(m))
    while len(_POOL) > _POOL_MODELS:
        _POOL.popitem(last=False)
    pool = hit[1]
    pool.extend(mujoco.MjData(m) for _ in range(B - len(pool)))
    return pool[:B]


def native_model(robot: Robot, params: dict, model_updates: dict | None = None) -> mujoco.MjModel:
    """A private copy of the robot's native model with the joints' armature from ``params``
    (parameter sets, as for the rollout; 0 for compliant joints, see
    :func:`~actuatorlab.sim.arm_step.mujoco_armature`) and ``model_updates`` (MjModel field -> array)
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


def _env_models(robot: Robot, m: mujoco.MjModel, p: dict, B: int) -> list[mujoco.MjModel]:
    """One model per environment: ``m`` itself, or with a per-environment armature (B, n) one
    copy of ``m`` per distinct armature row (MuJoCo puts the armature in the mass matrix)."""
    if p["armature"].ndim <= 1:
        return [m] * B
    copies: dict = {}
    models = []
    for b in range(B):
        key = p["armature"][b].tobytes()
        if key not in copies:
            copies[key] = copy.copy(m)
            copies[key].dof_armature[robot.dof_adr] = mujoco_armature(robot.compliant, p["armature"][b])
        models.append(copies[key])
    return models


class _NativeBatch:
    """The native MuJoCo side of a physics step for B environments (pooled MjData): read the
    multibody state of the whole batch (:class:`~.arm_step.Sensed`), then write the actuators'
    effort and integrate. ``body_force`` as in :func:`rollout_native`."""

    def __init__(self, robot: Robot, m: mujoco.MjModel, models: list, s0: ArmState, body_force):
        B, n = len(models), robot.n_joints
        self.models, self.qadr, self.dadr = models, robot.qpos_adr, robot.dof_adr
        self.datas = _pooled(m, B)
        self.ext = None if body_force is None else np.ascontiguousarray(
            np.broadcast_to(np.asarray(body_force[1], float), (B, 3)))
        self.ext_body = None if body_force is None else int(body_force[0])
        self.q_ext, self.zero3 = np.zeros((B, m.nv)), np.zeros(3)
        for mb, d, b in zip(models, self.datas, range(B)):
            mujoco.mj_resetData(mb, d)
            d.qpos[:] = s0.qpos[b]
            d.qvel[:] = s0.qvel[b]
            if self.ext is not None:
                d.xfrc_applied[self.ext_body, :3] = self.ext[b]
        mfield, self.madr = _diag_index(m, self.dadr)
        self.qpos_v, self.qvel_v = [d.qpos for d in self.datas], [d.qvel for d in self.datas]
        self.mm_v, self.app_v = [getattr(d, mfield) for d in self.datas], [d.qfrc_applied for d in self.datas]
        self.bias_v, self.pas_v = [d.qfrc_bias for d in self.datas], [d.qfrc_passive for d in self.datas]
        self.compliant = bool(robot.compliant.any())
        self.unit_rows = np.zeros((n, m.nv))
        self.unit_rows[np.arange(n), self.dadr] = 1.0
        self.minv_cols = np.empty((B, n, m.nv))

    def qpos(self) -> np.ndarray:
        return np.array(self.qpos_v)

    def qvel(self) -> np.ndarray:
        return np.array(self.qvel_v)

    def set_ctrl(self, ctrl_k) -> None:
        for b, d in enumerate(self.datas):
            d.ctrl[:] = ctrl_k[b]

    def sense(self) -> Sensed:
        for mb, d in zip(self.models, self.datas):
            mujoco.mj_step1(mb, d)
        # one copy of each whole array per step, then one gather (cheaper than per-env indexing)
        dadr, n = self.dadr, len(self.dadr)
        q, dq = np.array(self.qpos_v)[:, self.qadr], np.array(self.qvel_v)[:, dadr]
        m_diag = np.array(self.mm_v)[:, self.madr]
        i_load = None
        if self.compliant:  # 1 / (M^-1)[i, i] from MuJoCo's factorisation of M (mj_step1 made it)
            for mb, d, cols in zip(self.models, self.datas, self.minv_cols):
                mujoco.mj_solveM(mb, d, cols, self.unit_rows)
            i_load = 1.0 / self.minv_cols[:, np.arange(n), dadr]
        tau_s = (np.array(self.pas_v) - np.array(self.bias_v))[:, dadr]
        if self.ext is not None:  # the push is a load on the joints too (the friction's stick/slip sees it)
            self.q_ext.fill(0.0)
            for b, (mb, d) in enumerate(zip(self.models, self.datas)):
                mujoco.mj_applyFT(mb, d, self.ext[b], self.zero3, d.xipos[self.ext_body], self.ext_body,
                                  self.q_ext[b])
            tau_s = tau_s + self.q_ext[:, dadr]
        return Sensed(q, dq, m_diag, i_load, tau_s)

    def advance(self, applied) -> None:
        for b, (mb, d) in enumerate(zip(self.models, self.datas)):
            self.app_v[b][self.dadr] = applied[b]
            mujoco.mj_step2(mb, d)


def _batch_inputs(robot: Robot, cfg: ArmConfig, inputs, state, ctrl):
    """(x, s0, telemetry, past, ctrl, batched) with a leading batch axis B, NumPy; checks the shapes."""
    x = ArmInputs(*[np.asarray(v, float) for v in inputs[:3]])
    s0 = ArmState(*[np.asarray(v, float) for v in state])
    batched = x.q_target.ndim == 3
    tele, past = getattr(inputs, "telemetry", None), getattr(inputs, "past", None)
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
    return x, s0, tele, past, ctrl, batched


def _learned_start(learned, x: ArmInputs, s0: ArmState, tele, past, robot: Robot):
    """(telemetry (B, T, k), network history (B, ...)) at the start of a batched native rollout."""
    B, T, _ = x.q_target.shape
    qadr, dadr = robot.qpos_adr, robot.dof_adr
    tele = np.stack([np.asarray(telemetry_or_empty(learned, None if tele is None else tele[b], T))
                     for b in range(B)])
    hist = np.stack([np.asarray(initial_history(
        learned, frame(learned, x.q_target[b, 0], s0.qpos[b, qadr], s0.qvel[b, dadr], x.v_supply[b, 0],
                       x.enable[b, 0], tele[b, 0]), None if past is None else past[b])) for b in range(B)])
    return tele, hist


@dataclass
class _Recorder:
    """Per-control-step records of a batch (B, T, ...): the first physics step's
    :class:`~.arm_step.StepRecord` and the MuJoCo state at the start of the period."""

    rec: dict
    qpos: np.ndarray
    qvel: np.ndarray

    @classmethod
    def empty(cls, B: int, T: int, robot: Robot) -> "_Recorder":
        n = robot.n_joints
        return cls({k: np.empty((B, T, n)) for k in StepRecord._fields}, np.empty((B, T, robot.nq)),
                   np.empty((B, T, robot.nv)))

    def outputs(self) -> ArmOutputs:
        return arm_outputs(StepRecord(**self.rec), self.qpos, self.qvel)


@physics
def rollout_native(robot: Robot, params, inputs: ArmInputs | LearnedInputs, state: ArmState,
                   cfg: ArmConfig | None = None, model_updates: dict | None = None,
                   model: mujoco.MjModel | None = None, *, ctrl=None,
                   body_force: tuple[int, np.ndarray] | None = None):
    """Native MuJoCo rollout; arrays as in the MJX path, optionally with a leading batch axis B
    on ``inputs`` and ``state``. Returns NumPy arrays (ArmState, ArmOutputs) (a learned model's
    heads: the MJX backend's ``with_heads``).

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
    x, s0, tele, past, ctrl, batched = _batch_inputs(robot, cfg, inputs, state, ctrl)
    B, T, n = x.q_target.shape
    base = params.base if isinstance(params, LearnedArm) else params
    p = {k: np.asarray(v) for k, v in robot.joint_params(base).items()}
    if any(v.ndim > 1 and v.shape[0] != B for v in p.values()):
        raise ModelError(f"per-environment parameters must have shape ({B}, n_groups)")
    if model is None:
        shared = {k: (v[0] if v.ndim > 1 else v) for k, v in base.items()} if p["armature"].ndim > 1 else base
        model = native_model(robot, shared, model_updates)
    a = actuators(robot, cfg, p, np)
    learned = check_learned(robot, a.lay, params)
    sim = _NativeBatch(robot, model, _env_models(robot, model, p, B), s0, body_force)
    qadr, dadr = robot.qpos_adr, robot.dof_adr
    st = ActuatorState(*[v.copy() for v in (s0.q_prev, s0.q_prev2, s0.u, s0.target_filt, s0.qm, s0.dqm,
                                            s0.temperature)])
    t_prev, hist_t, hist_e = s0.target_prev.copy(), s0.hist_target.copy(), s0.hist_enable.copy()
    dsteps = p["delay"] / cfg.control_dt
    rec, tau_net = _Recorder.empty(B, T, robot), None
    if learned is not None:
        tele, hist_n = _learned_start(learned, x, s0, tele, past, robot)
    for k in range(T):
        if learned is not None:  # the network's effort for the whole batch, held over the step
            tau_net, _, hist_n = step_fn_batched(learned, hist_n, x.q_target[:, k], sim.qpos()[:, qadr],
                                                  sim.qvel()[:, dadr], x.v_supply[:, k], x.enable[:, k], tele[:, k])
            tau_net = np.asarray(tau_net, float)
        hist_t, hist_e, tgt, en = command_step(np, hist_t, hist_e, x.q_target[:, k], x.enable[:, k], dsteps)
        cmd = Command(tgt, t_prev, en, x.v_supply[:, k])
        if ctrl is not None:
            sim.set_ctrl(ctrl[:, k])
        rec.qpos[:, k], rec.qvel[:, k] = sim.qpos(), sim.qvel()
        for s in range(cfg.substeps):
            st, applied, r = actuator_step(a, st, sim.sense(), cmd, s, s % cfg.law_every == 0, learned, tau_net)
            sim.advance(applied)
            if s == 0:
                for key, v in zip(r._fields, r):
                    rec.rec[key][:, k] = v
        t_prev = tgt

    qpos_f, qvel_f = sim.qpos(), sim.qvel()
    qm, dqm = motor_side(a.lay, np, qpos_f[:, qadr], qvel_f[:, dadr], st.qm, st.dqm)
    final = ArmState(qpos_f, qvel_f, st.q_prev, st.q_prev2, st.u, t_prev, st.filt, hist_t, hist_e, qm, dqm,
                     st.temperature)
    out = rec.outputs()
    if not batched:
        final = ArmState(*[v[0] for v in final])
        out = ArmOutputs(*[v[0] for v in out])
    return final, out
