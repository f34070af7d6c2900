"""The parameter space of a whole-robot fit (:class:`ArmSpace`), the choice of what is fitted
(:func:`fit_setup`) and the result layout every whole-robot fitter returns (:func:`fit_result`):
shared by the CMA-ES fit (:mod:`actuatorlab.identify.arm_fit`) and the gradient fit
(:mod:`actuatorlab.identify.arm_grad`)."""

from __future__ import annotations

import dataclasses
from typing import Any, Iterable

import numpy as np

from ..errors import DataError, ModelError
from ..logs.format import Trajectory
from ..models.params import PARAMS, bounds_for
from ..models.registry import get_model
from ..robots.fixed_base import on_fixed_base
from ..robots.loader import Robot
from ..sim.arm_data import _check_name, _robot, joint_type_robot, model_params, robot_with_model
from .space import unit_to_theta, unit_to_z

__all__ = ["DEFAULT_FIT_PARAMS", "BOX_FACTORS", "ArmSpace", "fit_setup", "fit_result", "robot_for_log", "log_groups"]

#: actuator parameters fitted by default
DEFAULT_FIT_PARAMS: tuple[str, ...] = ("kt", "friction_base", "friction_viscous", "armature")
#: box of a positive parameter, as factors of its nominal value (log scale)
BOX_FACTORS: tuple[float, float] = (0.2, 5.0)


@dataclasses.dataclass(frozen=True)
class ArmSpace:
    """Fitted robot parameters and the map between their values and z in [0, 1]^(P G).

    names: P parameter names; G: fitted parameter sets (groups, or joints when fitted per joint;
    ``sets`` their indices among all sets, the others stay nominal);
    lower, upper: (P G,) bounds, parameter-major (``theta[a G + g]`` is parameter a of set g);
    log: (P G,) True where the parameter moves on a log scale. A parameter with positive nominal
    value p0 moves log-uniformly in [0.2 p0, 5 p0] (:data:`BOX_FACTORS`); one whose nominal is 0
    moves linearly in the "servo" profile of :data:`~actuatorlab.models.params.BOUND_PROFILES`.
    The map to and from z is the one of every search box (:func:`~actuatorlab.identify.space.
    unit_to_theta`, the one-joint :class:`~actuatorlab.identify.space.ParamSpace`'s).
    """

    names: tuple[str, ...]
    G: int
    lower: np.ndarray
    upper: np.ndarray
    log: np.ndarray
    nominal: dict
    sets: tuple[int, ...] = ()

    @staticmethod
    def build(names: Iterable[str], nominal: dict, sets: Iterable[int] | None = None) -> "ArmSpace":
        """Box of ``names`` around ``nominal`` (name -> (n_sets,)) for the parameter sets ``sets``
        (indices; default all). Sets not fitted keep their nominal values."""
        names = tuple(names)
        n_sets = len(next(iter(nominal.values())))
        sets = tuple(range(n_sets)) if sets is None else tuple(int(g) for g in sets)
        if not sets:
            raise ModelError("ArmSpace: no parameter set to fit")
        lo, hi, log = [], [], []
        for k in names:
            for g in sets:
                p0 = float(nominal[k][g])
                if p0 > 0:
                    lo.append(BOX_FACTORS[0] * p0)
                    hi.append(BOX_FACTORS[1] * p0)
                    log.append(True)
                else:
                    b = bounds_for(k, "servo")
                    lo.append(b[0])
                    hi.append(b[1])
                    log.append(False)
        return ArmSpace(names, len(sets), np.array(lo), np.array(hi), np.array(log),
                        {k: np.asarray(v, float).copy() for k, v in nominal.items()}, sets)

    @property
    def n(self) -> int:
        return len(self.names) * self.G

    def to_theta(self, z, xp=np):
        """Values (P G,) from z (P G,): the one-joint fit's map (:func:`unit_to_theta`);
        ``xp`` numpy or jax.numpy."""
        return unit_to_theta(self.lower, self.upper, self.log, z, xp)

    def to_z(self, theta) -> np.ndarray:
        """z (P G,) of the values ``theta`` (:func:`unit_to_z`)."""
        return unit_to_z(self.lower, self.upper, self.log, theta)

    def z_of(self, params: dict) -> np.ndarray:
        """z of parameter sets (name -> (n_sets,)); names not given take the nominal value."""
        idx = list(self.sets)
        return self.to_z(np.concatenate([np.asarray(params.get(k, self.nominal[k]), float)[idx] for k in self.names]))

    def unpack(self, theta, xp=np) -> dict:
        """Parameter sets name -> (n_sets,): the nominal values with the fitted ones from theta."""
        p = {k: xp.asarray(v) for k, v in self.nominal.items()}
        every = self.sets == tuple(range(len(next(iter(self.nominal.values())))))
        idx = np.array(self.sets)
        for a, k in enumerate(self.names):
            val = theta[a * self.G:(a + 1) * self.G]
            if every:
                p[k] = val
            elif xp is np:
                p[k] = p[k].copy()
                p[k][idx] = val
            else:
                p[k] = p[k].at[idx].set(val)
        return p


def fit_setup(robot_name: str | Robot, model: str | None, params: Iterable[str] | None, fixed: Iterable[str],
              who: str) -> tuple[Robot, tuple[str, ...]]:
    """(robot with ``model`` applied, names of the parameters to fit) for a whole-robot fitter:
    ``params`` if given, else the free parameters of ``model`` minus ``fixed``, else
    :data:`DEFAULT_FIT_PARAMS`. Unknown names raise :class:`UnknownNameError`."""
    robot = _robot(robot_name)
    if model is not None:
        robot = robot_with_model(robot, model)
    names = tuple(params) if params is not None else (
        model_params(robot, model, fixed) if model is not None else DEFAULT_FIT_PARAMS)
    if not names:
        raise ModelError(f"{who}: no parameters to fit")
    for k in names:
        _check_name(k)
    return robot, names


def fit_result(model: str | None, names, labels, sets, best: dict, nominal: dict,
               train: tuple[float, float, float], per_joint: bool, **extra) -> dict[str, Any]:
    """The result dict every whole-robot fitter returns (see :func:`fit_arm`), plus ``extra``;
    ``train`` = (mse, mae, mae of the nominal parameters) on the training windows."""
    mse, mae, mae0 = train
    def nest(p):
        return {k: {lab: float(p[k][g]) for g, lab in enumerate(labels) if g in sets} for k in names}

    return {"model": model if model is None else get_model(model).name,
            "params": nest(best), "nominal": nest(nominal),
            "param_sets": {k: [float(v) for v in best[k]] for k in PARAMS},
            "train_mae": mae, "train_mse": mse, "train_mae_nominal": mae0, **extra,
            "unit": "rad", "per_joint": bool(per_joint)}



def robot_for_log(robot: str | Robot, traj: Trajectory) -> Robot:
    """The robot as one log was recorded on it. A log of the in-air protocol (``Setup.extra["base"] ==
    "fixed"``, ``synth --suite legged``) gives the robot with its base welded
    (:func:`~actuatorlab.robots.fixed_base.on_fixed_base`), the log's drive gains (kp, kd; the config's are
    the policy's), its known loads (``Setup.extra["point_masses"]``: [body, mass [kg], [x, y, z] [m]] each,
    :attr:`~actuatorlab.robots.loader.Robot.point_masses`) and, where the config shares one parameter set
    across joints whose names end in a type (ANYmal C: _HAA, _HFE, _KFE), one parameter set per joint type.
    Other logs: the robot as it is."""
    r = _robot(robot)
    extra = traj.setup.extra or {}
    if extra.get("base") != "fixed":
        return r
    kp, kd = float(traj.setup.gains.get("kp", 0.0)), float(traj.setup.gains.get("kd", 0.0))
    loads = tuple((str(b), float(m), (float(p[0]), float(p[1]), float(p[2])))
                  for b, m, p in extra.get("point_masses") or ())
    r = on_fixed_base(dataclasses.replace(r, point_masses=loads))
    joints = tuple(dataclasses.replace(j, gains=tuple(sorted({**dict(j.gains), "kp": kp, "kd": kd}.items())))
                   for j in r.joints)
    return joint_type_robot(dataclasses.replace(r, joints=joints))


def log_groups(robot: str | Robot, trajs: Iterable[Trajectory]) -> list[tuple[Robot, list[Trajectory]]]:
    """The logs grouped by the robot they were recorded on (:func:`robot_for_log`: one group for ordinary
    logs; in-air logs by drive gains and loads), in order of first appearance. Every group's robot has the
    same joints and parameter sets, so one set of parameters replays them all. In-air logs mixed with
    others are refused (one line)."""
    out: dict[Robot, list[Trajectory]] = {}
    kinds = set()
    for t in trajs:
        kinds.add((t.setup.extra or {}).get("base") == "fixed")
        out.setdefault(robot_for_log(robot, t), []).append(t)
    if len(kinds) > 1:
        raise DataError(None, "the logs mix the in-air protocol (base fixed) with other logs; fit them apart")
    return list(out.items())
