"""The one environment core: ``reset(key) -> state`` and ``step(state, action) -> (state, obs,
reward, terminated, truncated, info)`` over an explicit :class:`EnvSpec` (robot, actuator, task,
timing contract, envelope, randomization hooks, physics backend), written once over an array
namespace ``xp``.

The spec's ``backend`` picks the physics (:mod:`actuatorlab.envs.backends`): ``"mjx"`` runs
:func:`actuatorlab.sim.arm.make_mjx_rollout` on one environment (pure JAX: jit, vmap, scan; batch
with ``jax.vmap`` outside); ``"native"`` runs :func:`actuatorlab.sim.arm_native.rollout_native` on
NumPy arrays with a leading batch axis (B environments per call, float64). Everything else (the
timing contract's action scaling, command grid and latency FIFOs, the observation FIFO, the task's
observation, reward and termination, the envelope counters, the randomization hooks) is written
here once; :class:`~actuatorlab.envs.mjx_env.MjxEnv` and the Gymnasium classes of
:mod:`actuatorlab.envs.gym_env` are thin wrappers over it.

Per policy step with action a (..., n) [1] (docs/envs.md)::

    target = scale_action(a) [clipped to the envelope's position range with envelope_mode="clip"]
    sent   = apply_latency(command_grid(target))                  (decimation, n) command ticks
    arm, q, dq, effort, qpos_end, qvel_end = physics(step_params(state), arm, sent)
    ticks += sum over command ticks of outside(envelope, q, dq, effort)      (5, n) int
    obs    = step_noise(task.observe(observation FIFO entry 0, task data, a))
    reward, metrics = task.reward(true state, a, previous a); terminated = task.done(true state)
    truncated = steps >= episode_length

Hook points for domain randomization (``randomization``, an object with):
``sample_episode(key, params) -> params`` applied at reset to the actuator parameter sets (name ->
(n_groups,), servo side; a learned model's ``base``), stored per episode in ``state.params``;
``step_noise(key, obs) -> obs`` applied to every observation; when the object has drift
(``has_drift`` true), ``drift(key, params, t) -> params`` with ``key`` the episode's randomization
key (``state.ctl.rand_key``), ``params`` the episode's parameters (never changed within the
episode) and ``t = step x policy_dt`` [s] the episode time at the start of the policy step: the
physics of that step runs with the drifted parameters (:meth:`EnvCore.step_params`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

import jax
import mujoco
import numpy as np

from ..errors import ModelError
from ..sim.arm import IMPLS, WARP_WORLDS, ArmConfig, ArmState
from ..sim.arm_learned import frame
from .actuators import Actuator, builtin_ctrl_index, builtin_model, home_qpos, load_actuator
from .backends import make_backend
from .envelope import DIMS, effort_limit, envelope_bounds, outside
from .tasks import PostureTask
from .timing import TimingContract, apply_latency, command_grid, push_samples, scale_action

__all__ = ["EnvSpec", "EnvCore", "EnvState", "ControlState"]


@dataclass(frozen=True)
class EnvSpec:
    """Everything that defines an environment.

    robot: name or :class:`~actuatorlab.robots.Robot`, or None: the robot the model file names (a
    one-joint model.json: its bench robot), else ``DEFAULT_ROBOT``; model: the actuator
    (:func:`~actuatorlab.envs.actuators.load_actuator`: None the config's nominal model,
    "builtin" MuJoCo's actuators, a fitted model file, analytic or learned); task:
    :class:`~actuatorlab.envs.tasks.PostureTask` by default (protocol in that module); contract:
    :class:`~actuatorlab.envs.timing.TimingContract`; randomization: hook object (module
    docstring) or None; envelope: the fitted model's envelope dict or {joint: dict} (None: the
    model file's; False: none), counted per joint and episode; envelope_mode: "count" | "clip"
    (also clip the policy target to the envelope's position range) | "warn" (native: one
    RuntimeWarning per episode and joint); episode_length [policy steps]; reset_noise [rad | m]
    uniform noise on the joints' start; home (n,) [rad | m] the joints' reset posture (default the
    MJCF's home / standing keyframe, else qpos0); builtin_joints: joints that keep MuJoCo's
    built-in actuator while the others run ``model`` (a mixed robot); backend: "mjx" | "native";
    precision: "float32" | "float64" (mjx; native is float64); model_updates: MjModel field ->
    array written into the native model (native only, e.g. a payload's ``body_mass``); impl: MJX's
    implementation of the multibody physics, "jax" (default, differentiable) or "warp" (MuJoCo Warp
    through MJX, forward only; the ``warp-lang`` package, :func:`~actuatorlab.sim.arm.put_mjx_model`);
    worlds: Warp only, the most environments one batched call steps (Warp's contact buffer is shared by
    them, :func:`~actuatorlab.sim.arm.make_mjx_data`; default 1024).
    """

    robot: Any = None
    model: Any = None
    task: Any = None
    contract: TimingContract | None = None
    randomization: Any = None
    envelope: Any = None
    envelope_mode: str = "count"
    episode_length: int = 500
    reset_noise: float = 0.0
    home: Any = None
    builtin_joints: Any = None
    backend: str = "mjx"
    precision: str = "float32"
    model_updates: dict | None = None
    impl: str = "jax"
    worlds: int = WARP_WORLDS

    def __post_init__(self):
        if self.backend not in ("mjx", "native"):
            raise ModelError(f"EnvSpec: backend must be mjx or native, got {self.backend!r}")
        if self.impl not in IMPLS or (self.impl != "jax" and (self.backend, self.precision) != ("mjx", "float32")):
            raise ModelError(f"EnvSpec: impl must be one of {', '.join(IMPLS)} (other than jax only with the mjx "
                             f"backend in float32), got {self.impl!r} with backend {self.backend!r} in {self.precision}")
        if int(self.worlds) != self.worlds or self.worlds < 1:
            raise ModelError(f"EnvSpec: worlds must be a whole number >= 1, got {self.worlds!r}")
        if self.precision not in ("float32", "float64"):
            raise ModelError(f"precision must be float32 or float64, got {self.precision!r}")
        modes = ("count", "clip", "warn") if self.backend == "native" else ("count", "clip")
        if self.envelope_mode not in modes:
            raise ModelError(f"envelope_mode must be {' or '.join(modes)}, got {self.envelope_mode!r}")


class ControlState(NamedTuple):
    """Policy-side state: step [1] policy steps since reset; rng: key; prev_target, filt (n,)
    [rad | m] last policy target and command filter; fifo (command_latency, n) commands in
    flight; obs_qpos (obs_latency + 1, nq), obs_qvel (obs_latency + 1, nv) observation FIFO (entry
    0 observed); last_action (n,); outside_ticks (5, n) int: command ticks outside the envelope
    per dimension (:data:`~actuatorlab.envs.envelope.DIMS`, then any); net_hist (H, F): a learned
    model's past frames ((0, 0) otherwise); rand_key: the episode's randomization key (the key
    given to ``sample_episode``; drift reads it every step). Native: a leading batch axis (B,)."""

    step: Any
    rng: Any
    prev_target: Any
    filt: Any
    fifo: Any
    obs_qpos: Any
    obs_qvel: Any
    last_action: Any
    outside_ticks: Any
    net_hist: Any
    rand_key: Any


class EnvState(NamedTuple):
    """arm: :class:`~actuatorlab.sim.arm.ArmState` (MuJoCo + actuator state); params: this
    episode's actuator parameter sets; ctl: :class:`ControlState`; task: the task's episode data;
    obs (obs_size,); reward, done (); metrics {name: ()}; info {"truncation": (),
    "envelope_outside_s": (5, n) [s] per dimension this episode}."""

    arm: ArmState
    params: Any
    ctl: ControlState
    task: Any
    obs: Any
    reward: Any
    done: Any
    metrics: dict
    info: dict


class EnvCore:
    """The environment of an :class:`EnvSpec` (module docstring): the static description both
    backends read (joint addresses, ranges, home, offsets, limits, envelope bounds) and the
    functional ``reset`` / ``step``."""

    def __init__(self, spec: EnvSpec):
        self.spec = spec
        act = load_actuator(spec.robot, spec.model, spec.builtin_joints)
        self.actuator: Actuator = act
        self.robot = r = act.robot
        self.model_robot = mr = act.rollout_robot  # the joints the actuatorlab rollout steps
        self.mixed = bool(act.builtin) and act.kind != "builtin"
        self.contract = spec.contract or TimingContract()
        self.task = spec.task or PostureTask()
        self.randomization = spec.randomization
        self.episode_length = int(spec.episode_length)
        self.reset_noise = float(spec.reset_noise)
        self.envelope_mode = "count" if spec.envelope_mode == "warn" else spec.envelope_mode
        # None: the model file's envelope (arm_model.json "envelope"); False: no envelope counted
        env = spec.envelope
        self.envelope = None if env is False else (env if env is not None else act.envelope)
        self.bounds = envelope_bounds(r, self.envelope)
        self.cfg = ArmConfig.from_robot(mr, **({"target": self.contract.servo_target}
                                              if self.contract.servo_target else {}))
        self.command_dt = self.cfg.control_dt
        self.policy_dt = self.contract.decimation * self.command_dt
        self.n_joints = r.n_joints
        self.qadr, self.dadr = r.qpos_adr, r.dof_adr
        self.mod_idx = np.array([r.index(j) for j in mr.joint_names], dtype=np.int64)
        self.bi_idx = np.array([r.index(j) for j in act.builtin], dtype=np.int64) if self.mixed else None
        m = mr.model()
        self.mj_model = builtin_model(r) if act.kind == "builtin" else m
        self._eq = _joint_equalities(self.mj_model)
        self.home = home_qpos(self.mj_model)
        if spec.home is not None:  # a reset posture of the modelled joints (n,) [rad | m]
            self.home[self.qadr] = np.broadcast_to(np.asarray(spec.home, float), (r.n_joints,))
            self.home, _ = self.follow(np, self.home, np.zeros(self.mj_model.nv))
        jr = m.jnt_range[[m.dof_jntid[a] for a in self.dadr]]
        lim = np.array([bool(m.jnt_limited[m.dof_jntid[a]]) for a in self.dadr])
        self.lo = np.where(lim, jr[:, 0], -np.inf)
        self.hi = np.where(lim, jr[:, 1], np.inf)
        self.free_base = bool(m.njnt and m.jnt_type[0] == mujoco.mjtJoint.mjJNT_FREE)
        self.offset = self.home[self.qadr] if self.contract.action_offset == "home" else np.zeros(r.n_joints)
        self.v_supply = np.array([j.supply_voltage for j in r.joints])
        self.u_lim = effort_limit(r, r.law_constants())
        self.effort_lim = np.array([j.effort_limit for j in r.joints])
        self.obs_size = int(self.task.obs_size(self))
        lm = act.learned
        if lm is not None and lm.telemetry:
            raise ModelError(f"{act.source}: the learned model reads logged telemetry {list(lm.telemetry)}, which "
                             f"an environment cannot provide; train one on state features only")
        self.net_shape = (lm.layout.history, lm.layout.n_features) if lm is not None else (0, 0)
        if act.kind == "builtin":
            self.ctrl_idx = builtin_ctrl_index(r, self.mj_model)
        if self.mixed:  # ctrl index of each built-in joint's own actuator
            self.ctrl_idx = builtin_ctrl_index(r, self.mj_model, act.builtin)
        self.backend = make_backend(self, spec)

    def follow(self, xp, qpos, qvel):
        """Set joints that follow another through a joint equality (a mimic finger) from their
        leader (as :func:`~actuatorlab.sim.arm.initial_state` does)."""
        q0 = self.mj_model.qpos0
        for a1, a2, d1, d2, c in self._eq:
            y = qpos[..., a2] - q0[a2]
            v1 = q0[a1] + c[0] + c[1] * y + c[2] * y ** 2 + c[3] * y ** 3 + c[4] * y ** 4
            w1 = (c[1] + 2 * c[2] * y + 3 * c[3] * y ** 2 + 4 * c[4] * y ** 3) * qvel[..., d2]
            if xp is np:
                qpos[..., a1], qvel[..., d1] = v1, w1
            else:
                qpos, qvel = qpos.at[..., a1].set(v1), qvel.at[..., d1].set(w1)
        return qpos, qvel

    def contract_table(self) -> list[tuple[str, str]]:
        return self.contract.table(self.robot)

    # -------------------------------------------------------------------------------------------
    def _arm_state(self, xp, qpos, qvel, params, q_target):
        mr, be = self.model_robot, self.backend
        n, D, h = mr.n_joints, self.cfg.delay_steps, self.cfg.firmware_dt
        q, dq = qpos[mr.qpos_adr], qvel[mr.dof_adr]
        q_target = q_target[self.mod_idx] if self.mixed else q_target
        amb = mr.joint_params({"ambient_temperature": params["ambient_temperature"]}, xp=xp)
        return ArmState(qpos, qvel, q - dq * h, q - 2.0 * dq * h, xp.zeros(n, be.dtype), q_target, q_target,
                        xp.broadcast_to(q_target, (D, n)), xp.ones((D, n), be.dtype), q, dq,
                        amb["ambient_temperature"])

    def reset(self, key, options: dict | None = None) -> EnvState:
        """A new episode of one environment from a JAX key (both backends draw the same numbers;
        ``options`` is reserved for the Gymnasium API and unused)."""
        be, xp, c, n, dt = self.backend, self.backend.xp, self.contract, self.n_joints, self.backend.dtype
        k_task, k_noise, k_rand, k_obs, k_next = jax.random.split(key, 5)
        params = be.episode_params(k_rand)
        qpos = xp.array(self.home, dt)
        u = jax.random.uniform(k_noise, (n,), jax.numpy.float32, -1.0, 1.0)  # same draw in any precision
        q0 = xp.clip(qpos[self.qadr] + be.asarray(u) * self.reset_noise, self.lo, self.hi)
        qpos = be.set(qpos, self.qadr, q0)
        qvel = xp.zeros(self.mj_model.nv, dt)
        qpos, qvel = self.follow(xp, qpos, qvel)
        held = q0 if c.history_init == "state" else xp.zeros(n, dt)
        arm = self._arm_state(xp, qpos, qvel, params, held)
        L = c.obs_latency + 1
        seen_p = qpos if c.history_init == "state" else xp.zeros_like(qpos)
        seen_v = qvel if c.history_init == "state" else xp.zeros_like(qvel)
        if self.actuator.learned is not None:
            f0 = frame(self.actuator.learned, held, q0, qvel[self.dadr], self.v_supply, xp.ones(n), xp.zeros((0,)))
            f0 = be.net(f0)
            net_hist = xp.broadcast_to(xp.zeros_like(f0) if c.history_init == "zeros" else f0, self.net_shape)
        else:
            net_hist = xp.zeros(self.net_shape, be.net_dtype)
        ctl = ControlState(xp.zeros((), be.int_dtype), be.key(k_next), held, held,
                           xp.broadcast_to(held, (c.command_latency, n)), xp.broadcast_to(seen_p, (L,) + qpos.shape),
                           xp.broadcast_to(seen_v, (L,) + qvel.shape), xp.zeros(n, dt),
                           xp.zeros((len(DIMS) + 1, n), be.int_dtype), net_hist, be.key(k_rand))
        task = self.task.reset(self, k_task, xp)
        obs = self.task.observe(self, ctl.obs_qpos[0], ctl.obs_qvel[0], task, ctl.last_action, xp)
        if self.randomization is not None:
            obs = be.noise_one(k_obs, obs)
        _, m_task = self.task.reward(self, qpos, qvel, task, ctl.last_action, ctl.last_action, xp)
        metrics = {**{k: xp.zeros((), dt) for k in m_task}, "envelope_outside_frac": xp.zeros((), dt)}
        info = {"truncation": xp.zeros((), dt), "envelope_outside_s": xp.zeros((len(DIMS) + 1, n), dt)}
        return EnvState(arm, params, ctl, task, be.obs(obs), xp.zeros((), dt), xp.zeros((), dt), metrics, info)

    def step_params(self, state: EnvState) -> dict:
        """The actuator parameters the next ``step`` runs its physics with: ``state.params``, drifted
        to the episode time ``state.ctl.step x policy_dt`` [s] when the randomization has drift."""
        if self.randomization is None or not getattr(self.randomization, "has_drift", False):
            return state.params
        return self.backend.drift(state)

    def step(self, state: EnvState, action, model_updates=None, physics=None):
        """One policy step: (state', obs, reward, terminated, truncated, info), info holding the
        task's metrics, ``envelope_outside_frac`` (share of joint-ticks outside in this step),
        ``truncation``, ``envelope_outside_s`` ((..., 5, n) [s] this episode) and ``effort``
        ((..., decimation, n) [1] at the start of every command tick, a fraction of each joint's
        limit). ``model_updates``: MJX ``Model`` fields (name -> full array, traced) this step's
        physics runs with (mjx backend); ``physics``: a replacement of the backend's physics
        function with its signature (a wrapper's hook)."""
        be, xp, c, ctl, dt = self.backend, self.backend.xp, self.contract, state.ctl, self.backend.dtype
        action = xp.asarray(action, dt)
        target = scale_action(c, xp, action, self.offset, self.lo, self.hi)
        b = self.bounds
        if b is not None and self.envelope_mode == "clip":
            target = xp.clip(target, b.pos_lo, b.pos_hi)
        grid, filt = command_grid(c, xp, ctl.prev_target, target, ctl.filt, self.command_dt)
        sent, fifo = apply_latency(xp, ctl.fifo, be.own(grid))
        run = physics or be.physics
        ph = run(self.step_params(state), state.arm, be.contiguous(sent), ctl.net_hist, model_updates)
        ticks = ctl.outside_ticks
        if b is not None:
            ticks = ticks + xp.sum(outside(xp, b, ph.q, ph.dq, ph.effort), axis=-3).astype(ticks.dtype)
        D = sent.shape[-2]
        new_out = (ticks[..., -1, :] - ctl.outside_ticks[..., -1, :]).sum(axis=-1) / (D * self.n_joints)
        obs_p = push_samples(xp, ctl.obs_qpos, ph.qpos_end)
        obs_v = push_samples(xp, ctl.obs_qvel, ph.qvel_end)
        rng, k_obs = be.split(ctl.rng)
        steps = ctl.step + 1
        new_ctl = ControlState(steps, rng, target, filt, fifo, obs_p, obs_v, action, ticks, ph.net_hist, ctl.rand_key)
        obs = self.task.observe(self, obs_p[..., 0, :], obs_v[..., 0, :], state.task, action, xp)
        if self.randomization is not None:
            obs = be.noise(k_obs, obs)
        arm = ph.arm
        reward, m_task = self.task.reward(self, arm.qpos, arm.qvel, state.task, action, ctl.last_action, xp)
        term = be.asbool(self.task.done(self, arm.qpos, arm.qvel, state.task, xp))
        trunc = steps >= self.episode_length
        metrics = {**{k: xp.asarray(v, dt) for k, v in m_task.items()}, "envelope_outside_frac": xp.asarray(new_out, dt)}
        info = {"truncation": trunc.astype(dt), "envelope_outside_s": ticks.astype(dt) * self.command_dt}
        obs, reward = be.obs(obs), xp.asarray(reward, dt)
        new = EnvState(arm, state.params, new_ctl, state.task, obs, reward, (term | trunc).astype(dt), metrics, info)
        return new, obs, reward, term, trunc, {**metrics, **info, "effort": ph.effort}


def _joint_equalities(mm) -> list:
    """Joint equalities (follower qadr, leader qadr, follower dofadr, leader dofadr, polycoef)."""
    out = []
    for e in range(mm.neq):
        if mm.eq_type[e] == mujoco.mjtEq.mjEQ_JOINT and mm.eq_obj2id[e] >= 0:
            j1, j2 = int(mm.eq_obj1id[e]), int(mm.eq_obj2id[e])
            out.append((int(mm.jnt_qposadr[j1]), int(mm.jnt_qposadr[j2]), int(mm.jnt_dofadr[j1]),
                        int(mm.jnt_dofadr[j2]), mm.eq_data[e][:5].copy()))
    return out
