"""One registry of environments: ``make_env(robot, task, **options)``.

| robot | task | environment | protocol |
|---|---|---|---|
| any robot config | ``posture`` | :class:`~actuatorlab.envs.tasks.PostureTask` on the environment core: ``api="mjx"`` (default) :class:`~actuatorlab.envs.mjx_env.MjxEnv`, ``"gymnasium"`` :class:`~actuatorlab.envs.gym_env.ActuatorEnv`, ``"gymnasium-vector"`` :class:`~actuatorlab.envs.gym_env.ActuatorVectorEnv`, ``"native"`` :class:`~actuatorlab.envs.gym_env.NativeBatch` | core (docs/envs.md) |
| ``anymal_c`` | ``trot`` | :class:`~actuatorlab.envs.locomotion.LocomotionEnv` | policy env (docs/policy.md) |
| ``toy`` | ``point_mass``, ``pendulum`` | :mod:`actuatorlab.envs.toy` | policy env |

``options`` go to the environment's constructor (posture: the fields of
:class:`~actuatorlab.envs.core.EnvSpec` plus ``api`` and ``num_envs``; trot: e.g.
``actuator="sea"``, ``physics_dt=0.004``). A failed lookup raises a one-line error listing what
exists. :func:`make_policy_env` looks up the policy environments only (what ``train-policy``
trains on).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from ..errors import ModelError, UnknownNameError
from .gym_env import ActuatorEnv, ActuatorVectorEnv, NativeBatch
from .locomotion import LocomotionEnv
from .mjx_env import MjxEnv
from .tasks import PostureTask
from .toy import Pendulum, PointMass

__all__ = ["EnvEntry", "ENVS", "ANY_ROBOT", "UnknownEnvError", "make_env", "make_policy_env"]

#: the robot key of a task that runs on any robot config
ANY_ROBOT = "*"


class UnknownEnvError(UnknownNameError, ModelError):
    """No environment of that robot / task; the message lists what exists."""


@dataclass(frozen=True)
class EnvEntry:
    """make: (robot, **options) -> environment; policy: follows the policy-environment protocol
    (``observation_size``, ``action_size``, ``default_env_params()``, ``reset(rng, env_params)``,
    ``step(state, action, env_params)``; docs/policy.md); doc: one line."""

    make: Callable[..., Any]
    policy: bool
    doc: str


_APIS = {"mjx": MjxEnv, "gymnasium": ActuatorEnv, "gymnasium-vector": ActuatorVectorEnv, "native": NativeBatch}


def _posture(robot: Any, api: str = "mjx", **options: Any):
    if api not in _APIS:
        raise UnknownEnvError("posture env api", api, list(_APIS))
    options.setdefault("task", PostureTask())
    return _APIS[api](robot, options.pop("model", None), **options)


ENVS: dict[tuple[str, str], EnvEntry] = {
    (ANY_ROBOT, "posture"): EnvEntry(_posture, False, "track a posture drawn per episode (any robot config)"),
    ("anymal_c", "trot"): EnvEntry(LocomotionEnv, True, "velocity tracking (trot) with the model homotopy"),
    ("toy", "point_mass"): EnvEntry(lambda robot, **kw: PointMass(**kw), True, "planar point mass to the origin"),
    ("toy", "pendulum"): EnvEntry(lambda robot, **kw: Pendulum(**kw), True, "pendulum held upright"),
}


def _entry(robot: str, task: str, policy_only: bool) -> EnvEntry:
    envs = {k: e for k, e in ENVS.items() if e.policy or not policy_only}
    named = sorted({r for r, _ in envs if r != ANY_ROBOT})
    generic = [t for r, t in envs if r == ANY_ROBOT]
    if (robot, task) in envs:
        return envs[(robot, task)]
    if task in generic and robot != "toy":
        return envs[(ANY_ROBOT, task)]
    if robot not in named and not generic:
        raise UnknownEnvError("robot", robot, named)
    if robot not in named:
        raise UnknownEnvError(f"task for robot {robot!r}", task, generic)
    raise UnknownEnvError(f"task of robot {robot!r}", task,
                          [t for r, t in envs if r == robot] + (generic if robot != "toy" else []))


def make_env(robot: Any, task: str, **options: Any):
    """The environment ``task`` of ``robot`` (module docstring) with ``options``."""
    name = robot if isinstance(robot, str) else getattr(robot, "name", str(robot))
    e = _entry(name, task, policy_only=False)
    return e.make(robot, **options)


def make_policy_env(robot: str, task: str, **options: Any):
    """A policy environment (docs/policy.md) by robot and task name; unknown names raise
    :class:`UnknownEnvError` (a :class:`~actuatorlab.errors.ModelError`) listing what exists."""
    return _entry(robot, task, policy_only=True).make(robot, **options)
