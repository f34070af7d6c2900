"""Robots: MuJoCo models with an actuatorlab actuator model on every joint (configs, loader, assets).

``load_robot("open_manipulator_x")`` reads ``configs/open_manipulator_x.json``; the rollouts are in
:mod:`actuatorlab.sim.arm` (MJX) and :mod:`actuatorlab.sim.arm_native` (native MuJoCo). Format and
sources: docs/robots.md.
"""

from .loader import (CONFIG_DIR, CONFIG_FORMAT, CONFIG_VERSION, JointSpec, ParamGroup, Robot, build_model,
                     list_robots, load_robot, param_scale)

__all__ = ["CONFIG_DIR", "CONFIG_FORMAT", "CONFIG_VERSION", "JointSpec", "ParamGroup", "Robot",
           "build_model", "list_robots", "load_robot", "param_scale"]
