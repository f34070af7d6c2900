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
import numpy as np

from .core import EnvCore, EnvSpec, EnvState
from .envelope import DIMS

__all__ = ["NativeBatch", "ActuatorEnv", "ActuatorVectorEnv"]


class NativeBatch:
    """B environments on native MuJoCo (NumPy arrays with a leading batch axis): the environment core
    (:class:`~actuatorlab.envs.core.EnvCore`, ``"native"`` backend) holding its batched state; the
    engine of the Gymnasium classes. ``NativeBatch(robot, model, num_envs=B, **options)`` with
    ``options`` the fields of :class:`~actuatorlab.envs.core.EnvSpec` (``envelope_mode`` also
    "warn"; ``model_updates``: MjModel field -> array written into the native model, e.g. a
    payload's ``body_mass``). After every step ``last_outputs`` holds that step's
    :class:`~actuatorlab.sim.arm.ArmOutputs` (B, D, ...) per command tick (q, dq, current, ...; None
    for ``"builtin"``) and ``last_params`` the actuator parameters its physics ran with ({name: (B,
    n_sets)}, the episode's ``params`` drifted to the step's episode time when the randomization has
    drift). ``body_force`` (body id, (B, 3) [N] world frame) or None: an external force on a body's
    centre of mass during the next steps (a push; the caller sets and clears it; native actuator
    only). The state's fields read as attributes (``arm``, ``params``, ``prev_target``,
    ``obs_qpos``, ``net_hist``, ``rand_keys``, ...); the static description is the core's."""

    def __init__(self, robot: Any = None, model: Any = None, *, num_envs: int = 1, **options: Any):
        self.core = EnvCore(EnvSpec(robot, model, **options, backend="native"))
        self.warn = options.get("envelope_mode") == "warn"
        self.B = int(num_envs)
        self.state: EnvState | None = None
        self.last_outputs = None
        self.last_params = None
        self.body_force: tuple[int, np.ndarray] | None = None
        self._warned = np.zeros((self.B, self.core.n_joints), bool)

    def __getattr__(self, name: str):
        if name in ("core", "state"):
            raise AttributeError(name)
        if name in _CTL or name in ("arm", "params", "task_data"):
            state = self.state
            if state is None:
                raise AttributeError(f"{name}: the environment has no state before reset()")
            if name in _CTL:
                return getattr(state.ctl, _CTL[name])
            return state.task if name == "task_data" else getattr(state, name)
        if name == "_drift":  # the backend's compiled drift (None without drift)
            return self.core.backend._drift
        if name == "_model":  # the backend's native MjModel (model_updates written in)
            return self.core.backend.model
        return getattr(self.core, name)

    # -------------------------------------------------------------------------------------------
    def reset_index(self, b: int, key) -> np.ndarray:
        """Reset environment ``b`` from a JAX key (the MJX environment's draws); its observation."""
        one = self.core.reset(key)

        def put(full, x):  # new arrays: what an earlier step returned stays as it was
            full = full.copy()
            full[b] = x
            return full

        self.state = jax.tree.map(put, self.state, one)
        self._warned[b] = False
        return one.obs

    def reset(self, keys) -> np.ndarray:
        """Reset all B environments (keys (B, 2) JAX keys); observations (B, obs_size)."""
        states = [self.core.reset(keys[b]) for b in range(self.B)]
        self.state = jax.tree.map(lambda *x: np.stack(x), *states)
        self._warned[:] = False
        return self.state.obs.copy()

    # -------------------------------------------------------------------------------------------
    def _physics(self, params, arm, sent, net_hist, model_updates=None):
        """The backend's physics with this batch's ``body_force``; records ``last_outputs`` and
        ``last_params``."""
        ph = self.core.backend.physics(params, arm, sent, net_hist, model_updates, self.body_force)
        if ph.outputs is not None or ph.params is not None:
            self.last_outputs, self.last_params = ph.outputs, ph.params
        return ph

    def step(self, action):
        """Step all B environments with actions (B, n); (obs, reward, terminated, truncated, info)."""
        action = np.asarray(action, float).reshape(self.B, self.core.n_joints)
        self.state, obs, reward, term, trunc, info = self.core.step(self.state, action, physics=self._physics)
        ticks = self.state.ctl.outside_ticks
        if self.warn and self.core.bounds is not None:
            fresh = (ticks[:, -1] > 0) & ~self._warned
            r = self.core.robot
            for bi, j in zip(*np.nonzero(fresh)):
                dims = [d for k, d in enumerate(DIMS) if ticks[bi, k, j] > 0]
                warnings.warn(f"{r.name} env {bi}: joint {r.joint_names[j]} left the fitted "
                              f"model's envelope ({', '.join(dims)})", RuntimeWarning, stacklevel=2)
            self._warned |= fresh
        out_s = info["envelope_outside_s"]
        info = {k: v for k, v in info.items() if k not in ("truncation", "envelope_outside_s", "effort")}
        info["envelope_outside_s"] = {d: out_s[:, k] for k, d in enumerate(DIMS + ("any",))}
        return obs.copy(), reward, term, trunc, info


#: ControlState fields by their NativeBatch attribute name
_CTL = {"steps": "step", "rng": "rng", "prev_target": "prev_target", "filt": "filt", "fifo": "fifo",
        "obs_qpos": "obs_qpos", "obs_qvel": "obs_qvel", "last_action": "last_action", "ticks": "outside_ticks",
        "net_hist": "net_hist", "rand_keys": "rand_key"}


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
