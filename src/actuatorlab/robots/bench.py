"""A one-joint test bench is a one-joint robot: its MJCF and its robot config.

A one-joint model file (``actuatorlab fit``) runs on robot ``"bench:revolute"`` or
``"bench:prismatic"`` and stores the bench in its ``setup`` (docs/model_file.md):

* revolute: a pendulum on a hinge (q = 0 hangs down), tip point mass ``bench.mass`` [kg] at
  ``bench.length`` [m], arm a uniform rod of ``bench.arm_mass`` [kg], gravity ``bench.gravity``
  [m/s^2] (default :data:`~actuatorlab.models.plant.GRAVITY`)::

      I_axis = m l^2 + m_arm l^2 / 3,   M c = m l + m_arm l / 2   (actuatorlab.models.plant.pendulum)

* prismatic: a carriage on a horizontal slide whose whole moving mass is the joint armature (the
  fitted ``armature`` is the moving mass, EMPS convention).

:func:`bench_tree` builds the MJCF element tree (used by the MJCF export,
:mod:`actuatorlab.export.mjcf`, which adds the fitted joint properties and the servo actuator);
`bench_config` / :func:`bench_files` the robot config (docs/robots.md) that carries the fitted model as the
bench servo's nominal parameters, which :func:`actuatorlab.robots.loader.load_robot` loads when
given a one-joint :class:`~actuatorlab.models.actuator_model.ActuatorModel`.
"""

from __future__ import annotations

import hashlib
import json
import math
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from ..errors import ModelError
from ..files import atomic_write
from ..models.actuator_model import BENCH_PREFIX, ActuatorModel
from ..models.control import CONTROL_LAWS
from ..models.params import PARAMS
from ..models.plant import GRAVITY

__all__ = ["BENCH_TIMESTEP", "BENCH_JOINT", "bench_tree", "bench_config", "bench_files", "fmt", "fmts"]

#: [s] physics step of a bench (implicitfast in the exported MJCF; the robot config's physics step
#: is the largest divisor of the fitted period not above it)
BENCH_TIMESTEP = 0.001
#: name of the bench's joint
BENCH_JOINT = "joint"
#: smallest body mass/inertia MuJoCo accepts is 1e-15; a carriage/rotor without load gets this
#: mass [kg] and inertia [kg.m^2] so that the joint armature carries (almost) all the inertia.
_TINY_MASS = 1e-9
_TINY_INERTIA = 1e-12
#: [N.m | N], [rad/s | m/s]: the bench servo's limits in its robot config: none (the one-joint
#: plant clips nothing but the motor current, which the model itself carries)
_NO_EFFORT_LIMIT = 1e6
_NO_VELOCITY_LIMIT = 1e3
#: gain names a robot config takes (robots/loader.py) and where a one-joint setup keeps them
_GAIN_KEYS = ("kp", "kd", "max_duty", "error_gain", "u_max", "drive_gain")


def fmt(x: float) -> str:
    """Shortest text that reads back as the same float64."""
    return repr(float(x))


def fmts(*xs: float) -> str:
    return " ".join(fmt(x) for x in xs)


def pendulum_inertial(mass: float, length: float, arm_mass: float) -> tuple[float, float, float, float]:
    """Point mass at ``length`` plus a uniform rod on a hinge, as one rigid body.

    I_axis = m l^2 + m_arm l^2 / 3,  M c = m l + m_arm l / 2   (actuatorlab.models.plant.pendulum)
    Returns (M [kg], c [m] pivot to centre of mass, I_c [kg.m^2] about the centre of mass, perpendicular
    to the rod, I_axis [kg.m^2] about the hinge).
    """
    total = mass + arm_mass
    i_axis = mass * length**2 + arm_mass * length**2 / 3.0
    if total <= 0:
        return _TINY_MASS, 0.0, _TINY_INERTIA, 0.0
    c = (mass * length + 0.5 * arm_mass * length) / total
    i_c = max(i_axis - total * c * c, 0.0)
    return total, c, i_c, i_axis


def bench_tree(setup: dict[str, Any], joint_type: str, *, name: str, timestep: float,
               q_offset: float = 0.0) -> tuple[ET.Element, ET.Element, dict[str, float | str]]:
    """The bench's MJCF: (root element, joint element, written quantities).

    setup: a one-joint model file's ``setup`` (its ``bench`` entry: mass, length, arm_mass,
    gravity); joint_type: "revolute" | "prismatic"; name: the MuJoCo model name; timestep [s];
    q_offset [rad]: the pendulum body is rotated by it so that gravity acts on sin(q + q_offset)
    with q the encoder reading (an exported bench; a bench robot's rollouts subtract the offset
    from the measured position instead, so it builds with 0)."""
    bench = setup.get("bench") or {}
    root = ET.Element("mujoco", {"model": name.replace("+", "_")})
    ET.SubElement(root, "compiler", {"angle": "radian", "autolimits": "true"})
    written: dict[str, float | str] = {"timestep": timestep}
    world = ET.Element("worldbody")
    if joint_type == "revolute":
        mass, length = float(bench.get("mass", 0.0)), float(bench.get("length", 0.0))
        arm_mass = float(bench.get("arm_mass", 0.0))
        g = float(bench.get("gravity", GRAVITY))
        ET.SubElement(root, "option", {"timestep": fmt(timestep), "integrator": "implicitfast",
                                       "gravity": fmts(0.0, 0.0, -g)})
        total, c, i_c, i_axis = pendulum_inertial(mass, length, arm_mass)
        eps = max(1e-9 * i_axis, _TINY_INERTIA)
        body = ET.SubElement(world, "body", {
            "name": "pendulum", "pos": "0 0 0",
            "quat": fmts(math.cos(q_offset / 2), 0.0, math.sin(q_offset / 2), 0.0)})
        joint_el = ET.SubElement(body, "joint", {"name": BENCH_JOINT, "type": "hinge", "axis": "0 1 0"})
        ET.SubElement(body, "inertial", {"pos": fmts(0.0, 0.0, -c), "mass": fmt(total),
                                         "diaginertia": fmts(i_c + eps, i_c + eps, eps)})
        if length > 0:
            ET.SubElement(body, "geom", {"type": "capsule", "fromto": fmts(0, 0, 0, 0, 0, -length),
                                         "size": "0.004", "contype": "0", "conaffinity": "0", "mass": "0"})
            ET.SubElement(body, "geom", {"type": "sphere", "pos": fmts(0, 0, -length), "size": "0.015",
                                         "contype": "0", "conaffinity": "0", "mass": "0", "rgba": "0.8 0.3 0.2 1"})
        written.update({"bench.mass": mass, "bench.length": length, "bench.arm_mass": arm_mass,
                        "bench.gravity": g, "bench.inertia": i_axis,
                        "bench.gravity_torque": (mass * length + 0.5 * arm_mass * length) * g,
                        "bench.q_offset": q_offset})
    else:
        ET.SubElement(root, "option", {"timestep": fmt(timestep), "integrator": "implicitfast"})
        body = ET.SubElement(world, "body", {"name": "carriage", "pos": "0 0 0"})
        joint_el = ET.SubElement(body, "joint", {"name": BENCH_JOINT, "type": "slide", "axis": "1 0 0"})
        ET.SubElement(body, "inertial", {"pos": "0 0 0", "mass": fmt(_TINY_MASS),
                                         "diaginertia": fmts(_TINY_INERTIA, _TINY_INERTIA, _TINY_INERTIA)})
        ET.SubElement(body, "geom", {"type": "box", "size": "0.05 0.03 0.02", "contype": "0",
                                     "conaffinity": "0", "mass": "0"})
        written.update({"bench.mass": 0.0})
    root.append(world)
    return root, joint_el, written


def bench_config(model: ActuatorModel) -> tuple[dict[str, Any], str]:
    """(robot config dict, MJCF text) of the bench a one-joint analytic model was fitted on.

    The config (docs/robots.md; its ``mjcf`` is ``"bench.xml"`` beside it) has one joint,
    :data:`BENCH_JOINT`, with one actuator ``servo``: the model, control law, gains (the setup's,
    with the file's controller constants) and supply of the file, its fitted parameters as the
    nominal values, no effort or velocity limit; ``bench``: the plant constants (mass, length,
    arm_mass, gravity, with the defaults of the one-joint replay) that the one-joint scan
    (:mod:`actuatorlab.sim.scan`) runs on. Control period: the fitted replay period (``fit.dt``);
    physics step: the largest divisor of it not above :data:`BENCH_TIMESTEP`."""
    where, joint_type = model.where, model.joint_type
    if joint_type is None:
        raise ModelError(f"{where}: robot {model.robot!r} is not a bench (a one-joint model's robot is "
                         f"{BENCH_PREFIX}revolute or {BENCH_PREFIX}prismatic)")
    if model.kind != "analytic":
        raise ModelError(f"{where}: a {model.kind} one-joint model has no bench robot yet (its effort is a "
                         "network over one joint's history); use the analytic model it was trained with")
    doc, setup = model.document, model.setup
    law = doc.get("controller") or setup.get("controller")
    if law not in CONTROL_LAWS:
        raise ModelError(f"{where}: controller {law!r} has no robot control law; known: {', '.join(CONTROL_LAWS)}")
    dt = float((doc.get("fit") or {}).get("dt") or 0.01)
    n = max(1, math.ceil(dt / BENCH_TIMESTEP - 1e-9))
    consts = {k: v for k, v in (doc.get("controller_constants") or {}).items() if k in _GAIN_KEYS and v is not None}
    gains = {**{k: float(v) for k, v in (setup.get("gains") or {}).items() if k in _GAIN_KEYS},
             **{k: float(v) for k, v in consts.items()}}
    if law == "emps_cascade":  # the EMPS setup names its velocity gain kv and its drive gain gtau
        g = {**(setup.get("gains") or {}), **(setup.get("bench") or {})}
        gains.setdefault("kd", float(g.get("kv", g.get("kd", 0.0))))
        gains.setdefault("drive_gain", float(model.parameters.get("drive_gain") or g.get("gtau") or 0.0))
    params = {k: float(v) for k, v in model.parameters.items() if k in PARAMS}
    actuator = {"model": model.model, "law": law, "gear_ratio": 1.0,
                "effort_limit": _NO_EFFORT_LIMIT, "velocity_limit": _NO_VELOCITY_LIMIT,
                "gains": gains, "params": params}
    if setup.get("supply_voltage") is not None:
        actuator["supply_voltage"] = float(setup["supply_voltage"])
    b = setup.get("bench") or {}
    plant = {"mass": float(b.get("mass", 0.0)), "length": float(b.get("length", 0.0)),
             "arm_mass": float(b.get("arm_mass", 0.0)),
             "gravity": float(b.get("gravity", GRAVITY if joint_type == "revolute" else 0.0))}
    cfg = {"format": "actuatorlab-robot", "format_version": "1", "name": model.robot,
           "description": f"one-joint bench of {where}", "mjcf": "bench.xml",
           "physics_dt": dt / n, "control_dt": dt, "integrator": "euler", "contacts": False,
           "actuators": {"servo": actuator}, "joints": {BENCH_JOINT: {"actuator": "servo"}}, "bench": plant}
    name = "actuatorlab_bench_" + "_".join(str(x) for x in (setup.get("actuator") or "actuator", model.model))
    root, _, _ = bench_tree(setup, joint_type, name=name, timestep=dt / n)
    ET.indent(root, space="  ")
    return cfg, ET.tostring(root, encoding="unicode") + "\n"


def bench_files(model: ActuatorModel) -> tuple[dict[str, Any], Path]:
    """(config dict, config path) of a one-joint model's bench robot (:func:`bench_config`): the
    config and its MJCF are written once into a folder named by their content under the temporary
    directory (the robot loader reads files)."""
    cfg, xml = bench_config(model)
    text = json.dumps(cfg, indent=2, sort_keys=True) + "\n"
    folder = Path(tempfile.gettempdir()) / "actuatorlab-bench" / hashlib.sha256((text + xml).encode()).hexdigest()[:16]
    path = folder / "robot.json"
    if not path.is_file():
        atomic_write(folder / "bench.xml", xml)
        atomic_write(path, text)
    return cfg, path
