"""Recipes of the homotopy benchmarks that were measured and not adopted (bench/journal/homotopy.md);
the library keeps the adopted behaviour only.

* :func:`restat_hook` (rule R30, "Ninth run", not adopted): at each change of alpha PPO's running
  observation statistics keep the weight of at most ``keep`` observations (same mean and variance,
  so the network inputs do not jump); the next updates re-estimate them from the new model. Both
  measured seeds reached 90 % later than without it (3.19 / 2.40 M against 2.80 / 2.26 M).
  ``python bench/homotopy.py ... --restat 5120``; ``train_policy(..., stage_hook=restat_hook(5120))``.
* :func:`with_homotopy` (not adopted: the eighth run's heavier armature floor ``a_floor=0.1``, rule
  R22's ``eps=0.05``, rule R24's ``keep`` of the feet): the trot env with another homotopy floor.
  ``python bench/homotopy.py ... --homotopy-opt a_floor=0.1``; ``python bench/locomotion.py --only
  stand --stand-keep '{"LF_SHANK": 1, ...}'``.
"""

from __future__ import annotations

import copy
from typing import Any, Callable

import jax.numpy as jnp

from actuatorlab.policy.ppo import RunningStats, TrainState
from actuatorlab.sim.homotopy import make_homotopy


def restat_stats(stats: RunningStats, keep: int) -> RunningStats:
    """The observation statistics with their weight cut to at most ``keep`` observations: the same
    mean and variance, but the next updates' observations count ``n / (keep + n)`` instead of
    ``n / (n_seen + n)``."""
    return stats._replace(n_seen=jnp.minimum(stats.n_seen, jnp.asarray(float(keep), stats.n_seen.dtype)))


def restat_hook(keep: int) -> Callable[[TrainState, float], TrainState]:
    """A ``train_policy`` stage hook: :func:`restat_stats` at every change of alpha."""
    if isinstance(keep, bool) or int(keep) != keep or int(keep) < 1:
        raise ValueError(f"restat: an integer >= 1 (observations kept at a stage change), got {keep!r}")

    def hook(ts: TrainState, alpha: float) -> TrainState:
        return ts._replace(stats=restat_stats(ts.stats, int(keep)))

    return hook


def with_homotopy(env: Any, *, eps: float = 0.01, a_floor: float = 0.01, keep: dict | None = None) -> Any:
    """A copy of a locomotion env (``make_policy_env("anymal_c", "trot")``) whose model homotopy has
    another floor (:func:`actuatorlab.sim.homotopy.make_homotopy`'s ``eps``, ``a_floor``, ``keep``)."""
    new = copy.copy(env)
    new.hom = make_homotopy(env.core.mj_model, env.core.home, eps=eps, a_floor=a_floor, keep=keep)
    return new
