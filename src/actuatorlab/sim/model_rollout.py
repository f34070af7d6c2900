"""The simulator interface of a model file: ``rollout_model(model, inputs, state) -> (state, outputs)``.

:func:`rollout_model` runs :func:`actuatorlab.sim.backends.rollout` on the robot of an analytic
:class:`~actuatorlab.models.actuator_model.ActuatorModel` (:func:`model_robot`): a one-joint model on
its bench robot (default backend ``"scan"``, the one-joint replay it was fitted with), a robot model
on its robot with its model and fitted parameter sets (default ``"native"``). Learned kinds: a
one-joint learned model rolls out through :mod:`actuatorlab.learned.joint` (above this package); a
whole-robot one is a :class:`~actuatorlab.sim.arm_learned.LearnedArm` that ``rollout(robot,
learned_arm, ...)`` runs on native or mjx, loaded by ``actuatorlab.learned.arm.load_arm_model``.
"""

from __future__ import annotations

import weakref

from ..errors import ModelError
from ..models.actuator_model import ActuatorModel
from ..robots.loader import Robot, load_robot
from .arm_data import _param_sets, robot_with_model
from .arm_step import ArmConfig, ArmInputs, ArmOutputs, ArmState
from .backends import rollout

__all__ = ["model_robot", "rollout_model"]

_ROBOTS: dict[int, tuple[weakref.ref, Robot, dict]] = {}


def model_robot(model: ActuatorModel) -> tuple[Robot, dict]:
    """(robot, parameter sets (name -> (n_groups,))) of an analytic model file, built once per
    model object: a one-joint model's bench robot with its fitted values
    (:func:`actuatorlab.robots.bench.bench_config`), a robot model's robot with its model and fitted
    parameter sets. Learned kinds are a one-line :class:`~actuatorlab.errors.ModelError`: a one-joint
    learned model rolls out through :mod:`actuatorlab.learned.joint`, a whole-robot one as
    ``rollout(robot, learned_arm, ...)`` after ``actuatorlab.learned.arm.load_arm_model``."""
    hit = _ROBOTS.get(id(model))
    if hit is not None and hit[0]() is model:
        return hit[1], hit[2]
    if model.kind != "analytic":
        how = ("roll it out through actuatorlab.learned.joint" if model.one_joint else
               "load it with actuatorlab.learned.arm.load_arm_model and call rollout(robot, learned_arm, ...)")
        raise ModelError(f"{model.where}: a {model.kind} model has no parameter sets to roll out here; {how}")
    robot = load_robot(model)
    if model.one_joint:
        params = robot.nominal_params()
    else:
        robot, params = _param_sets(robot_with_model(robot, model.model) if model.model else robot,
                                    dict(model.parameters))
    key = id(model)
    _ROBOTS[key] = (weakref.ref(model, lambda _: _ROBOTS.pop(key, None)), robot, params)
    return robot, params


def rollout_model(model: ActuatorModel, inputs: ArmInputs, state0: ArmState, *, backend: str | None = None,
                  cfg: ArmConfig | None = None) -> tuple[ArmState, ArmOutputs]:
    """:func:`rollout` of an analytic model file on its robot (:func:`model_robot`): the simulator
    interface ``rollout(model, inputs, state) -> (state, outputs)``. backend: default ``"scan"``
    for a one-joint model, ``"native"`` for a robot model; cfg: the timing (default the robot's;
    the one-joint fit's own is ``ArmConfig.from_robot(robot, physics_dt=robot.control_dt,
    substeps=1, law_every=1)``, :mod:`actuatorlab.sim.scan`)."""
    robot, params = model_robot(model)
    backend = backend or ("scan" if model.one_joint else "native")
    return rollout(robot, params, inputs, state0, backend=backend, cfg=cfg)
