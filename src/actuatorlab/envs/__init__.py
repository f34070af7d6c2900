"""Environments with the actuator in the loop: MJX (functional, Playground style) and Gymnasium
(native MuJoCo), one timing contract, the operating envelope counted at run time (docs/envs.md)."""

from .actuators import Actuator, load_actuator
from .envelope import DIMS, EnvelopeBounds, envelope_bounds
from .mjx_env import ControlState, EnvState, MjxEnv
from .tasks import PostureTask
from .timing import TimingContract

__all__ = ["Actuator", "load_actuator", "DIMS", "EnvelopeBounds", "envelope_bounds", "ControlState", "EnvState",
           "MjxEnv", "PostureTask", "TimingContract"]
