"""MJX environment with the actuator in the loop, in the functional style of MuJoCo Playground.

``env.reset(rng) -> EnvState`` and ``env.step(state, action) -> EnvState`` are pure JAX functions
(jit-, vmap- and scan-able; batch with ``jax.vmap(env.reset)(keys)``, thousands of environments
on one device). One ``step`` is one policy step of the :class:`~actuatorlab.envs.timing.
TimingContract`: the action becomes ``decimation`` command ticks (hold / interpolate / filter,
command latency), which drive the robot's actuator model for ``decimation x substeps`` physics
steps through the whole-robot rollout of :func:`actuatorlab.sim.arm.make_mjx_rollout` (the same
firmware, motor, transmission and friction functions as the fits; nothing is re-written here).
With ``model="builtin"`` the MJCF's own actuators (``mjx.step`` on ``ctrl``) run instead, for
comparison. A mixed robot (``builtin_joints=[...]``) keeps the MJCF's actuators on those joints
and runs the model on the others in the same rollout: the built-in joints' commands go to their
``ctrl`` (held over each command tick), the others' through the actuator model
(:func:`~actuatorlab.envs.actuators.mixed_robot`).

Precision: the environment never switches JAX's precision. ``precision="float32"`` (default)
builds the MJX model and constants in float32, for a training program with default JAX settings;
``"float64"`` builds them in float64: then trace ``reset``/``step`` inside
:func:`actuatorlab.precision.physics_precision` (``env.precision_context()``).

Hook points for domain randomization (``randomization``, an object with):
``sample_episode(key, params) -> params`` applied at reset to the actuator parameter sets (name
-> (n_groups,), servo side; a learned model's ``base``), stored per episode in ``state.params``;
``step_noise(key, obs) -> obs`` applied to every observation; when the object has drift
(``has_drift`` true), ``drift(key, params, t) -> params`` with ``key`` the episode's randomization
key (kept in ``state.ctl.rand_key``), ``params`` the episode's parameters (``state.params``, never
changed within the episode) and ``t = step x policy_dt`` [s] the episode time at the start of the
policy step: the physics of that step runs with the drifted parameters
(:meth:`MjxEnv.step_params`). Without drift entries nothing of this runs.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import mujoco
import numpy as np

from ..errors import ModelError
from ..sim.arm import ArmConfig, ArmInputs, ArmState
from .actuators import Actuator, builtin_ctrl_index, builtin_model, home_qpos, load_actuator
from .envelope import DIMS, effort_limit, envelope_bounds, outside
from .tasks import PostureTask
from .timing import TimingContract, apply_latency, command_grid, push_samples, scale_action
from ..precision import physics_precision
from ..sim.arm import make_mjx_rollout
from ..sim.arm_learned import frame, LearnedInputs

__all__ = ["EnvState", "ControlState", "MjxEnv"]


class ControlState(NamedTuple):
    """Policy-side state: step [1] policy steps since reset; rng: key; prev_target, filt (n,)
    [rad | m] last policy target and command filter; fifo (command_latency, n) commands in
    flight; obs_qpos (obs_latency + 1, nq), obs_qvel (obs_latency + 1, nv) observation FIFO (entry
    0 observed); last_action (n,); outside_ticks (5, n) int32: command ticks outside the envelope
    per dimension (:data:`~actuatorlab.envs.envelope.DIMS`, then any); net_hist (H, F) float32:
    a learned model's past frames ((0, 0) otherwise); rand_key: the episode's randomization key
    (the key given to ``sample_episode``; drift reads it every step)."""

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


class _Static:
    """Shared static description of an environment (both paths read it)."""

    def _setup(self, robot, model, contract, task, randomization, envelope, envelope_mode, episode_length,
               reset_noise, home=None, builtin_joints=None):
        act = load_actuator(robot, model, builtin_joints)
        self.actuator: Actuator = act
        self.robot = r = act.robot
        # the joints the actuatorlab rollout steps (all of them unless some are built in)
        self.model_robot = mr = act.rollout_robot
        self.mixed = bool(act.builtin) and act.kind != "builtin"
        self.contract = contract or TimingContract()
        self.task = task or PostureTask()
        self.randomization = randomization
        self.episode_length = int(episode_length)
        self.reset_noise = float(reset_noise)
        if envelope_mode not in ("count", "clip"):
            raise ModelError(f"envelope_mode must be count or clip, got {envelope_mode!r}")
        self.envelope_mode = envelope_mode
        # None: the model file's envelope (arm_model.json "envelope"); False: no envelope counted
        self.envelope = None if envelope is False else (envelope if envelope is not None else act.envelope)
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
        self._eq = []  # joint equalities (follower qadr, leader qadr, qpos0 of both, polycoef)
        mm = self.mj_model
        for e in range(mm.neq):
            if mm.eq_type[e] == mujoco.mjtEq.mjEQ_JOINT and mm.eq_obj2id[e] >= 0:
                j1, j2 = int(mm.eq_obj1id[e]), int(mm.eq_obj2id[e])
                self._eq.append((int(mm.jnt_qposadr[j1]), int(mm.jnt_qposadr[j2]), int(mm.jnt_dofadr[j1]),
                                 int(mm.jnt_dofadr[j2]), mm.eq_data[e][:5].copy()))
        self.home = home_qpos(self.mj_model)
        if home is not None:  # a reset posture of the modelled joints (n,) [rad | m]
            self.home[self.qadr] = np.broadcast_to(np.asarray(home, float), (r.n_joints,))
            self.home, _ = self.follow(np, self.home, np.zeros(self.mj_model.nv))
        jr = m.jnt_range[[m.dof_jntid[a] for a in self.dadr]]
        lim = np.array([bool(m.jnt_limited[m.dof_jntid[a]]) for a in self.dadr])
        self.lo = np.where(lim, jr[:, 0], -np.inf)
        self.hi = np.where(lim, jr[:, 1], np.inf)
        self.free_base = bool(m.njnt and m.jnt_type[0] == mujoco.mjtJoint.mjJNT_FREE)
        home_q = self.home[self.qadr]
        self.offset = home_q if self.contract.action_offset == "home" else np.zeros(r.n_joints)
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


class MjxEnv(_Static):
    """MJX environment (module docstring).

    robot: name or :class:`~actuatorlab.robots.Robot`; model: see
    :func:`~actuatorlab.envs.actuators.load_actuator` (None: the config's nominal model;
    "builtin": MuJoCo's actuators; a fitted arm_model.json, analytic or learned); contract:
    :class:`~actuatorlab.envs.timing.TimingContract`; task: :class:`~actuatorlab.envs.tasks.
    PostureTask` by default; randomization: hook object (module docstring) or None; envelope: the
    fitted model's envelope dict (or {joint: dict}; None, the default: the model file's, e.g. the
    per-joint envelope ``fit --robot`` records; False: none) counted per joint
    and episode, ``envelope_mode`` "count" or "clip" (also clip the policy target to the
    envelope's position range); builtin_joints: joints that keep MuJoCo's built-in actuator while
    the others run ``model`` (a mixed robot; analytic models); episode_length [policy steps]
    (``info["truncation"]``);
    reset_noise [rad | m] uniform noise on the joints' start positions; home (n,) [rad | m] the
    joints' reset posture (default: the MJCF's home / standing keyframe, else qpos0), also the
    action offset of ``action_offset="home"``; precision "float32" | "float64".
    """

    def __init__(self, robot: Any = None, model: Any = None, *, contract: TimingContract | None = None,
                 task: Any = None, randomization: Any = None, envelope: Any = None, envelope_mode: str = "count",
                 episode_length: int = 500, reset_noise: float = 0.0, home: Any = None, precision: str = "float32",
                 builtin_joints: Any = None):
        if precision not in ("float32", "float64"):
            raise ModelError(f"precision must be float32 or float64, got {precision!r}")
        self.precision = precision
        self._setup(robot, model, contract, task, randomization, envelope, envelope_mode, episode_length,
                    reset_noise, home, builtin_joints)
        with jax.enable_x64(precision == "float64"):
            self._build()

    def precision_context(self):
        """Context to trace ``reset``/``step`` in (float64: x64 on; float32: a no-op)."""
        import contextlib


        return physics_precision() if self.precision == "float64" else contextlib.nullcontext()

    # -------------------------------------------------------------------------------------------
    def _build(self):
        from mujoco import mjx


        r, act = self.model_robot, self.actuator
        self.dtype = jnp.float64 if self.precision == "float64" else jnp.float32
        self.mx = mjx.put_model(builtin_model(r, for_mjx=True) if act.kind == "builtin" else r.model(for_mjx=True))
        self.params0 = {k: jnp.asarray(v, self.dtype) for k, v in act.params.items()}
        if act.kind != "builtin":
            # the raw maker: the environment's precision is the caller's (never switched here)
            self._rollout = make_mjx_rollout.__wrapped__(r, self.cfg, self.mx)
        else:
            self._template = mjx.make_data(self.mx)
        lm = act.learned
        if lm is not None:  # network in float32 (as trained), physics in the env's precision
            self._learned = lm

    # -------------------------------------------------------------------------------------------
    def _arm_state(self, qpos, qvel, params, q_target):
        mr = self.model_robot
        n, D, h = mr.n_joints, self.cfg.delay_steps, self.cfg.firmware_dt
        q, dq = qpos[mr.qpos_adr], qvel[mr.dof_adr]
        q_target = q_target[self.mod_idx] if self.mixed else q_target
        amb = mr.joint_params({"ambient_temperature": params["ambient_temperature"]}, xp=jnp)
        return ArmState(qpos, qvel, q - dq * h, q - 2.0 * dq * h, jnp.zeros(n, self.dtype), q_target, q_target,
                        jnp.broadcast_to(q_target, (D, n)), jnp.ones((D, n), self.dtype), q, dq,
                        amb["ambient_temperature"])

    def reset(self, rng) -> EnvState:
        c, n, dt = self.contract, self.n_joints, self.dtype
        k_task, k_noise, k_rand, k_obs, k_next = jax.random.split(rng, 5)
        params = dict(self.params0)
        if self.randomization is not None:
            params = self.randomization.sample_episode(k_rand, params)
        qpos = jnp.asarray(self.home, dt)
        noise = jax.random.uniform(k_noise, (n,), jnp.float32, -1.0, 1.0).astype(dt) * self.reset_noise
        q0 = jnp.clip(qpos[self.qadr] + noise, self.lo, self.hi)
        qpos = qpos.at[self.qadr].set(q0)
        qvel = jnp.zeros(self.mj_model.nv, dt)
        qpos, qvel = self.follow(jnp, qpos, qvel)
        held = q0 if c.history_init == "state" else jnp.zeros(n, dt)
        arm = self._arm_state(qpos, qvel, params, held)
        L = c.obs_latency + 1
        seen_p = qpos if c.history_init == "state" else jnp.zeros_like(qpos)
        seen_v = qvel if c.history_init == "state" else jnp.zeros_like(qvel)
        if self.actuator.learned is not None:
            f0 = frame(self._learned, held, q0, qvel[self.dadr], self.v_supply, jnp.ones(n), jnp.zeros((0,)))
            if c.history_init == "zeros":
                f0 = jnp.zeros_like(f0)
            net_hist = jnp.broadcast_to(f0, self.net_shape)
        else:
            net_hist = jnp.zeros(self.net_shape, jnp.float32)
        ctl = ControlState(jnp.zeros((), jnp.int32), k_next, held, held, jnp.broadcast_to(held, (c.command_latency, n)),
                           jnp.broadcast_to(seen_p, (L,) + qpos.shape), jnp.broadcast_to(seen_v, (L,) + qvel.shape),
                           jnp.zeros(n, dt), jnp.zeros((len(DIMS) + 1, n), jnp.int32), net_hist, k_rand)
        task = self.task.reset(self, k_task, jnp)
        obs = self.task.observe(self, ctl.obs_qpos[0], ctl.obs_qvel[0], task, ctl.last_action, jnp)
        if self.randomization is not None:
            obs = self.randomization.step_noise(k_obs, obs)
        _, m_task = self.task.reward(self, qpos, qvel, task, ctl.last_action, ctl.last_action, jnp)
        metrics = {**{k: jnp.zeros((), dt) for k in m_task}, "envelope_outside_frac": jnp.zeros((), dt)}
        info = {"truncation": jnp.zeros((), dt), "envelope_outside_s": jnp.zeros((len(DIMS) + 1, n), dt)}
        return EnvState(arm, params, ctl, task, obs, jnp.zeros((), dt), jnp.zeros((), dt), metrics, info)

    # -------------------------------------------------------------------------------------------
    def _physics(self, params, arm: ArmState, sent, net_hist, model_updates=None):
        """Run D command ticks. Returns (arm', q, dq, effort (D, n) at the start of every tick,
        qpos (D, nq), qvel (D, nv) at the end of every tick, net_hist')."""
        D, n, dt = sent.shape[0], self.model_robot.n_joints, self.dtype
        en = jnp.ones((D, n), dt)
        vs = jnp.broadcast_to(jnp.asarray(self.v_supply[self.mod_idx], dt), (D, n))
        if self.actuator.kind == "builtin":
            return self._physics_builtin(arm, sent, model_updates)
        if self.mixed:
            ctrl = jnp.zeros((D, self.mj_model.nu), dt).at[:, jnp.asarray(self.ctrl_idx)].set(sent[:, self.bi_idx])
            final, out = self._rollout(params, ArmInputs(sent[:, self.mod_idx], en, vs), arm, model_updates, ctrl=ctrl)
            qpos_end = jnp.concatenate([out.qpos[1:], final.qpos[None]], axis=0)
            qvel_end = jnp.concatenate([out.qvel[1:], final.qvel[None]], axis=0)
            # effort fraction of the modelled joints; the built-in joints' is not recorded (0)
            eff = jnp.zeros((D, self.n_joints), dt).at[:, self.mod_idx].set(out.u / self.u_lim[self.mod_idx])
            return (final, out.qpos[:, self.qadr], out.qvel[:, self.dadr], eff, qpos_end, qvel_end, net_hist)
        if self.actuator.learned is not None:
            import equinox as eqx


            lm = eqx.tree_at(lambda m: m.base, self._learned, params)
            final, out = self._rollout(lm, LearnedInputs(sent, en, vs, None, net_hist), arm, model_updates)
            frames = frame(lm, sent, out.q, out.dq, vs, en, jnp.zeros((D, 0)))
            H = net_hist.shape[0]
            net_hist = jnp.concatenate([net_hist, frames], axis=0)[D:] if H else net_hist
        else:
            final, out = self._rollout(params, ArmInputs(sent, en, vs), arm, model_updates)
        qpos_end = jnp.concatenate([out.qpos[1:], final.qpos[None]], axis=0)
        qvel_end = jnp.concatenate([out.qvel[1:], final.qvel[None]], axis=0)
        return final, out.q, out.dq, out.u / self.u_lim, qpos_end, qvel_end, net_hist

    def _physics_builtin(self, arm: ArmState, sent, model_updates=None):
        from mujoco import mjx

        mx, idx = self.mx, jnp.asarray(self.ctrl_idx)
        if model_updates:
            mx = mx.replace(**model_updates)
        d0 = self._template.replace(qpos=arm.qpos, qvel=arm.qvel)

        def tick(d, cmd):
            q, dq = d.qpos[self.qadr], d.qvel[self.dadr]
            d = d.replace(ctrl=jnp.zeros_like(d.ctrl).at[idx].set(cmd))
            d = jax.lax.fori_loop(0, self.cfg.substeps, lambda _, dd: mjx.step(mx, dd), d)
            eff = d.qfrc_actuator[self.dadr] / self.effort_lim
            return d, (q, dq, eff, d.qpos, d.qvel)

        d, (q, dq, eff, qpos_end, qvel_end) = jax.lax.scan(tick, d0, sent)
        return arm._replace(qpos=d.qpos, qvel=d.qvel), q, dq, eff, qpos_end, qvel_end, jnp.zeros((0, 0), jnp.float32)

    def step_params(self, state: EnvState) -> dict:
        """The actuator parameters the next ``step`` runs its physics with: ``state.params``, drifted
        to the episode time ``state.ctl.step x policy_dt`` [s] when the randomization has drift."""
        if self.randomization is None or not getattr(self.randomization, "has_drift", False):
            return state.params
        t = state.ctl.step.astype(self.dtype) * jnp.asarray(self.policy_dt, self.dtype)
        p = self.randomization.drift(state.ctl.rand_key, state.params, t)
        return {k: jnp.asarray(v, jnp.asarray(state.params[k]).dtype) for k, v in p.items()}

    def step(self, state: EnvState, action, model_updates=None) -> EnvState:
        """One policy step. ``model_updates``: MJX ``Model`` fields (name -> full array, traced) the
        physics of this step runs with (e.g. :meth:`actuatorlab.sim.homotopy.Homotopy.model_updates`;
        with an actuatorlab actuator they replace the rollout's own, ``dof_armature`` included)."""
        return self.step_with_effort(state, action, model_updates)[0]

    def step_with_effort(self, state: EnvState, action, model_updates=None):
        """:meth:`step`, also returning the effort (decimation, n) at the start of every command tick
        as a fraction of each joint's limit (firmware output / its limit; ``"builtin"``: MuJoCo's
        actuator force / the effort limit)."""
        c, ctl, dt = self.contract, state.ctl, self.dtype
        action = jnp.asarray(action, dt)
        target = scale_action(c, jnp, action, self.offset, self.lo, self.hi)
        b = self.bounds
        if b is not None and self.envelope_mode == "clip":
            target = jnp.clip(target, b.pos_lo, b.pos_hi)
        grid, filt = command_grid(c, jnp, ctl.prev_target, target, ctl.filt, self.command_dt)
        sent, fifo = apply_latency(jnp, ctl.fifo, grid)
        arm, q, dq, eff, qpos_end, qvel_end, net_hist = self._physics(self.step_params(state), state.arm, sent,
                                                                      ctl.net_hist, model_updates)
        ticks = ctl.outside_ticks
        if b is not None:
            ticks = ticks + jnp.sum(outside(jnp, b, q, dq, eff), axis=0).astype(jnp.int32)
        obs_p = push_samples(jnp, ctl.obs_qpos, qpos_end)
        obs_v = push_samples(jnp, ctl.obs_qvel, qvel_end)
        rng, k_obs = jax.random.split(ctl.rng)
        steps = ctl.step + 1
        ctl = ControlState(steps, rng, target, filt, fifo, obs_p, obs_v, action, ticks, net_hist, ctl.rand_key)
        obs = self.task.observe(self, obs_p[0], obs_v[0], state.task, action, jnp)
        if self.randomization is not None:
            obs = self.randomization.step_noise(k_obs, obs)
        reward, m_task = self.task.reward(self, arm.qpos, arm.qvel, state.task, action, state.ctl.last_action, jnp)
        term = self.task.done(self, arm.qpos, arm.qvel, state.task, jnp)
        trunc = steps >= self.episode_length
        D = grid.shape[0]
        new_out = (ticks[-1] - state.ctl.outside_ticks[-1]).sum() / (D * self.n_joints)
        metrics = {**{k: jnp.asarray(v, dt) for k, v in m_task.items()},
                   "envelope_outside_frac": jnp.asarray(new_out, dt)}
        info = {"truncation": trunc.astype(dt), "envelope_outside_s": ticks.astype(dt) * self.command_dt}
        return EnvState(arm, state.params, ctl, state.task, obs, jnp.asarray(reward, dt),
                        (term | trunc).astype(dt), metrics, info), eff
