"""Gymnasium environments on native MuJoCo with the actuator in the loop.

Same contract as :class:`~actuatorlab.envs.mjx_env.MjxEnv` (same timing contract, task, actuator,
envelope counter and randomization hooks), run by :func:`actuatorlab.sim.arm_native.rollout_native`
(the NumPy twin of the MJX rollout's functions) for a batch of B environments at once:

* :class:`ActuatorEnv` (``gymnasium.Env``): one environment;
* :class:`ActuatorVectorEnv` (``gymnasium.vector.VectorEnv``): B environments stepped together by
  one batched native rollout, same-step autoreset (the observation of a finished environment is
  its new episode's first one; the last one is in ``infos["final_obs"]``).

Random numbers: episodes are drawn with ``jax.random`` from ``PRNGKey(seed)`` exactly as the MJX
environment draws them, so both environments start the same episode from the same seed.
The randomization hooks run under float64 here (``physics_precision``), like the physics; a hook
that draws with explicit dtypes (``jax.random.uniform(key, shape, jnp.float32)``) draws the same
numbers in both environments. Drift (``randomization.has_drift``) runs as in the MJX
environment: every policy step's physics uses ``drift(episode key, episode params, steps x
policy_dt)`` (``last_params``), ``params`` keep the episode's values. ``info`` holds
``envelope_outside_s`` ({dimension: (n,) [s]} this episode), the task's metrics and
``envelope_outside_frac`` (share of joint-ticks outside in this step). ``envelope_mode="warn"``
also issues one ``RuntimeWarning`` per episode and joint on its first excursion.
"""

from __future__ import annotations

import warnings
from typing import Any

import gymnasium as gym
import jax
import mujoco
import numpy as np

from ..errors import ModelError
from ..precision import physics_precision
from ..sim.arm import ArmInputs, ArmState
from .envelope import DIMS, outside
from .mjx_env import _Static
from .timing import TimingContract, apply_latency, command_grid, push_samples, scale_action
from ..sim.arm_native import native_model, rollout_native
from ..sim.arm_learned import frame, LearnedInputs

__all__ = ["NativeBatch", "ActuatorEnv", "ActuatorVectorEnv"]


class NativeBatch(_Static):
    """B environments on native MuJoCo (NumPy arrays with a leading batch axis); the engine of the
    Gymnasium classes. Arguments as :class:`~actuatorlab.envs.mjx_env.MjxEnv` (``envelope_mode``
    also "warn"), plus ``num_envs`` and ``model_updates`` (MjModel field -> array written into the
    native model, e.g. a payload's ``body_mass``; :func:`~actuatorlab.sim.arm_native.native_model`),
    and ``builtin_joints`` (a mixed robot, as in the MJX environment).
    After every step ``last_outputs`` holds that step's :class:`~actuatorlab.sim.arm.ArmOutputs`
    (B, D, ...) per command tick (q, dq, current, ...; None for ``"builtin"``) and ``last_params``
    the actuator parameters its physics ran with ({name: (B, n_sets)}, the episode's ``params``
    drifted to the step's episode time when the randomization has drift). ``body_force`` (body id,
    (B, 3) [N] world frame) or None: an external force on a body's centre of mass during the next
    steps (a push; the caller sets and clears it; native actuator only)."""

    def __init__(self, robot: Any = None, model: Any = None, *, num_envs: int = 1,
                 contract: TimingContract | None = None, task: Any = None, randomization: Any = None,
                 envelope: Any = None, envelope_mode: str = "count", episode_length: int = 500,
                 reset_noise: float = 0.0, home: Any = None, model_updates: dict | None = None,
                 builtin_joints: Any = None):
        self.warn = envelope_mode == "warn"
        self._setup(robot, model, contract, task, randomization, envelope, "count" if self.warn else envelope_mode,
                    episode_length, reset_noise, home, builtin_joints)
        self.B = int(num_envs)
        self.model_updates = model_updates

        act = self.actuator
        if act.kind == "builtin":
            if model_updates:
                raise ModelError("model_updates apply to the actuatorlab actuator's native model, not to 'builtin'")
            self._datas = [mujoco.MjData(self.mj_model) for _ in range(self.B)]
        else:
            self._model = native_model(self.model_robot, act.params, model_updates)
        n, B = self.n_joints, self.B
        self.params = {k: np.broadcast_to(np.asarray(v, float), (B,) + np.shape(v)).copy() for k, v in act.params.items()}
        self.arm: ArmState | None = None
        self.last_outputs = None
        self.last_params = None
        self.body_force: tuple[int, np.ndarray] | None = None
        self._drift = None
        if randomization is not None and getattr(randomization, "has_drift", False):
            # one compiled call for the batch: (keys (B, 2), params {name: (B, ...)}, t (B,)) -> params
            self._drift = jax.jit(jax.vmap(randomization.drift))
        self._warned = np.zeros((B, n), bool)

    # -------------------------------------------------------------------------------------------
    def reset_index(self, b: int, key) -> np.ndarray:
        """Reset environment ``b`` from a JAX key (the MJX environment's draws); its observation."""
        c, n = self.contract, self.n_joints
        k_task, k_noise, k_rand, k_obs, k_next = jax.random.split(key, 5)
        p = {k: v[b] for k, v in self.params.items()}
        p0 = {k: np.asarray(v, float) for k, v in self.actuator.params.items()}
        if self.randomization is not None:
            with physics_precision():  # the native path is float64 throughout
                p0 = {k: np.asarray(v, float) for k, v in self.randomization.sample_episode(k_rand, p0).items()}
        for k in p:
            self.params[k][b] = p0[k]
        qpos = np.array(self.home, float)
        noise = np.asarray(jax.random.uniform(k_noise, (n,), jax.numpy.float32, -1.0, 1.0), float) * self.reset_noise
        q0 = np.clip(qpos[self.qadr] + noise, self.lo, self.hi)
        qpos[self.qadr] = q0
        qvel = np.zeros(self.mj_model.nv)
        qpos, qvel = self.follow(np, qpos, qvel)
        held = q0 if c.history_init == "state" else np.zeros(n)
        D = self.cfg.delay_steps
        mr, mi = self.model_robot, self.mod_idx
        amb = mr.joint_params({"ambient_temperature": p0["ambient_temperature"]})["ambient_temperature"]
        # at rest: the firmware's last two measurements are q0 (MjxEnv: q - dq h with dq = 0)
        q0m, hm, nm = q0[mi], held[mi], mr.n_joints
        one = ArmState(qpos, qvel, q0m, q0m, np.zeros(nm), hm, hm, np.tile(hm, (D, 1)), np.ones((D, nm)),
                       q0m.copy(), np.zeros(nm), amb)
        for f, v in zip(ArmState._fields, one):
            getattr(self.arm, f)[b] = v
        self.obs_qpos[b] = qpos if c.history_init == "state" else 0.0
        self.obs_qvel[b] = qvel if c.history_init == "state" else 0.0
        self.prev_target[b], self.filt[b], self.fifo[b] = held, held, held
        self.last_action[b] = 0.0
        self.ticks[b] = 0
        self.steps[b] = 0
        self._warned[b] = False
        self.rng[b] = np.asarray(k_next)
        self.rand_keys[b] = np.asarray(k_rand)
        if self.actuator.learned is not None:
            f0 = np.asarray(frame(self.actuator.learned, held, q0, qvel[self.dadr], self.v_supply, np.ones(n),
                                  np.zeros((0,))))
            self.net_hist[b] = 0.0 if c.history_init == "zeros" else f0
        t = self.task.reset(self, k_task, np)
        for k, v in t.items():
            self.task_data[k][b] = v
        obs = self.task.observe(self, self.obs_qpos[b, 0], self.obs_qvel[b, 0], {k: v[b] for k, v in self.task_data.items()},
                                self.last_action[b], np)
        if self.randomization is not None:
            with physics_precision():
                obs = np.asarray(self.randomization.step_noise(k_obs, obs))
        return np.asarray(obs, float)

    def reset(self, keys) -> np.ndarray:
        """Reset all B environments (keys (B, 2) JAX keys); observations (B, obs_size)."""
        B, n, c = self.B, self.n_joints, self.contract
        m = self.mj_model
        D = self.cfg.delay_steps
        z = lambda *s: np.zeros((B,) + s)  # noqa: E731
        nm = self.model_robot.n_joints
        self.arm = ArmState(z(m.nq), z(m.nv), z(nm), z(nm), z(nm), z(nm), z(nm), z(D, nm), z(D, nm), z(nm), z(nm),
                            z(nm))
        L = c.obs_latency + 1
        self.obs_qpos, self.obs_qvel = z(L, m.nq), z(L, m.nv)
        self.prev_target, self.filt, self.fifo = z(n), z(n), z(c.command_latency, n)
        self.last_action, self.ticks, self.steps = z(n), np.zeros((B, len(DIMS) + 1, n), np.int64), np.zeros(B, np.int64)
        self.rng = np.zeros((B,) + np.shape(keys[0]), np.asarray(keys[0]).dtype)
        self.rand_keys = self.rng.copy()
        self.net_hist = z(*self.net_shape)
        probe = self.task.reset(self, keys[0], np)
        self.task_data = {k: np.zeros((B,) + np.shape(v)) for k, v in probe.items()}
        return np.stack([self.reset_index(b, keys[b]) for b in range(B)])

    # -------------------------------------------------------------------------------------------
    def _physics(self, sent):
        D, B, n = sent.shape[1], self.B, self.model_robot.n_joints
        if self.body_force is not None and (self.actuator.kind == "builtin" or self.actuator.learned is not None):
            raise ModelError("body_force (an external push) is applied by the native analytic actuator's rollout only")
        if self.actuator.kind == "builtin":
            return self._physics_builtin(sent)

        en = np.ones((B, D, n))
        vs = np.broadcast_to(self.v_supply[self.mod_idx], (B, D, n)).copy()
        ctrl = None
        if self.mixed:  # the built-in joints' commands to their own actuators; the model gets the others
            ctrl = np.zeros((B, D, self.mj_model.nu))
            ctrl[..., self.ctrl_idx] = sent[..., self.bi_idx]
            sent = np.ascontiguousarray(sent[..., self.mod_idx])
        shared = self.randomization is None
        params = {k: v[0] for k, v in self.params.items()} if shared else self.params
        if self._drift is not None:
            with physics_precision():
                t = self.steps.astype(float) * self.policy_dt
                params = {k: np.asarray(v, float) for k, v in self._drift(self.rand_keys, params, t).items()}
        self.last_params = params
        model = self._model if shared else None
        if self.actuator.learned is not None:
            import equinox as eqx


            lm = self.actuator.learned
            if not shared:
                raise ModelError("per-episode randomization of a learned model's base runs in MjxEnv only")
            lm = eqx.tree_at(lambda m: m.base, lm, {k: np.asarray(v) for k, v in params.items()})
            final, out = rollout_native(self.model_robot, lm, LearnedInputs(sent, en, vs, None, self.net_hist), self.arm,
                                        self.cfg, model=model)
            frames = np.asarray(frame(lm, sent, out.q, out.dq, vs, en, np.zeros((B, D, 0))))
            if self.net_hist.shape[1]:
                self.net_hist = np.concatenate([self.net_hist, frames], axis=1)[:, D:]
        else:
            final, out = rollout_native(self.model_robot, params, ArmInputs(sent, en, vs), self.arm, self.cfg,
                                        model_updates=self.model_updates, model=model, ctrl=ctrl,
                                        body_force=self.body_force)
        self.arm, self.last_outputs = final, out
        qpos_end = np.concatenate([out.qpos[:, 1:], final.qpos[:, None]], axis=1)
        qvel_end = np.concatenate([out.qvel[:, 1:], final.qvel[:, None]], axis=1)
        if self.mixed:  # effort fraction of the modelled joints; the built-in joints' is not recorded (0)
            eff = np.zeros(out.qpos.shape[:2] + (self.n_joints,))
            eff[..., self.mod_idx] = out.u / self.u_lim[self.mod_idx]
            return out.qpos[..., self.qadr], out.qvel[..., self.dadr], eff, qpos_end, qvel_end
        return out.q, out.dq, out.u / self.u_lim, qpos_end, qvel_end

    def _physics_builtin(self, sent):
        m, B, D = self.mj_model, self.B, sent.shape[1]
        q = np.empty(sent.shape)
        dq, eff = np.empty_like(q), np.empty_like(q)
        qpos_end, qvel_end = np.empty((B, D, m.nq)), np.empty((B, D, m.nv))
        for b, d in enumerate(self._datas):
            d.qpos[:], d.qvel[:] = self.arm.qpos[b], self.arm.qvel[b]
            for j in range(D):
                q[b, j], dq[b, j] = d.qpos[self.qadr], d.qvel[self.dadr]
                d.ctrl[self.ctrl_idx] = sent[b, j]
                for _ in range(self.cfg.substeps):
                    mujoco.mj_step(m, d)
                eff[b, j] = d.qfrc_actuator[self.dadr] / self.effort_lim
                qpos_end[b, j], qvel_end[b, j] = d.qpos, d.qvel
            self.arm.qpos[b], self.arm.qvel[b] = d.qpos, d.qvel
        return q, dq, eff, qpos_end, qvel_end

    def step(self, action):
        """Step all B environments with actions (B, n); (obs, reward, terminated, truncated, info)."""
        c = self.contract
        action = np.asarray(action, float).reshape(self.B, self.n_joints)
        target = scale_action(c, np, action, self.offset, self.lo, self.hi)
        b = self.bounds
        if b is not None and self.envelope_mode == "clip":
            target = np.clip(target, b.pos_lo, b.pos_hi)
        grid, self.filt = command_grid(c, np, self.prev_target, target, self.filt, self.command_dt)
        sent, self.fifo = apply_latency(np, self.fifo, np.array(grid))
        q, dq, eff, qpos_end, qvel_end = self._physics(np.ascontiguousarray(sent))
        D = sent.shape[1]
        new_out = np.zeros(self.B)
        if b is not None:
            out = outside(np, b, q, dq, eff).sum(axis=1)
            self.ticks += out
            new_out = out[:, -1].sum(axis=-1) / (D * self.n_joints)
            if self.warn:
                fresh = (self.ticks[:, -1] > 0) & ~self._warned
                for bi, j in zip(*np.nonzero(fresh)):
                    dims = [d for k, d in enumerate(DIMS) if self.ticks[bi, k, j] > 0]
                    warnings.warn(f"{self.robot.name} env {bi}: joint {self.robot.joint_names[j]} left the fitted "
                                  f"model's envelope ({', '.join(dims)})", RuntimeWarning, stacklevel=2)
                self._warned |= fresh
        self.obs_qpos = push_samples(np, self.obs_qpos, qpos_end)
        self.obs_qvel = push_samples(np, self.obs_qvel, qvel_end)
        self.prev_target = target
        last = self.last_action
        self.last_action = action
        self.steps += 1
        td = self.task_data
        obs = self.task.observe(self, self.obs_qpos[:, 0], self.obs_qvel[:, 0], td, action, np)
        if self.randomization is not None:
            rows = []
            with physics_precision():
                for bi in range(self.B):
                    k_next, k_obs = jax.random.split(self.rng[bi])
                    self.rng[bi] = np.asarray(k_next)
                    rows.append(np.asarray(self.randomization.step_noise(k_obs, obs[bi])))
            obs = np.stack(rows)
        reward, m_task = self.task.reward(self, self.arm.qpos, self.arm.qvel, td, action, last, np)
        term = np.asarray(self.task.done(self, self.arm.qpos, self.arm.qvel, td, np), bool)
        trunc = self.steps >= self.episode_length
        info = {**m_task, "envelope_outside_frac": new_out,
                "envelope_outside_s": {d: self.ticks[:, k] * self.command_dt for k, d in enumerate(DIMS + ("any",))}}
        return np.asarray(obs, float), np.asarray(reward, float), term, trunc, info


def _spaces(core: NativeBatch):
    n = core.n_joints
    lim = core.contract.action_clip if core.contract.action_clip is not None else np.inf
    act = gym.spaces.Box(-lim, lim, (n,), np.float64)
    obs = gym.spaces.Box(-np.inf, np.inf, (core.obs_size,), np.float64)
    return act, obs


class ActuatorEnv(gym.Env):
    """One environment (``gymnasium.Env``); arguments as :class:`NativeBatch`. ``reset(seed=s)``
    draws the episode from ``jax.random.PRNGKey(s)``, like ``MjxEnv.reset(PRNGKey(s))``."""

    metadata = {"render_modes": []}

    def __init__(self, robot: Any = None, model: Any = None, **kw: Any):
        self.core = NativeBatch(robot, model, num_envs=1, **kw)
        self.action_space, self.observation_space = _spaces(self.core)
        self._key = jax.random.PRNGKey(0)

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        if seed is not None:
            self._key = jax.random.PRNGKey(seed)
        self._key, k = jax.random.split(self._key) if seed is None else (self._key, self._key)
        obs = self.core.reset(np.asarray(k)[None])
        return obs[0], {}

    def step(self, action):
        obs, r, term, trunc, info = self.core.step(np.asarray(action)[None])
        one = {k: (v[0] if not isinstance(v, dict) else {d: a[0] for d, a in v.items()}) for k, v in info.items()}
        return obs[0], float(r[0]), bool(term[0]), bool(trunc[0]), one


class ActuatorVectorEnv(gym.vector.VectorEnv):
    """B environments stepped by one batched native rollout (``gymnasium.vector.VectorEnv``,
    same-step autoreset); arguments as :class:`NativeBatch`."""

    metadata = {"autoreset_mode": gym.vector.AutoresetMode.SAME_STEP}

    def __init__(self, robot: Any = None, model: Any = None, *, num_envs: int = 8, **kw: Any):
        self.core = NativeBatch(robot, model, num_envs=num_envs, **kw)
        self.num_envs = num_envs
        self.single_action_space, self.single_observation_space = _spaces(self.core)
        self.action_space = gym.vector.utils.batch_space(self.single_action_space, num_envs)
        self.observation_space = gym.vector.utils.batch_space(self.single_observation_space, num_envs)
        self._key = jax.random.PRNGKey(0)

    def _next_key(self):
        self._key, k = jax.random.split(self._key)
        return k

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        if seed is not None:
            self._key = jax.random.PRNGKey(seed)
        keys = np.asarray(jax.random.split(self._next_key(), self.num_envs))
        return self.core.reset(keys), {}

    def step(self, actions):
        obs, r, term, trunc, info = self.core.step(actions)
        done = term | trunc
        if done.any():
            info = dict(info, final_obs=obs.copy(), _final_obs=done.copy())
            keys = np.asarray(jax.random.split(self._next_key(), self.num_envs))
            for b in np.nonzero(done)[0]:
                obs[b] = self.core.reset_index(int(b), keys[b])
        return obs, r, term, trunc, info
