"""One simulator interface, three backends: :func:`rollout` with ``backend="native" | "mjx" | "scan"``,
:func:`actuatorlab.sim.model_rollout.rollout_model` is the same for a model file (``rollout(model, inputs, state) -> (state,
outputs)``).

Every backend takes and returns the same types (:class:`~actuatorlab.sim.arm_step.ArmInputs`,
:class:`~actuatorlab.sim.arm_step.ArmState`, :class:`~actuatorlab.sim.arm_step.ArmOutputs`):

* ``"native"``: :func:`actuatorlab.sim.arm_native.rollout_native`, native MuJoCo, NumPy, a
  leading batch axis allowed; the fastest whole-robot backend, no gradients (fits by CMA-ES,
  evaluation, the gym env);
* ``"mjx"``: :func:`actuatorlab.sim.arm.make_mjx_rollout` under ``jax.jit`` (compiled once per
  robot and timing, then cached); one arm per call. For ``vmap``/``grad`` or MJX model fields
  build the rollout with :func:`~actuatorlab.sim.arm.make_mjx_rollout` directly.
  Both run the common physics step of :mod:`actuatorlab.sim.arm_step` on MuJoCo's multibody
  dynamics;
* ``"scan"``: :func:`actuatorlab.sim.scan.rollout_scan`, one-joint bench robots only
  (``bench:revolute`` / ``bench:prismatic``, :mod:`actuatorlab.robots.bench`): the one-joint
  replay (:func:`actuatorlab.sim.rollout.rollout_batch`, the closed-form pendulum / carriage plant,
  no MuJoCo) that fits and evaluates one-joint logs; a leading batch axis allowed; jit / grad in
  the parameters. Fields it does not produce are NaN (its module docstring). A robot with more
  than one joint is a one-line :class:`~actuatorlab.errors.ModelError`.

Defaults: :func:`rollout` runs ``"native"`` for every robot, a bench too (what its callers
always got); :func:`~actuatorlab.sim.model_rollout.rollout_model` runs ``"scan"`` for a one-joint
model (the simulator it was fitted with: fast, differentiable) and ``"native"`` for a robot model.
"""

from __future__ import annotations

import weakref
from typing import Callable

import jax
import mujoco

from ..errors import UnknownNameError
from ..robots.loader import Robot
from .arm import make_mjx_rollout
from .arm_native import rollout_native
from .arm_step import ArmConfig, ArmInputs, ArmOutputs, ArmState
from .scan import rollout_scan

__all__ = ["BACKENDS", "rollout"]

#: the backends :func:`rollout` knows
BACKENDS = ("native", "mjx", "scan")
_MJX: dict[tuple[int, ArmConfig], tuple[weakref.ref, Callable]] = {}


def _mjx_rollout(robot: Robot, cfg: ArmConfig) -> Callable:
    """``jax.jit(make_mjx_rollout(robot, cfg))``, built once per (robot object, cfg)."""
    key = (id(robot), cfg)
    hit = _MJX.get(key)
    if hit is not None and hit[0]() is robot:
        return hit[1]
    fn = jax.jit(make_mjx_rollout(robot, cfg))
    _MJX[key] = (weakref.ref(robot, lambda _: _MJX.pop(key, None)), fn)
    return fn


def rollout(robot: Robot, params, inputs: ArmInputs, state0: ArmState, *, backend: str = "native",
            cfg: ArmConfig | None = None, model: mujoco.MjModel | None = None) -> tuple[ArmState, ArmOutputs]:
    """(final state, outputs (T, ...)) of ``robot`` driven by ``inputs`` from ``state0``.

    params: parameter sets (name -> (n_groups,), ``robot.nominal_params()``; native also (B,
    n_groups) per environment) or a learned model (:class:`~actuatorlab.sim.arm_learned.LearnedArm`,
    native and mjx); backend: ``"native"`` | ``"mjx"`` | ``"scan"`` (module docstring; default
    native); cfg: the timing (default the robot's); model: native only, a model from
    :func:`~actuatorlab.sim.arm_native.native_model` to reuse.
    """
    if backend not in BACKENDS:
        raise UnknownNameError("simulator backend", backend, list(BACKENDS))
    cfg = cfg or ArmConfig.from_robot(robot)
    if backend == "native":
        return rollout_native(robot, params, inputs, state0, cfg, model=model)
    if backend == "scan":
        return rollout_scan(robot, params, inputs, state0, cfg)
    return _mjx_rollout(robot, cfg)(params, inputs, state0)
