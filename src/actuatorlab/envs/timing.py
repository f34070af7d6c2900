"""The timing contract between a policy and the actuator model (one documented dataclass).

Four clocks, slowest first (all whole multiples of the next)::

    policy step     policy_dt  = decimation x command_dt       the env's step(); one action
    command tick    command_dt = robot.control_dt              host -> servo command (the rate the
                                                                actuator model was fitted at; its
                                                                fitted ``delay`` is on this grid)
    servo tick      firmware_dt = robot.firmware_dt            the firmware law's evaluation
    physics step    physics_dt  = robot.physics_dt             MuJoCo / MJX step

Per policy step with action a (n,) [1] and command ticks j = 0 .. D-1 (D = decimation)::

    target   = clip(offset + scale * clip(a, -action_clip, action_clip), lo, hi)   [rad | m]
               (offset: the home posture ("home") or 0 ("zero"); lo, hi: the joint's MJCF range
               when ``clip_to_range`` and the joint is limited)
    c_j      = target                                           hold
             = prev + (target - prev) (j + 1) / D               interpolate (c_{D-1} = target:
                                                                reached exactly at the last
                                                                command tick of the step)
             = target + (f - target) (1 - a_f)^(j + 1)          filter, a_f = 1 - exp(-command_dt /
                                                                target_tau), f carried over steps
    sent_j   = c_{j - command_latency}                          the first ``command_latency`` ticks
                                                                of a step send the previous step's
                                                                commands (a FIFO of that length)
    actuator = the robot's model (sim.arm): its own fitted ``delay``, then the servo-side target
               between command ticks (``servo_target``: hold | linear | filter, default the
               robot config's), the firmware law every servo tick, the motor every physics step
    obs      = function of the state ``obs_latency`` command ticks ago (a FIFO of joint/base
               states sampled at the end of every command tick)

History initialisation at reset (``history_init``): "state" fills the command FIFO, the previous
target, the filter state and the actuator's delay line with the reset posture (a servo holding
its position) and the observation FIFO with the reset state; "zeros" fills them with zeros (the
convention of some training stacks; the first ``command_latency`` ticks then drive towards 0).

Everything here is written over an array namespace ``xp`` (numpy or jax.numpy) so that the MJX
and the native (Gymnasium) environments run the same contract.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import ModelError

__all__ = ["TimingContract", "scale_action", "command_grid", "apply_latency", "push_samples"]

_TARGETS = ("hold", "interpolate", "filter")


@dataclass(frozen=True)
class TimingContract:
    """Policy-to-actuator timing (see the module docstring for the exact law).

    decimation: command ticks per policy step [1] (policy_dt = decimation * robot.control_dt);
    target: what the command does between policy steps: "hold" | "interpolate" | "filter";
    target_tau [s]: time constant of "filter";
    command_latency: command ticks [1] between the policy's action and the first tick that sends it
        (on top of the fitted model's own ``delay``);
    obs_latency: command ticks [1] between the state and the observation of it;
    action_scale [rad | m per unit action]: scalar or (n,);
    action_clip [1]: bound on |action| before scaling (None: no clip);
    action_offset: "home" (the robot's home posture) or "zero";
    clip_to_range: also clip the target to the joints' MJCF ranges;
    history_init: "state" | "zeros" (module docstring);
    servo_target: None (the robot config's) or "hold" | "linear" | "filter": the target the servo
        firmware sees between command ticks (:class:`~actuatorlab.sim.arm.ArmConfig`).
    """

    decimation: int = 1
    target: str = "hold"
    target_tau: float = 0.02
    command_latency: int = 0
    obs_latency: int = 0
    action_scale: Any = 1.0
    action_clip: float | None = 1.0
    action_offset: str = "home"
    clip_to_range: bool = True
    history_init: str = "state"
    servo_target: str | None = None

    def __post_init__(self):
        if int(self.decimation) < 1:
            raise ModelError(f"TimingContract: decimation must be >= 1, got {self.decimation}")
        if self.target not in _TARGETS:
            raise ModelError(f"TimingContract: target must be one of {', '.join(_TARGETS)}, got {self.target!r}")
        if self.command_latency < 0 or self.obs_latency < 0:
            raise ModelError("TimingContract: latencies must be >= 0 command ticks")
        if self.target == "filter" and not self.target_tau > 0:
            raise ModelError("TimingContract: target_tau must be > 0 s")
        if self.action_offset not in ("home", "zero"):
            raise ModelError(f"TimingContract: action_offset must be home or zero, got {self.action_offset!r}")
        if self.history_init not in ("state", "zeros"):
            raise ModelError(f"TimingContract: history_init must be state or zeros, got {self.history_init!r}")
        if self.servo_target not in (None, "hold", "linear", "filter"):
            raise ModelError(f"TimingContract: servo_target must be None, hold, linear or filter, got "
                             f"{self.servo_target!r}")
        if self.action_clip is not None and not self.action_clip > 0:
            raise ModelError("TimingContract: action_clip must be > 0 or None")

    def filter_gain(self, command_dt: float) -> float:
        """a_f = 1 - exp(-command_dt / target_tau) of the "filter" law."""
        return 1.0 - math.exp(-command_dt / self.target_tau)

    def table(self, robot) -> list[tuple[str, str]]:
        """(quantity, value) rows of this contract on ``robot`` (for logs and docs)."""
        cdt = robot.control_dt
        return [("policy rate", f"{1 / (self.decimation * cdt):g} Hz ({self.decimation} command ticks)"),
                ("command rate", f"{1 / cdt:g} Hz"), ("servo (firmware) rate", f"{1 / robot.firmware_dt:g} Hz"),
                ("physics rate", f"{1 / robot.physics_dt:g} Hz"), ("target between policy steps", self.target),
                ("command latency", f"{self.command_latency} ticks ({self.command_latency * cdt * 1e3:g} ms)"),
                ("observation latency", f"{self.obs_latency} ticks ({self.obs_latency * cdt * 1e3:g} ms)"),
                ("action", f"{self.action_offset} + {self.action_scale} * clip(a, +-{self.action_clip})"),
                ("history at reset", self.history_init)]


def scale_action(c: TimingContract, xp, action, offset, lo, hi):
    """Joint target (..., n) [rad | m] of an action (..., n) [1] (module docstring); ``lo``/``hi``
    (n,) the range bounds (+-inf where the joint is unlimited or ``clip_to_range`` is off)."""
    a = action if c.action_clip is None else xp.clip(action, -c.action_clip, c.action_clip)
    t = offset + xp.asarray(c.action_scale) * a
    return xp.clip(t, lo, hi) if c.clip_to_range else t


def command_grid(c: TimingContract, xp, prev, target, filt, command_dt: float):
    """Commands (..., D, n) of one policy step and the filter state after it (..., n).

    ``prev``: the previous policy step's target (interpolate); ``filt``: the filter state
    (filter)."""
    D = int(c.decimation)
    tgt = target[..., None, :]
    if c.target == "hold":
        return xp.broadcast_to(tgt, target.shape[:-1] + (D, target.shape[-1])), filt
    j1 = np.arange(1, D + 1, dtype=float)[:, None]
    if c.target == "interpolate":
        return prev[..., None, :] + (tgt - prev[..., None, :]) * (j1 / D), filt
    decay = (1.0 - c.filter_gain(command_dt)) ** j1
    grid = tgt + (filt[..., None, :] - tgt) * decay
    return grid, grid[..., -1, :]


def apply_latency(xp, fifo, grid):
    """(sent (..., D, n), fifo') with ``fifo`` (..., k, n) the k commands still in flight, oldest
    first: the first k ticks send them, the last k commands of ``grid`` stay in flight."""
    k, D = fifo.shape[-2], grid.shape[-2]
    if k == 0:
        return grid, fifo
    seq = xp.concatenate([fifo, grid], axis=-2)
    return seq[..., :D, :], seq[..., D:, :]


def push_samples(xp, fifo, samples):
    """Observation FIFO (..., k + 1, m) after appending ``samples`` (..., D, m) (oldest first);
    entry 0 is the sample k command ticks old."""
    L = fifo.shape[-2]
    seq = xp.concatenate([fifo, samples], axis=-2)
    return seq[..., seq.shape[-2] - L:, :]
