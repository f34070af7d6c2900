"""Whole-robot rollouts in MJX: the differentiable backend.

:func:`make_mjx_rollout` runs the common physics step (:mod:`actuatorlab.sim.arm_step`, whose
docstring holds the timing and the torque law) with ``jax.numpy`` on MJX's multibody dynamics,
inside ``jax.lax.scan``: jit-, vmap- and grad-able with respect to actuator parameters, per-step
inputs and MJX model fields (link masses, ...). Per physics step: ``fwd_position`` and
``fwd_velocity`` (positions, velocities, mass matrix, bias forces; :class:`~.arm_step.Sensed`),
the actuator step, then ``qfrc_applied``, ``fwd_actuation``, ``fwd_acceleration``, the constraint
solve (when the model has constraint rows) and the Euler or implicit integration. On MJX's Warp
implementation (an ``mx`` from :func:`put_mjx_model` with ``impl="warp"``: MuJoCo Warp, forward only,
no gradients) the same step runs as ``mjx.forward`` then ``mjx.step`` (:class:`_WarpPhysics`).

The native MuJoCo backend (:func:`actuatorlab.sim.arm_native.rollout_native`, fastest, no
gradients) runs the same step with ``numpy``; :func:`actuatorlab.sim.backends.rollout` picks
either. This module also holds the rollouts' inputs and start state (:func:`make_inputs`,
:func:`initial_state`) and the tracking loss (:func:`position_loss`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable, Protocol, cast

import jax
import jax.numpy as jnp
import mujoco
import numpy as np

from ..precision import physics, physics_fn
from ..errors import ModelError
from ..robots.loader import Robot
from . import mjx_module
from .arm_learned import frame, initial_history, net_step, telemetry_or_empty
from .arm_step import (ActuatorState, ArmConfig as ArmConfig, ArmInputs as ArmInputs, ArmOutputs as ArmOutputs,
                       ArmState as ArmState, Command, Sensed, actuator_step, actuators, arm_outputs, check_learned,
                       command_step, motor_side, mujoco_armature as mujoco_armature)

__all__ = ["ArmConfig", "ArmInputs", "ArmState", "ArmOutputs", "make_inputs", "initial_state",
           "make_mjx_rollout", "mjx_model", "mujoco_armature", "position_loss", "IMPLS", "put_mjx_model",
           "make_mjx_data", "mjx_impl", "WARP_WORLDS"]


def make_inputs(robot: Robot, q_target, enable=1.0, v_supply=None) -> ArmInputs:
    """ArmInputs (T, n) from targets (T, n); enable and v_supply broadcast (default: each joint's
    configured supply voltage)."""
    qt = np.asarray(q_target, dtype=float)
    if qt.ndim < 2 or qt.shape[-1] != robot.n_joints:
        raise ModelError(f"q_target must have shape (T, {robot.n_joints}) for {robot.name}, got {qt.shape}")
    vs = np.array([j.supply_voltage for j in robot.joints]) if v_supply is None else v_supply
    return ArmInputs(qt, np.broadcast_to(np.asarray(enable, float), qt.shape).copy(),
                     np.broadcast_to(np.asarray(vs, float), qt.shape).copy())


def joint_equalities(m: mujoco.MjModel) -> list[int]:
    """Ids of the model's two-joint joint equalities (follower eq_obj1id, leader eq_obj2id), ordered so
    that a leader that itself follows another joint is set first: one pass in this order resolves a
    chain (a mimic finger that follows a jaw that follows a crank)."""
    eqs = [e for e in range(m.neq) if m.eq_type[e] == mujoco.mjtEq.mjEQ_JOINT and m.eq_obj2id[e] >= 0]
    lead_of = {int(m.eq_obj1id[e]): int(m.eq_obj2id[e]) for e in eqs}

    def depth(j: int) -> int:   # links between j and a joint that follows none (bounded: cycles end)
        d = 0
        while j in lead_of and d <= len(eqs):
            j, d = lead_of[j], d + 1
        return d

    return sorted(eqs, key=lambda e: depth(int(m.eq_obj2id[e])))


def _follow_equalities(m: mujoco.MjModel, qpos: np.ndarray, qvel: np.ndarray, skip: set[int]) -> None:
    """Joint equalities (x - x0 = c0 + c1 y + c2 y^2 + ..., y = q2 - q2_0): set each follower
    joint (not in ``skip``) from its leader, in place, leaders first (:func:`joint_equalities`)."""
    for e in joint_equalities(m):
        j1, j2 = int(m.eq_obj1id[e]), int(m.eq_obj2id[e])
        q1, q2 = m.jnt_qposadr[j1], m.jnt_qposadr[j2]
        if q1 in skip:
            continue
        c = m.eq_data[e][:5]
        y = qpos[q2] - m.qpos0[q2]
        qpos[q1] = m.qpos0[q1] + c[0] + c[1] * y + c[2] * y**2 + c[3] * y**3 + c[4] * y**4
        qvel[m.jnt_dofadr[j1]] = (c[1] + 2 * c[2] * y + 3 * c[3] * y**2 + 4 * c[4] * y**3) * qvel[m.jnt_dofadr[j2]]


def initial_state(robot: Robot, cfg: ArmConfig | None = None, *, q=None, dq=None, qpos=None, hist_target=None,
                  hist_enable=None, temperature=None, params=None) -> ArmState:
    """A rollout start (NumPy arrays).

    The MuJoCo state is ``qpos`` (default: the model's qpos0) at rest with the modelled joints set
    to ``q``/``dq`` [rad | m] (n,) when given, and joints that follow another through a joint
    equality (a mimic finger) set from their leader. The firmware memory is reconstructed from the
    velocity (q_prev = q - dq firmware_dt, as the one-joint replay does); the delay line holds
    ``hist_target``/``hist_enable`` (D, n) newest first, or q (a servo holding its position) and
    enable = 1. The motor side of the transmissions starts at the joint's own position and velocity
    (a compliant joint in the middle of its dead band, spring relaxed); the rollouts ignore it for
    rigid joints. The
    winding temperature is ``temperature`` [degC] (n,) when given, else each joint's
    ``ambient_temperature`` from ``params`` (parameter sets, as for the rollout; default the
    robot's nominal ones); it only moves on ``+thermal`` joints.
    """
    cfg = cfg or ArmConfig.from_robot(robot)
    m = robot.model()
    qp = np.array(m.qpos0 if qpos is None else qpos, dtype=float)
    qv = np.zeros(m.nv)
    qadr, dadr = robot.qpos_adr, robot.dof_adr
    if q is not None:
        qp[qadr] = np.asarray(q, float)
    if dq is not None:
        qv[dadr] = np.asarray(dq, float)
    _follow_equalities(m, qp, qv, set(int(a) for a in qadr))
    qj, dqj = qp[qadr], qv[dadr]
    D, n = cfg.delay_steps, robot.n_joints
    if hist_target is None:
        hist_target = np.tile(qj, (D, 1))
    if hist_enable is None:
        hist_enable = np.ones((D, n))
    hist_target, hist_enable = np.asarray(hist_target, float), np.asarray(hist_enable, float)
    if hist_target.shape != (D, n) or hist_enable.shape != (D, n):
        raise ModelError(f"delay line must have shape ({D}, {n}), got {hist_target.shape} / {hist_enable.shape}")
    h = cfg.firmware_dt
    qm, dqm = qj.copy(), dqj.copy()
    if temperature is None:
        amb = {"ambient_temperature": (params or robot.nominal_params())["ambient_temperature"]}
        temperature = robot.joint_params(amb)["ambient_temperature"]
    temperature = np.broadcast_to(np.asarray(temperature, float), (n,)).copy()
    return ArmState(qp, qv, qj - dqj * h, qj - 2.0 * dqj * h, np.zeros(n), hist_target[0].copy(),
                    hist_target[0].copy(), hist_target, hist_enable, qm, dqm, temperature)


@physics
def position_loss(out: ArmOutputs, q_meas, mask=None):
    """Mean squared joint-position error [rad^2 | m^2] between a rollout and measurements (T, n);
    ``mask`` (T,) or (T, n) excludes padding."""
    err = (out.q - q_meas) ** 2
    if mask is None:
        return jnp.mean(err)
    w = jnp.broadcast_to(jnp.asarray(mask, err.dtype).reshape(mask.shape + (1,) * (err.ndim - mask.ndim)), err.shape)
    return jnp.sum(err * w) / jnp.maximum(jnp.sum(w), 1.0)


# ---------------------------------------------------------------------------------------------


# ---------------------------------------------------------------------------------------------
def load_inertia(M, dadr):
    """Output-side inertia of each joint (n,) [kg.m^2 | kg]: 1 / (M^-1)[i, i], the inertia a joint
    presents to an effort applied on it alone with every other dof free (<= M[i, i]; equal for a
    joint that is dynamically decoupled from the others). ``M`` (nv, nv) the mass matrix (JAX)."""
    return 1.0 / _inv_diag_spd(M)[dadr]


def _inv_diag_spd(M):
    """diag(M^-1) (nv,) of a symmetric positive definite ``M`` (nv, nv) in plain JAX ops: Cholesky
    M = L L^T and X = L^-1, both unrolled over the (static) size, diag(M^-1)_k = sum_i X[i, k]^2.
    Not ``jnp.linalg.solve``: its batched LAPACK call inside a vmapped, scanned environment step
    hung XLA's CPU runtime on the first execution in 4 of 6 runs at 256 environments (the ANYmal
    series-elastic env, bench/locomotion.py); this form ran 3 of 3 at the same speed."""
    n = M.shape[-1]
    L = jnp.zeros_like(M)
    for j in range(n):
        ljj = jnp.sqrt(M[j, j] - jnp.sum(L[j, :j] ** 2))
        L = L.at[j, j].set(ljj)
        if j + 1 < n:
            L = L.at[j + 1:, j].set((M[j + 1:, j] - L[j + 1:, :j] @ L[j, :j]) / ljj)
    X = jnp.zeros_like(M)
    eye = jnp.eye(n, dtype=M.dtype)
    for i in range(n):
        X = X.at[i].set((eye[i] - L[i, :i] @ X[:i, :]) / L[i, i])
    return jnp.sum(X ** 2, axis=0)


@physics
def mjx_model(robot: Robot):
    """The robot's MJX model (``mujoco.mjx.put_model`` of ``robot.model(for_mjx=True)``)."""
    return mjx_module.mjx().put_model(robot.model(for_mjx=True))


@dataclass(frozen=True, eq=False)
class _MjxPhysics:
    """The MJX side of a physics step: read the multibody state (:class:`~.arm_step.Sensed`), then
    apply the actuators' effort and integrate. ``has_efc``: the model has constraint rows (as
    ``mjx.forward`` decides); ``integrate``: ``mjx.euler`` or ``mjx.implicit``; ``mjx`` the module."""

    mjx: Any
    qadr: Any
    dadr: Any
    dadr_np: np.ndarray
    compliant: bool
    has_efc: bool
    integrate: Callable

    def sense(self, mxp, d):
        mjx = self.mjx
        d = mjx.fwd_position(mxp, d)
        d = mjx.fwd_velocity(mxp, d)
        M = mjx.full_m(mxp, d)
        i_load = load_inertia(M, self.dadr_np) if self.compliant else None
        return d, Sensed(d.qpos[self.qadr], d.qvel[self.dadr], jnp.diag(M)[self.dadr], i_load,
                         (d.qfrc_passive - d.qfrc_bias)[self.dadr])

    def advance(self, mxp, d, applied):
        mjx = self.mjx
        d = d.replace(qfrc_applied=jnp.zeros_like(d.qfrc_applied).at[self.dadr].set(applied))
        d = mjx.fwd_actuation(mxp, d)
        d = mjx.fwd_acceleration(mxp, d)
        d = mjx.solve(mxp, d) if self.has_efc else d.replace(qacc=d.qacc_smooth)
        return self.integrate(mxp, d)


@dataclass(frozen=True, eq=False)
class _WarpPhysics:
    """The same two calls on MJX's Warp implementation (MuJoCo Warp, ``impl="warp"``), which exposes
    whole passes only: ``sense`` runs ``mjx.forward`` (positions, velocities, mass matrix and bias
    forces at the step's start), ``advance`` runs ``mjx.step`` with the actuators' effort in
    ``qfrc_applied`` (forward again, then the model's integrator): one more forward pass per physics
    step than the JAX implementation, the same state. Warp keeps the mass matrix as MuJoCo's sparse
    lower triangle (``d.M``, rows ``M_rownnz``/``M_rowadr``, columns ``M_colind``): ``rows``, ``cols``
    scatter it into the dense M, ``diag`` indexes its diagonal."""

    mjx: Any
    qadr: Any
    dadr: Any
    dadr_np: np.ndarray
    compliant: bool
    rows: np.ndarray
    cols: np.ndarray
    diag: np.ndarray

    def sense(self, mxp, d):
        d = self.mjx.forward(mxp, d)
        Mv = d._impl.M
        i_load = None
        if self.compliant:
            nv = d.qvel.shape[-1]
            M = jnp.zeros((nv, nv), Mv.dtype).at[self.rows, self.cols].set(Mv).at[self.cols, self.rows].set(Mv)
            i_load = load_inertia(M, self.dadr_np)
        return d, Sensed(d.qpos[self.qadr], d.qvel[self.dadr], Mv[self.diag][self.dadr], i_load,
                         (d.qfrc_passive - d.qfrc_bias)[self.dadr])

    def advance(self, mxp, d, applied):
        d = d.replace(qfrc_applied=jnp.zeros_like(d.qfrc_applied).at[self.dadr].set(applied))
        return self.mjx.step(mxp, d)


def _mjx_physics(robot: Robot, m: mujoco.MjModel, template, mjx, impl: str = "jax") -> _MjxPhysics | _WarpPhysics:
    qadr, dadr = jnp.asarray(robot.qpos_adr), jnp.asarray(robot.dof_adr)
    compliant = bool(robot.compliant.any())
    if impl == "warp":
        rows = np.repeat(np.arange(m.nv), m.M_rownnz)
        return _WarpPhysics(mjx, qadr, dadr, robot.dof_adr, compliant, rows, np.asarray(m.M_colind),
                            np.asarray(m.M_rowadr + m.M_rownnz - 1))
    has_efc = getattr(template._impl, "efc_J", np.zeros(0)).size > 0  # as mjx.forward decides
    integrate = mjx.euler if m.opt.integrator == mujoco.mjtIntegrator.mjINT_EULER else mjx.implicit
    return _MjxPhysics(mjx, qadr, dadr, robot.dof_adr, compliant, has_efc, integrate)


def mjx_impl(mx) -> str:
    """The implementation of an MJX model: "jax" or "warp" (MuJoCo Warp through MJX)."""
    return str(getattr(getattr(mx, "impl", None), "value", "jax")).lower()


def put_mjx_model(m: mujoco.MjModel, impl: str = "jax"):
    """``mjx.put_model(m, impl=impl)``; "warp" needs MuJoCo Warp (the ``warp-lang`` package, the
    ``actuatorlab[warp]`` extra), else a :class:`~actuatorlab.errors.ModelError` that says so. Under
    Warp the notices of a spent solver or line-search iteration budget are switched off: the budget is
    the model's choice (:meth:`Robot.model` for MJX: 1 and 4, for the gradients), which the JAX
    implementation spends silently and Warp would report on every step; every other overflow notice
    (contacts, constraint rows) stays on."""
    if impl not in IMPLS:
        raise ModelError(f"MJX implementation {impl!r} unknown; known: {', '.join(IMPLS)}")
    mjx = mjx_module.mjx()
    if impl == "jax":
        return mjx.put_model(m)
    warp = mjx_module.mjx_warp()
    if warp is None:
        raise ModelError("impl 'warp' needs MuJoCo Warp: install the warp-lang package (pip install "
                         "'actuatorlab[warp]')")
    OverflowType = warp.mjwp_types.OverflowType
    mx = mjx.put_model(m, impl="warp")
    opt = mx.opt._impl
    quiet = int(opt.warn_overflow) & ~int(OverflowType.ITERATIONS | OverflowType.LS_ITERATIONS)
    return mx.replace(opt=mx.opt.replace(_impl=opt.replace(warn_overflow=quiet)))


#: MJX implementations a rollout runs on (:func:`put_mjx_model`)
IMPLS = ("jax", "warp")
#: environments a Warp template's contact buffer is sized for by default (:func:`make_mjx_data`)
WARP_WORLDS = 1024


def make_mjx_data(m: mujoco.MjModel, mx, worlds: int = WARP_WORLDS):
    """An MJX ``Data`` template for ``mx`` (the JAX implementation makes it from ``mx``, Warp from ``m``).
    Warp keeps one contact buffer for every world of a batched call (``naconmax``): it is sized for
    ``worlds`` environments of MuJoCo Warp's default contacts per world; a larger batch overflows it
    (Warp drops the contacts beyond it and prints a broadphase notice)."""
    mjx = mjx_module.mjx()
    if mjx_impl(mx) != "warp":
        return mjx.make_data(mx)
    one = mjx.make_data(m, impl="warp")
    return mjx.make_data(m, impl="warp", naconmax=int(one._impl.naconmax) * int(worlds)) if worlds > 1 else one


def _learned_start(learned, inputs, x_arm: ArmInputs, d0, phys: _MjxPhysics | _WarpPhysics):
    """(telemetry (T, k), network history) at the start of a rollout; empty without a network."""
    T = x_arm.q_target.shape[0]
    if learned is None:
        return jnp.zeros((T, 0)), jnp.zeros((0,))
    tele = telemetry_or_empty(learned, getattr(inputs, "telemetry", None), T)
    f0 = frame(learned, x_arm.q_target[0], d0.qpos[phys.qadr], d0.qvel[phys.dadr], x_arm.v_supply[0],
               x_arm.enable[0], tele[0])
    return tele, initial_history(learned, f0, getattr(inputs, "past", None))


class MJXRollout(Protocol):
    """What :func:`make_mjx_rollout` returns: ``rollout(...) -> (ArmState, ArmOutputs)`` carrying
    ``rollout.with_heads(...) -> (ArmState, ArmOutputs, heads)``."""

    with_heads: Callable[..., tuple[ArmState, ArmOutputs, Any]]

    def __call__(self, params, inputs, state: ArmState, model_updates=None,
                 ctrl=None) -> tuple[ArmState, ArmOutputs]: ...


@physics_fn
def make_mjx_rollout(robot: Robot, cfg: ArmConfig | None = None, mx=None, worlds: int = WARP_WORLDS) -> MJXRollout:
    """Build ``rollout(params, inputs, state, model_updates=None) -> (ArmState, ArmOutputs)``.

    params: parameter sets, name -> (n_groups,) servo-side values (``robot.nominal_params()``),
    or a learned / residual model (:class:`~actuatorlab.sim.arm_learned.LearnedArm`, whose
    network then gives the channels' effort, see :mod:`actuatorlab.sim.arm_learned`; its inputs
    are :class:`~actuatorlab.sim.arm_learned.LearnedInputs` when it reads telemetry);
    ``rollout.with_heads`` returns (state, outputs, heads) with the network's heads (T, ...);
    inputs: :class:`ArmInputs` (T, n); state: :class:`ArmState`; model_updates: MJX ``Model``
    fields to replace (name -> full array, e.g. ``{"body_mass": m}``), traced like the rest;
    ctrl: None or (T, nu) MuJoCo ``ctrl`` held over each control step, for the model's own
    actuators (a mixed robot's built-in joints, :func:`~actuatorlab.envs.actuators.mixed_robot`).
    ``mx``: the MJX model (default ``mjx.put_model`` of the robot's); one put with ``impl="warp"``
    (:func:`put_mjx_model`) runs the rollout on MuJoCo Warp (forward only: not differentiable), its
    contact buffer sized for ``worlds`` rollouts batched in one call (:func:`make_mjx_data`).

    The function is pure and not jitted: compose ``jax.jit``, ``jax.vmap`` (batch: ``in_axes=(None,
    0, 0)``) and ``jax.grad`` as needed. Differentiating through a model with constraint rows
    (equalities, joint limits, contacts) needs solver iterations = 1 and ls_iterations = 4, which
    :meth:`Robot.model` sets for MJX.
    """
    mjx = mjx_module.mjx()
    cfg = cfg or ArmConfig.from_robot(robot)
    m = robot.model(for_mjx=True)
    mx = mjx.put_model(m) if mx is None else mx
    template = make_mjx_data(m, mx, worlds)
    phys = _mjx_physics(robot, m, template, mjx, mjx_impl(mx))
    act0 = actuators(robot, cfg, None, jnp)

    def run(params, inputs, state: ArmState, model_updates=None, ctrl=None):
        learned = check_learned(robot, act0.lay, params)
        p = robot.joint_params(params if learned is None else learned.base, xp=jnp)
        arm = mujoco_armature(act0.lay.compliant, p["armature"], jnp)
        mxp = mx.replace(dof_armature=mx.dof_armature.at[phys.dadr].set(arm))
        mxp = mxp.replace(**model_updates) if model_updates else mxp
        a = dataclasses.replace(act0, p=p)
        d0 = template.replace(qpos=jnp.asarray(state.qpos), qvel=jnp.asarray(state.qvel))
        dsteps = p["delay"] / cfg.control_dt
        x_arm = ArmInputs(*[jnp.asarray(v) for v in inputs[:3]])
        tele, hist0 = _learned_start(learned, inputs, x_arm, d0, phys)
        ctrl_seq = jnp.zeros((x_arm.q_target.shape[0], 0)) if ctrl is None else jnp.asarray(ctrl)

        def control_step(carry, xs):
            d, c, hist = carry
            x, tel, ctrl_k = xs
            if ctrl is not None:  # the model's own actuators, held over the control step
                d = d.replace(ctrl=ctrl_k.astype(d.ctrl.dtype))
            hist_t, hist_e, tgt, en = command_step(jnp, c.hist_target, c.hist_enable, x.q_target, x.enable, dsteps)
            tau_net, heads = None, None
            if learned is not None:  # the network's effort, held over the control step
                tau_net, heads, hist = net_step(learned, hist, x.q_target, d.qpos[phys.qadr], d.qvel[phys.dadr],
                                                x.v_supply, x.enable, tel, d.qpos.dtype)
            cmd = Command(tgt, c.target_prev, en, x.v_supply)

            def substep(carry2, s):
                d, st = carry2
                d, sensed = phys.sense(mxp, d)
                st, applied, rec = actuator_step(a, st, sensed, cmd, s, (s % cfg.law_every) == 0, learned, tau_net)
                return (phys.advance(mxp, d, applied), st), rec

            st0 = ActuatorState(c.q_prev, c.q_prev2, c.u, c.target_filt, c.qm, c.dqm, c.temperature)
            start = (d.qpos, d.qvel)
            (d, st), rec = jax.lax.scan(substep, (d, st0), jnp.arange(cfg.substeps))
            out = arm_outputs(type(rec)(*[r[0] for r in rec]), *start)
            c = ArmState(None, None, st.q_prev, st.q_prev2, st.u, tgt, st.filt, hist_t, hist_e, st.qm, st.dqm,
                         st.temperature)
            return (d, c, hist), (out, heads)

        c0 = ArmState(None, None, *[jnp.asarray(v) for v in state[2:]])
        (d, c, _), (out, heads) = jax.lax.scan(control_step, (d0, c0, hist0), (x_arm, tele, ctrl_seq))
        qm, dqm = motor_side(a.lay, jnp, d.qpos[phys.qadr], d.qvel[phys.dadr], c.qm, c.dqm)
        return c._replace(qpos=d.qpos, qvel=d.qvel, qm=qm, dqm=dqm), out, heads

    def rollout(params, inputs, state: ArmState, model_updates=None, ctrl=None):
        final, out, _ = run(params, inputs, state, model_updates, ctrl)
        return final, out

    def with_heads(params, inputs, state: ArmState, model_updates=None, ctrl=None):
        """(state, outputs, heads): heads (T, ...) of a learned model's network per control step
        (None for analytic parameters)."""
        return run(params, inputs, state, model_updates, ctrl)

    mjx_rollout = cast(MJXRollout, rollout)  # a function carrying with_heads as an attribute
    mjx_rollout.with_heads = with_heads
    return mjx_rollout
