"""Tasks of the environments: observation, reward and termination, written over an array
namespace ``xp`` (numpy or jax.numpy) so that the MJX and the Gymnasium environments share them.

A task is any object with these methods (``env`` is the environment, which exposes ``qadr``,
``dadr``, ``home`` (nq,), ``lo``/``hi`` (n,) joint ranges, ``n_joints``)::

    reset(env, key, xp) -> dict                       per-episode task data (pytree of arrays)
    observe(env, qpos, qvel, data, last_action, xp)   observation (obs_size,) from the OBSERVED
                                                      (latency-delayed) state
    reward(env, qpos, qvel, data, action, last_action, xp) -> (reward, {name: scalar})
    done(env, qpos, qvel, data, xp) -> bool           termination (true state)
    obs_size(env) -> int

``key`` is a JAX PRNG key in both environments (the Gymnasium one draws with ``jax.random`` too,
so both sample the same episode from the same seed). The legged trot task comes later; the
default is :class:`PostureTask`.
"""

from __future__ import annotations

from dataclasses import dataclass

import jax
import numpy as np

__all__ = ["PostureTask"]


@dataclass(frozen=True)
class PostureTask:
    """Track a target posture drawn per episode.

    goal = home + U(-1, 1) * min(goal_fraction * (hi - lo) / 2, max_offset) per joint, clipped to
    the joint range [rad | m]; observation [q - home, dq_scale * dq, goal - q, last action]
    (4 n); reward = -mean((q - goal)^2) - action_rate_weight * mean((a - a_prev)^2); done when the
    state is not finite or (legged robots) the base falls below ``min_base_height`` [m].
    """

    goal_fraction: float = 0.25
    max_offset: float = 0.5
    dq_scale: float = 0.1
    action_rate_weight: float = 0.01
    min_base_height: float | None = None

    def obs_size(self, env) -> int:
        return 4 * env.n_joints

    def reset(self, env, key, xp):
        home = np.asarray(env.home)[env.qadr]
        span = np.where(np.isfinite(env.hi - env.lo), 0.5 * (env.hi - env.lo), 1.0)
        amp = np.minimum(self.goal_fraction * span, self.max_offset)
        u = jax.random.uniform(key, (env.n_joints,), jax.numpy.float32, -1.0, 1.0)  # same draw in any precision
        u = xp.asarray(np.asarray(u)) if xp is np else u
        return {"goal": xp.clip(home + amp * u, env.lo, env.hi)}

    def observe(self, env, qpos, qvel, data, last_action, xp):
        q, dq = qpos[..., env.qadr], qvel[..., env.dadr]
        home = np.asarray(env.home)[env.qadr]
        return xp.concatenate([q - home, self.dq_scale * dq, data["goal"] - q, last_action], axis=-1)

    def reward(self, env, qpos, qvel, data, action, last_action, xp):
        err = xp.mean((qpos[..., env.qadr] - data["goal"]) ** 2, axis=-1)
        rate = xp.mean((action - last_action) ** 2, axis=-1)
        return -err - self.action_rate_weight * rate, {"posture_error": err, "action_rate": rate}

    def done(self, env, qpos, qvel, data, xp):
        bad = ~(xp.all(xp.isfinite(qpos), axis=-1) & xp.all(xp.isfinite(qvel), axis=-1))
        if self.min_base_height is not None and env.free_base:
            bad = bad | (qpos[..., 2] < self.min_base_height)
        return bad
