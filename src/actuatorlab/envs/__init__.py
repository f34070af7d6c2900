"""Environments with the actuator in the loop: MJX (functional, Playground style) and Gymnasium
(native MuJoCo), one timing contract, the operating envelope counted at run time (docs/envs.md)."""

from .actuators import Actuator, load_actuator
from .batching import vmap_chunked
from .envelope import DIMS, EnvelopeBounds, envelope_bounds
from .mjx_env import ControlState, EnvState, MjxEnv
from .tasks import PostureTask
from .timing import TimingContract
from ..errors import ModelError

__all__ = ["Actuator", "load_actuator", "DIMS", "EnvelopeBounds", "envelope_bounds", "ControlState", "EnvState",
           "MjxEnv", "PostureTask", "TimingContract", "POLICY_ENVS", "make_policy_env", "vmap_chunked"]

#: policy environments (docs/policy.md): robot -> task -> "module:Class" (imported when made)
POLICY_ENVS = {"anymal_c": {"trot": "actuatorlab.envs.locomotion:LocomotionEnv"}}


def make_policy_env(robot: str, task: str, **kw):
    """A policy environment (``observation_size``, ``action_size``, ``default_env_params()``,
    ``reset(rng, env_params)``, ``step(state, action, env_params)``; docs/policy.md) by robot and
    task name; ``kw`` go to its constructor (e.g. ``actuator="sea"``, ``physics_dt=0.004``).
    Unknown names raise :class:`~actuatorlab.errors.ModelError` listing what exists."""
    import importlib


    if robot not in POLICY_ENVS:
        raise ModelError(f"unknown policy-env robot {robot!r}; available: {', '.join(sorted(POLICY_ENVS))}")
    tasks = POLICY_ENVS[robot]
    if task not in tasks:
        raise ModelError(f"unknown task {task!r} for robot {robot!r}; available: {', '.join(sorted(tasks))}")
    mod, cls = tasks[task].split(":")
    return getattr(importlib.import_module(mod), cls)(robot, **kw)
