"""Environments with the actuator in the loop: one core (:mod:`~actuatorlab.envs.core`: reset / step
over an :class:`EnvSpec`, written once) with an MJX (functional, Playground style) and a native
MuJoCo backend, the MJX and Gymnasium wrappers, one timing contract, the operating envelope counted
at run time, and one registry (``make_env(robot, task)``; docs/envs.md)."""

from .actuators import Actuator, load_actuator
from .batching import vmap_chunked
from .core import ControlState, EnvCore, EnvSpec, EnvState
from .envelope import DIMS, EnvelopeBounds, envelope_bounds
from .gym_env import ActuatorEnv, ActuatorVectorEnv
from .mjx_env import MjxEnv
from .registry import ENVS, make_env, make_policy_env
from .tasks import PostureTask
from .timing import TimingContract

__all__ = ["Actuator", "load_actuator", "DIMS", "EnvelopeBounds", "envelope_bounds", "ControlState", "EnvCore",
           "EnvSpec", "EnvState", "MjxEnv", "ActuatorEnv", "ActuatorVectorEnv", "PostureTask", "TimingContract", "ENVS", "make_env", "make_policy_env",
           "vmap_chunked"]
