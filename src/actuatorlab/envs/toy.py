"""Tiny policy environments (docs/policy.md; ``make_env("toy", task)``) for testing PPO and the schedules in seconds.

Both follow the policy-environment protocol (docs/policy.md: ``reset(rng,
env_params)``, ``step(state, action, env_params)``, actions in [-1, 1], no auto-reset) and take a
homotopy parameter ``alpha`` in ``env_params`` that changes their dynamics continuously, like the
locomotion environment's model homotopy: the policy trained at alpha = 0 must adapt when alpha
grows. Everything is float32 and pure JAX.

* ``point_mass``: a planar point mass pushed to the origin. Mass ``m = 1 + 3 alpha`` [kg], force
  ``2 a`` [N] per axis, semi-implicit Euler with ``dt = 0.05`` s, viscous damping 0.1 [N s/m].
  Reward ``-|p|^2 - 0.01 |a|^2`` per step; the episode *terminates* when ``|p| > 3`` m (reward
  -10 that step) and is *truncated* after 50 steps. Start: position uniform in [-1, 1]^2 m, at rest.
* ``pendulum``: a torque-limited pendulum to be held upright. Mass ``0.5 + 0.5 alpha`` [kg] at
  length 1 m, torque ``2 a`` [N m], ``dt = 0.05`` s; angle 0 = upright. Reward ``cos(theta) -
  0.01 omega^2 - 0.001 a^2``; truncated after 100 steps, never terminated. Start: angle uniform in
  [-pi, pi], speed uniform in [-1, 1] rad/s.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

__all__ = ["ToyState", "PointMass", "Pendulum"]

F32 = jnp.float32


class ToyState(NamedTuple):
    """State of a toy environment (the policy-environment state fields)."""

    x: jax.Array        # (n,) physical state
    t: jax.Array        # () int32 steps since reset
    obs: jax.Array      # (observation_size,) float32
    reward: jax.Array   # () float32
    done: jax.Array     # () float32, 1 = terminated or truncated
    metrics: dict       # name -> () float32
    info: dict          # "truncation": () float32


def _f(x):
    return jnp.asarray(x, F32)


class PointMass:
    """Planar point mass to the origin (see the module docstring)."""

    observation_size = 4
    action_size = 2
    dt, limit, horizon = 0.05, 3.0, 50

    def default_env_params(self) -> dict[str, jax.Array]:
        return {"alpha": _f(0.0)}

    def reset(self, rng, env_params) -> ToyState:
        p = jax.random.uniform(rng, (2,), F32, -1.0, 1.0)
        x = jnp.concatenate([p, jnp.zeros((2,), F32)])
        return ToyState(x, jnp.zeros((), jnp.int32), x, _f(0.0), _f(0.0), {"distance": jnp.linalg.norm(p)},
                        {"truncation": _f(0.0)})

    def step(self, state: ToyState, action, env_params) -> ToyState:
        a = jnp.clip(action.astype(F32), -1.0, 1.0)
        m = 1.0 + 3.0 * env_params["alpha"].astype(F32)
        p, v = state.x[:2], state.x[2:]
        v = v + self.dt * (2.0 * a - 0.1 * v) / m
        p = p + self.dt * v
        x = jnp.concatenate([p, v])
        d = jnp.linalg.norm(p)
        t = state.t + 1
        fell = d > self.limit
        trunc = (t >= self.horizon) & ~fell
        reward = jnp.where(fell, -10.0, -jnp.sum(p ** 2) - 0.01 * jnp.sum(a ** 2)).astype(F32)
        done = (fell | trunc).astype(F32)
        return ToyState(x, t, x, reward, done, {"distance": d}, {"truncation": trunc.astype(F32)})


class Pendulum:
    """Pendulum held upright (see the module docstring)."""

    observation_size = 3
    action_size = 1
    dt, horizon, g, length = 0.05, 100, 9.81, 1.0

    def default_env_params(self) -> dict[str, jax.Array]:
        return {"alpha": _f(0.0)}

    def _obs(self, x):
        return jnp.stack([jnp.cos(x[0]), jnp.sin(x[0]), x[1]]).astype(F32)

    def reset(self, rng, env_params) -> ToyState:
        k1, k2 = jax.random.split(rng)
        x = jnp.stack([jax.random.uniform(k1, (), F32, -jnp.pi, jnp.pi), jax.random.uniform(k2, (), F32, -1.0, 1.0)])
        return ToyState(x, jnp.zeros((), jnp.int32), self._obs(x), _f(0.0), _f(0.0),
                        {"upright": jnp.cos(x[0])}, {"truncation": _f(0.0)})

    def step(self, state: ToyState, action, env_params) -> ToyState:
        a = jnp.clip(action.astype(F32), -1.0, 1.0)[0]
        m = 0.5 + 0.5 * env_params["alpha"].astype(F32)
        th, om = state.x[0], state.x[1]
        # upright = 0: gravity pushes away from it (theta'' = g/l sin(theta) + tau / (m l^2))
        om = jnp.clip(om + self.dt * (self.g / self.length * jnp.sin(th) + 2.0 * a / (m * self.length ** 2)), -8.0, 8.0)
        th = jnp.mod(th + self.dt * om + jnp.pi, 2 * jnp.pi) - jnp.pi
        x = jnp.stack([th, om]).astype(F32)
        t = state.t + 1
        trunc = t >= self.horizon
        reward = (jnp.cos(th) - 0.01 * om ** 2 - 0.001 * a ** 2).astype(F32)
        return ToyState(x, t, self._obs(x), reward, trunc.astype(F32), {"upright": jnp.cos(th)},
                        {"truncation": trunc.astype(F32)})
