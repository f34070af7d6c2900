"""Robot configs: a MuJoCo model plus an actuatorlab actuator model on every listed joint.

A robot is one JSON file ``robots/configs/<name>.json`` (docs/robots.md). :func:`load_robot` validates
it against the MJCF (joints looked up by *name*) and returns a frozen :class:`Robot`. Nothing is
simulated here: see :mod:`actuatorlab.sim.arm` (MJX) and :mod:`actuatorlab.sim.arm_native` (MuJoCo).

Units. Actuator parameters and gains in a config are given at the *servo output shaft*
(rotational units, gear ratio folded in, the convention of :mod:`actuatorlab.models.params`). A
joint may sit behind a further linkage that turns a servo angle into a joint coordinate,
``q_joint = r * theta_servo`` with ``r = output_to_joint`` [m/rad for a slide joint, 1 for a
direct revolute joint]. The parameters seen by the joint are then (virtual work,
``tau_servo = r * F_joint``)::

    kt, friction efforts, force_offset, effort limits     / r        [N.m/A -> N/A, N.m -> N]
    armature, viscous friction, stiffness, PD gains kp kd  / r^2      [kg.m^2 -> kg, ...]
    velocities, angles (stribeck_velocity, backlash, q_offset) * r    [rad/s -> m/s, rad -> m]
    PWM error gain [duty/rad]                              / r        [duty/m]
    quadratic load-friction coefficients [1/(N.m)]         * r        [1/N]

Parameter sharing. Each actuator type of a config is either ``shared`` (every joint that uses it
reads one parameter set: one motor model identified for all servos of that type) or not (every
joint gets its own copy, initialised to the nominal values). :attr:`Robot.groups` lists the
parameter sets; :meth:`Robot.joint_params` maps them to per-joint arrays.
"""

from __future__ import annotations

import functools
import json
import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import mujoco
import numpy as np

from ..errors import ModelError, UnknownNameError
from ..models.actuator_model import BENCH_PREFIX, ActuatorModel, check_robot
from .bench import bench_files
from .checks import config_error as _err, fields as _keys, number as _num
from .mechanisms import CrankSlider, add_mechanisms, parse_mechanisms
from .bounds import parse_bounds
from ..models.control import DEFAULT_ERROR_GAIN, CONTROL_LAWS, LawConstants
from ..models.params import PARAMS, neutral_params
from ..models.plant import PlantConstants
from ..models.registry import get_model, list_models

__all__ = ["CONFIG_FORMAT", "CONFIG_VERSION", "CONFIG_DIR", "JointSpec", "ParamGroup", "Robot",
           "list_robots", "load_robot", "build_model", "param_scale"]

CONFIG_FORMAT = "actuatorlab-robot"
CONFIG_VERSION = "1"
#: folder of the bundled robot configs
CONFIG_DIR = Path(__file__).resolve().parent / "configs"

#: power of ``r = output_to_joint`` that turns a servo-side parameter into its joint-side value,
#: by the parameter's (revolute) unit.
_UNIT_POWER = {"N.m/A": -1, "N.m": -1, "kg.m^2": -2, "N.m.s/rad": -2, "N.m/rad": -2,
               "rad/s": 1, "rad": 1, "1/(N.m)": 1}

_TOP_KEYS = {"format", "format_version", "name", "description", "mjcf", "physics_dt", "control_dt",
             "firmware_dt", "integrator", "contacts", "target", "target_tau", "max_delay",
             "joint_overrides", "actuators", "joints", "sources", "ee_body", "bench", "mechanisms"}
_TOP_REQUIRED = ("format", "format_version", "name", "mjcf", "physics_dt", "control_dt",
                 "actuators", "joints")
_ACT_KEYS = {"model", "law", "shared", "gear_ratio", "supply_voltage", "effort_limit",
             "velocity_limit", "saturation_effort", "gains", "params", "bounds", "sources"}
_ACT_REQUIRED = ("model", "law", "gear_ratio", "effort_limit", "velocity_limit", "gains", "params")
_JOINT_KEYS = {"actuator", "gains", "effort_limit", "velocity_limit", "saturation_effort",
               "output_to_joint", "supply_voltage"}
_GAIN_KEYS = {"kp", "kd", "max_duty", "error_gain", "u_max", "drive_gain"}
_OVERRIDE_KEYS = {"armature", "damping", "frictionloss"}
_INTEGRATORS = {"euler": mujoco.mjtIntegrator.mjINT_EULER,
                "implicitfast": mujoco.mjtIntegrator.mjINT_IMPLICITFAST}
_TARGET_MODES = ("hold", "linear", "filter")


def param_scale(name: str, r: float) -> float:
    """Factor that turns servo-side parameter ``name`` into its joint-side value for
    ``q_joint = r * theta_servo`` (1 for r = 1; see the module docstring)."""
    return float(abs(r)) ** _UNIT_POWER.get(PARAMS[name].unit, 0)


@dataclass(frozen=True)
class JointSpec:
    """One modelled joint (all limits and gains resolved, joint-side units unless noted).

    name: joint name in the MJCF; actuator: actuator type (key of the config's "actuators");
    model: canonical registry model name; law: control-law name; drive: "voltage" | "current" |
    "effort" (from the law); joint_type: "revolute" | "prismatic"; group: index into
    :attr:`Robot.groups`; output_to_joint [m/rad | 1] linkage ratio r; gear_ratio [1] servo gearbox
    (informational: parameters already include it); supply_voltage [V]; effort_limit [N.m | N]
    bound on the motor effort; saturation_effort [N.m | N] and velocity_limit [rad/s | m/s] of the
    torque-speed envelope (effort drives); gains: firmware gains as configured (servo side,
    firmware units); qpos_adr, dof_adr: addresses in MuJoCo's qpos / qvel.
    """

    name: str
    actuator: str
    model: str
    law: str
    drive: str
    joint_type: str
    group: int
    output_to_joint: float
    gear_ratio: float
    supply_voltage: float
    effort_limit: float
    saturation_effort: float
    velocity_limit: float
    gains: tuple[tuple[str, float], ...]
    qpos_adr: int
    dof_adr: int

    def gain(self, key: str, default: float) -> float:
        return dict(self.gains).get(key, default)


@dataclass(frozen=True)
class ParamGroup:
    """One parameter set: name ("<actuator>" if shared, "<actuator>@<joint>" if not), the actuator type, its
    model, the joints reading it, its nominal values (every parameter of :data:`~actuatorlab.models.params.PARAMS`,
    servo-side units, neutral where not configured) and the config's search bounds (:mod:`.bounds`)."""

    name: str
    actuator: str
    model: str
    joints: tuple[str, ...]
    nominal: tuple[tuple[str, float], ...]
    bounds: tuple[tuple[str, float, float], ...] = ()  #: (parameter, lower, upper) [servo-side units]


@dataclass(frozen=True)
class Robot:
    """A loaded, validated robot config (frozen, hashable; holds no MuJoCo objects).

    name; config_path, mjcf_path: absolute paths; joints: modelled joints in config order;
    groups: parameter sets; physics_dt [s] MuJoCo timestep; control_dt [s] period of the per-step
    inputs (host command rate); firmware_dt [s] period of the firmware law (a multiple of
    physics_dt dividing control_dt); integrator: "euler" | "implicitfast"; contacts: whether
    contacts are simulated; target: how the target evolves between control steps ("hold",
    "linear", "filter"); target_tau [s] time constant of "filter"; max_delay [s] longest command
    delay the delay line holds; joint_overrides: (joint, ((attribute, value), ...)) edits of
    joints that carry no actuator model; nq, nv: MuJoCo sizes; ee_body: the body whose origin is the
    end-effector point (force labels and estimates act there), or None; bench: a one-joint bench's
    plant constants ((name, value) of :class:`~actuatorlab.models.plant.PlantConstants`: mass [kg],
    length [m], arm_mass [kg], gravity [m/s^2]; what the one-joint scan needs), () for other robots;
    fixed_base: the floating base welded where the MJCF puts it (:mod:`~actuatorlab.robots.fixed_base`);
    point_masses: known loads, (body, mass [kg], position (3,) [m] in the body's frame) each;
    mechanisms: servo-to-joint linkages added to the MJCF (:mod:`~actuatorlab.robots.mechanisms`)."""

    name: str
    config_path: str
    mjcf_path: str
    description: str
    joints: tuple[JointSpec, ...]
    groups: tuple[ParamGroup, ...]
    physics_dt: float
    control_dt: float
    firmware_dt: float
    integrator: str
    contacts: bool
    target: str
    target_tau: float
    max_delay: float
    joint_overrides: tuple[tuple[str, tuple[tuple[str, float], ...]], ...]
    nq: int
    nv: int
    ee_body: str | None = None
    bench: tuple[tuple[str, float], ...] = ()
    fixed_base: bool = False
    point_masses: tuple[tuple[str, float, tuple[float, float, float]], ...] = ()
    mechanisms: tuple[CrankSlider, ...] = ()

    # ---- structure -------------------------------------------------------------------------
    @property
    def joint_names(self) -> tuple[str, ...]:
        return tuple(j.name for j in self.joints)

    @property
    def n_joints(self) -> int:
        return len(self.joints)

    @property
    def substeps(self) -> int:
        """Physics steps per control step."""
        return int(round(self.control_dt / self.physics_dt))

    @property
    def law_every(self) -> int:
        """Physics steps per firmware-law evaluation."""
        return int(round(self.firmware_dt / self.physics_dt))

    @property
    def delay_steps(self) -> int:
        """Length of the command delay line [control steps] (1 when no model has a delay)."""
        if not any("delay" in get_model(g.model).free for g in self.groups):
            return 1
        return int(math.ceil(self.max_delay / self.control_dt - 1e-9)) + 2

    def joint(self, name: str) -> JointSpec:
        for j in self.joints:
            if j.name == name:
                return j
        raise UnknownNameError("joint", name, self.joint_names)

    def index(self, name: str) -> int:
        """Position of joint ``name`` in this robot's joint arrays."""
        return self.joint_names.index(self.joint(name).name)

    @property
    def compliant(self) -> np.ndarray:
        """(n_joints,) bool: True for joints whose parameter set's model has a two-body
        transmission (``+backlash``, ``+compliance``; registry ``compliant``). Such a joint's
        rotor is a body of its own in the rollouts, not part of MuJoCo's ``dof_armature``."""
        return np.array([get_model(self.groups[j.group].model).compliant for j in self.joints], dtype=bool)

    @property
    def thermal(self) -> np.ndarray:
        """(n_joints,) bool: True for joints whose parameter set's model carries a winding
        temperature (``+thermal``; see :mod:`actuatorlab.sim.arm`)."""
        return np.array([get_model(self.groups[j.group].model).thermal for j in self.joints], dtype=bool)

    def free_params(self) -> tuple[str, ...]:
        """Parameters free in at least one group's model (for its drive type), in table order."""
        free = set()
        for g in self.groups:
            drive = next(j.drive for j in self.joints if j.group == self.groups.index(g))
            free |= set(get_model(g.model).free_for(drive))
        return tuple(n for n in PARAMS if n in free)

    @property
    def qpos_adr(self) -> np.ndarray:
        return np.array([j.qpos_adr for j in self.joints], dtype=np.int64)

    @property
    def dof_adr(self) -> np.ndarray:
        return np.array([j.dof_adr for j in self.joints], dtype=np.int64)

    # ---- parameters ------------------------------------------------------------------------
    def nominal_params(self) -> dict[str, np.ndarray]:
        """Nominal parameter sets: name -> (n_groups,) servo-side values."""
        return {k: np.array([dict(g.nominal)[k] for g in self.groups]) for k in PARAMS}

    def joint_params(self, group_params: dict, xp=np) -> dict:
        """Per-joint parameters (name -> (n_joints,) joint-side values) from group parameters
        (name -> (n_groups,) servo-side values; a leading batch axis (B, n_groups) gives (B, n_joints)).
        ``xp`` is numpy or jax.numpy (differentiable)."""
        gidx = np.array([j.group for j in self.joints], dtype=np.int64)
        out = {}
        for k, v in group_params.items():
            scale = np.array([param_scale(k, j.output_to_joint) for j in self.joints])
            out[k] = xp.asarray(v)[..., gidx] * scale
        return out

    def law_constants(self) -> LawConstants:
        """Controller constants per joint ((n_joints,) arrays, joint-side units, dt = firmware_dt)."""
        rows = []
        for j in self.joints:
            r = abs(j.output_to_joint)
            pwm = j.law in DEFAULT_ERROR_GAIN
            kp = j.gain("kp", 0.0) * (1.0 if pwm else r ** -2)
            kd = j.gain("kd", 0.0) * (1.0 if pwm else r ** -2)
            eg = j.gain("error_gain", DEFAULT_ERROR_GAIN.get(j.law, 1.0)) / r
            u_max = j.gain("u_max", j.effort_limit * r) / (1.0 if pwm else r)
            rows.append((kp, kd, eg, j.gain("max_duty", 1.0), u_max,
                         j.gain("drive_gain", 1.0) / r, self.firmware_dt))
        cols = np.array(rows, dtype=float).T
        return LawConstants(*[np.ascontiguousarray(c) for c in cols])

    def model(self, for_mjx: bool = False) -> mujoco.MjModel:
        """The compiled MuJoCo model (cached; do not mutate it, copy it). See :func:`build_model`."""
        return build_model(self, for_mjx)


# ------------------------------------------------------------------------------------------
def list_robots() -> list[str]:
    """Names of the bundled robot configs."""
    return sorted(p.stem for p in CONFIG_DIR.glob("*.json"))


def load_robot(name: str | Path | ActuatorModel) -> Robot:
    """Load a bundled robot by name (``"open_manipulator_x"``), a config file by path, or the
    robot a model runs on (an :class:`~actuatorlab.models.actuator_model.ActuatorModel`: the robot
    it names, or for a one-joint model its bench, built from the file's setup by
    :func:`actuatorlab.robots.bench.bench_config`).

    Raises :class:`UnknownNameError` for an unknown name (listing what exists) and
    :class:`ModelError` ("<file>: <problem>") for a malformed config or one that does not fit its
    MJCF (missing field, unknown joint/model/law/parameter, bad rates).
    """
    if isinstance(name, ActuatorModel):
        if name.one_joint:
            return _parse(*bench_files(name))
        return load_robot(check_robot(name, None))
    s = str(name)
    if s.startswith(BENCH_PREFIX):
        raise ModelError(f"{s}: a bench robot is built from its one-joint model file: give the model file")
    if s.endswith(".json") or "/" in s or "\\" in s:
        path = Path(s).resolve()
        if not path.is_file():
            raise ModelError(f"{path}: robot config file not found")
    else:
        if s not in list_robots():
            raise UnknownNameError("robot", s, list_robots())
        path = CONFIG_DIR / f"{s}.json"
    try:
        cfg = json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise ModelError(f"{path}: not valid JSON ({e})") from None
    return _parse(cfg, path)


def _multiple(a: float, b: float) -> int | None:
    """a / b if it is a whole number >= 1, else None."""
    return int(round(a / b)) if abs(a / b - round(a / b)) < 1e-6 and round(a / b) >= 1 else None


def _parse(cfg: Any, path: Path) -> Robot:
    cfg = _keys(path, "config", cfg, _TOP_KEYS, _TOP_REQUIRED)
    if cfg["format"] != CONFIG_FORMAT:
        raise _err(path, f"format must be {CONFIG_FORMAT!r}, got {cfg['format']!r}")
    if str(cfg["format_version"]) != CONFIG_VERSION:
        raise _err(path, f"format_version {cfg['format_version']!r} is not supported (expected "
                         f"{CONFIG_VERSION!r})")
    mjcf = (path.parent / str(cfg["mjcf"])).resolve()
    if not mjcf.is_file():
        raise _err(path, f"mjcf file {cfg['mjcf']!r} not found (looked at {mjcf})")
    physics_dt, control_dt, firmware_dt, target, target_tau, max_delay, contacts = _timing(path, cfg)
    try:
        spec = mujoco.MjSpec.from_file(str(mjcf))
    except Exception as e:  # noqa: BLE001 - MuJoCo raises plain ValueError with its parser text
        raise _err(path, f"cannot parse mjcf {mjcf.name}: {e}") from None
    add_mechanisms(spec, mechanisms := parse_mechanisms(path, cfg.get("mechanisms", {})), path)  # cranks: joints
    spec_joints = {j.name: j for j in spec.joints if j.name}
    integrator = _integrator(path, cfg.get("integrator"), spec)

    acts = cfg["actuators"]
    if not isinstance(acts, dict) or not acts:
        raise _err(path, "actuators must be a non-empty object")
    act_parsed = {a: _parse_actuator(path, a, d) for a, d in acts.items()}

    joints_cfg = cfg["joints"]
    if not isinstance(joints_cfg, dict) or not joints_cfg:
        raise _err(path, "joints must be a non-empty object (joint name -> settings)")
    overrides = _keys(path, "joint_overrides", cfg.get("joint_overrides", {}), set(spec_joints))
    ov = []
    for jn, d in overrides.items():
        _keys(path, f"joint_overrides.{jn}", d, _OVERRIDE_KEYS)
        if jn in joints_cfg:
            raise _err(path, f"joint_overrides.{jn}: joint {jn!r} carries an actuator model; its "
                             "armature/damping/friction come from the model")
        ov.append((jn, tuple((k, _num(path, f"joint_overrides.{jn}.{k}", v)) for k, v in sorted(d.items()))))

    # parameter groups (in order of first use)
    groups: list[ParamGroup] = []
    group_of: dict[str, int] = {}
    specs = []
    for jn, d in joints_cfg.items():
        specs.append(_joint(path, mjcf, spec_joints, act_parsed, groups, group_of, jn, d))

    # compile once to resolve addresses (and to check the edited model compiles)
    proto = Robot(name=str(cfg["name"]), config_path=str(path), mjcf_path=str(mjcf),
                  description=str(cfg.get("description", "")),
                  joints=tuple(JointSpec(**s, qpos_adr=-1, dof_adr=-1) for s in specs),
                  groups=tuple(groups), physics_dt=physics_dt, control_dt=control_dt,
                  firmware_dt=firmware_dt, integrator=integrator, contacts=contacts, target=target,
                  target_tau=target_tau, max_delay=max_delay, joint_overrides=tuple(ov), nq=0, nv=0,
                  ee_body=None if cfg.get("ee_body") is None else str(cfg["ee_body"]), mechanisms=mechanisms,
                  bench=tuple((k, _num(path, f"bench.{k}", v)) for k, v in
                              _keys(path, "bench", cfg.get("bench", {}), set(PlantConstants._fields)).items()))
    m = _compile(proto, for_mjx=False)
    joints = []
    for s in specs:
        jid = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_JOINT, s["name"])
        joints.append(JointSpec(**s, qpos_adr=int(m.jnt_qposadr[jid]), dof_adr=int(m.jnt_dofadr[jid])))
    return Robot(**{**proto.__dict__, "joints": tuple(joints), "nq": int(m.nq), "nv": int(m.nv)})


def _timing(path: Path, cfg: dict) -> tuple[float, float, float, str, float, float, bool]:
    """(physics_dt, control_dt, firmware_dt [s], target, target_tau [s], max_delay [s], contacts) of a
    config; control and firmware periods whole multiples of the physics step, firmware dividing control."""
    physics_dt = _num(path, "physics_dt", cfg["physics_dt"], True)
    control_dt = _num(path, "control_dt", cfg["control_dt"], True)
    firmware_dt = _num(path, "firmware_dt", cfg.get("firmware_dt", physics_dt), True)
    if _multiple(control_dt, physics_dt) is None:
        raise _err(path, f"control_dt {control_dt} must be a whole multiple of physics_dt {physics_dt}")
    n_fw = _multiple(firmware_dt, physics_dt)
    if n_fw is None or _multiple(control_dt, firmware_dt) is None:
        raise _err(path, f"firmware_dt {firmware_dt} must be a multiple of physics_dt {physics_dt} "
                         f"that divides control_dt {control_dt}")
    target = cfg.get("target", "hold")
    if target not in _TARGET_MODES:
        raise _err(path, f"target must be one of {', '.join(_TARGET_MODES)}, got {target!r}")
    target_tau = _num(path, "target_tau", cfg.get("target_tau", control_dt), True)
    max_delay = _num(path, "max_delay", cfg.get("max_delay", 0.05))
    contacts = cfg.get("contacts", True)
    if not isinstance(contacts, bool):
        raise _err(path, f"contacts must be true or false, got {contacts!r}")
    return physics_dt, control_dt, firmware_dt, target, target_tau, max_delay, contacts


def _joint(path: Path, mjcf: Path, spec_joints: dict, act_parsed: dict, groups: list, group_of: dict,
           jn: str, d: Any) -> dict:
    """The JointSpec fields of the config's joint ``jn`` (settings ``d``); registers its actuator's
    parameter group in ``groups`` / ``group_of`` (in order of first use)."""
    where = f"joints.{jn}"
    d = _keys(path, where, d, _JOINT_KEYS, ("actuator",))
    if jn not in spec_joints:
        raise _err(path, f"{where}: no joint named {jn!r} in {mjcf.name}; joints there: "
                         f"{', '.join(sorted(spec_joints))}")
    jt = spec_joints[jn].type
    if jt == mujoco.mjtJoint.mjJNT_HINGE:
        joint_type = "revolute"
    elif jt == mujoco.mjtJoint.mjJNT_SLIDE:
        joint_type = "prismatic"
    else:
        raise _err(path, f"{where}: joint {jn!r} is a {jt.name} joint; only hinge and slide "
                         "joints can carry a one-DoF actuator model")
    an = d["actuator"]
    if an not in act_parsed:
        raise _err(path, f"{where}: unknown actuator {an!r}; available: {', '.join(sorted(act_parsed))}")
    a = act_parsed[an]
    key = an if a["shared"] else f"{an}@{jn}"
    if key not in group_of:
        group_of[key] = len(groups)
        groups.append(ParamGroup(key, an, a["model"], (), a["nominal"], a["bounds"]))
    g = groups[group_of[key]]
    groups[group_of[key]] = replace(g, joints=g.joints + (jn,))
    gains = dict(a["gains"])
    if "gains" in d:
        gains.update(_gains(path, f"{where}.gains", d["gains"]))
    r = _num(path, f"{where}.output_to_joint", d.get("output_to_joint", 1.0))
    if r == 0.0:
        raise _err(path, f"{where}.output_to_joint must not be 0")
    eff = _num(path, f"{where}.effort_limit", d.get("effort_limit", a["effort_limit"]), True)
    sat = _num(path, f"{where}.saturation_effort", d.get("saturation_effort", a["saturation_effort"] or eff), True)
    vel = _num(path, f"{where}.velocity_limit", d.get("velocity_limit", a["velocity_limit"]), True)
    vs = _num(path, f"{where}.supply_voltage", d.get("supply_voltage", a["supply_voltage"]))
    if CONTROL_LAWS[a["law"]].drive == "voltage" and vs <= 0:
        raise _err(path, f"{where}: law {a['law']!r} drives a DC motor: supply_voltage [V] is required")
    _check_gains(path, where, a["law"], gains)
    return dict(name=jn, actuator=an, model=a["model"], law=a["law"], drive=CONTROL_LAWS[a["law"]].drive,
                joint_type=joint_type, group=group_of[key], output_to_joint=r, gear_ratio=a["gear_ratio"],
                supply_voltage=vs, effort_limit=eff / abs(r), saturation_effort=sat / abs(r),
                velocity_limit=vel * abs(r), gains=tuple(sorted(gains.items())))

def _integrator(path: Path, integrator: Any, spec: mujoco.MjSpec) -> str:
    """The config's integrator name, or the MJCF's when the config sets none."""
    if integrator is None:
        integrator = {v: k for k, v in _INTEGRATORS.items()}.get(spec.option.integrator)
        if integrator is None:
            raise _err(path, f"the mjcf's integrator {spec.option.integrator} is not supported; set "
                             f"\"integrator\" to one of {', '.join(_INTEGRATORS)}")
    elif integrator not in _INTEGRATORS:
        raise _err(path, f"integrator must be one of {', '.join(_INTEGRATORS)}, got {integrator!r}")
    return str(integrator)


def _gains(path: Path, where: str, d: Any) -> dict[str, float]:
    d = _keys(path, where, d, _GAIN_KEYS)
    return {k: _num(path, f"{where}.{k}", v) for k, v in d.items()}


def _check_gains(path: Path, where: str, law: str, gains: dict[str, float]) -> None:
    need = {"dynamixel_pwm": ("kp",), "feetech_pwm": ("kp",), "pd": ("kp", "kd"),
            "emps_cascade": ("kp", "kd", "drive_gain")}.get(law, ("kp",))
    for k in need:
        if k not in gains:
            raise _err(path, f"{where}: law {law!r} needs gain {k!r}")


def _parse_actuator(path: Path, name: str, d: Any) -> dict:
    where = f"actuators.{name}"
    d = _keys(path, where, d, _ACT_KEYS, _ACT_REQUIRED)
    try:
        spec = get_model(str(d["model"]))
    except UnknownNameError:
        raise _err(path, f"{where}: unknown model {d['model']!r}; available: "
                         f"{', '.join(list_models())}") from None
    law = d["law"]
    if law not in CONTROL_LAWS:
        raise _err(path, f"{where}: unknown control law {law!r}; available: {', '.join(sorted(CONTROL_LAWS))}")
    drive = CONTROL_LAWS[law].drive
    params = _keys(path, f"{where}.params", d["params"], set(PARAMS))
    missing = [k for k in spec.free_for(drive) if k not in params]
    if missing:
        raise _err(path, f"{where}: model {spec.name!r} needs a nominal value for "
                         f"{', '.join(missing)} in \"params\"")
    nominal = neutral_params()
    for k, v in params.items():
        nominal[k] = _num(path, f"{where}.params.{k}", v)
        if PARAMS[k].scale == "log" and nominal[k] <= 0:
            raise _err(path, f"{where}.params.{k} must be > 0, got {v!r}")
    shared = d.get("shared", True)
    if not isinstance(shared, bool):
        raise _err(path, f"{where}.shared must be true or false")
    return dict(model=spec.name, law=law, shared=shared,
                gear_ratio=_num(path, f"{where}.gear_ratio", d["gear_ratio"], True),
                supply_voltage=_num(path, f"{where}.supply_voltage", d.get("supply_voltage", 0.0)),
                effort_limit=_num(path, f"{where}.effort_limit", d["effort_limit"], True),
                velocity_limit=_num(path, f"{where}.velocity_limit", d["velocity_limit"], True),
                saturation_effort=(_num(path, f"{where}.saturation_effort", d["saturation_effort"], True)
                                   if "saturation_effort" in d else None),
                gains=_gains(path, f"{where}.gains", d["gains"]),
                nominal=tuple(nominal.items()), bounds=parse_bounds(path, where, d.get("bounds")))


# ------------------------------------------------------------------------------------------
@functools.lru_cache(maxsize=16)
def build_model(robot: Robot, for_mjx: bool = False) -> mujoco.MjModel:
    """Compile the robot's MuJoCo model with the actuator models in place (cached by robot).

    Edits of the MJCF (the file itself is never written):
    * timestep = physics_dt, integrator as configured;
    * every modelled joint: armature = the nominal armature (joint units; 0 for a compliant
      joint, whose rotor the rollouts integrate as a body of its own), damping = 0,
      frictionloss = 0 (the actuator model supplies friction), and the MJCF actuators that drive
      it (or a mechanism's jaw) are removed (keyframe ``ctrl`` entries follow);
    * the config's mechanisms (:func:`~actuatorlab.robots.mechanisms.add_mechanisms`): crank
      joints, their jaws' equalities and keyframe entries;
    * ``joint_overrides`` applied to the listed unmodelled joints;
    * contacts off (``contacts: false``): the contact flag is disabled and every geom gets
      contype = conaffinity = 0 (so MJX does not prepare mesh collisions), cone = pyramidal
      (MJX 3.17 fails on an elliptic cone without contacts; no effect without contacts);
    * ``for_mjx``: solver iterations = 1, ls_iterations = 4 (what MJX needs to differentiate
      through the constraint solver). The native model keeps the MJCF's solver settings.

    The returned model is shared: copy it (``copy.copy``) before writing into it."""
    return _compile(robot, for_mjx)


def model_spec(robot: Robot, for_mjx: bool = False, *, config_integrator: bool = True) -> mujoco.MjSpec:
    """The robot's MJCF as an MjSpec with the config's simulation options: physics timestep,
    integrator (``config_integrator=False`` keeps the MJCF's, e.g. implicitfast for its own joint
    damping), contacts off (pyramidal cone, geoms out of collision) when the config has none, the
    config's mechanisms, and MJX's solver settings with ``for_mjx``. Its actuators and joint
    properties are the MJCF's (a mechanism's jaw excepted)."""
    spec = mujoco.MjSpec.from_file(robot.mjcf_path)
    spec.option.timestep = robot.physics_dt
    if config_integrator:
        spec.option.integrator = _INTEGRATORS[robot.integrator]
    if not robot.contacts:
        spec.option.disableflags |= int(mujoco.mjtDisableBit.mjDSBL_CONTACT)
        spec.option.cone = mujoco.mjtCone.mjCONE_PYRAMIDAL
        for g in spec.geoms:
            g.contype, g.conaffinity = 0, 0
    for fj in [j for j in spec.joints if robot.fixed_base and j.type == mujoco.mjtJoint.mjJNT_FREE]:
        spec.delete(fj)  # the base welded where the MJCF puts it; keyframes lose its 7 qpos / 6 qvel entries
        for k in spec.keys:
            k.qpos, k.qvel = list(k.qpos)[7:], list(k.qvel)[6:]
    for body, mass, pos in robot.point_masses:  # known loads (a mass at a foot), tiny inertia
        spec.body(body).add_body(pos=list(pos), mass=mass, inertia=[1e-6] * 3, explicitinertial=True)
    add_mechanisms(spec, robot.mechanisms, robot.config_path)  # crank joints, jaw equalities
    if for_mjx:
        spec.option.iterations, spec.option.ls_iterations = 1, 4
    return spec


def _compile(robot: Robot, for_mjx: bool) -> mujoco.MjModel:
    path = Path(robot.config_path)
    spec = model_spec(robot, for_mjx)
    nominal = robot.joint_params(robot.nominal_params())
    names = set(robot.joint_names) | {mech.slider for mech in robot.mechanisms}  # jaws move by their cranks
    compliant = robot.compliant
    for i, j in enumerate(robot.joints):
        sj = spec.joint(j.name)
        sj.armature = 0.0 if compliant[i] else float(nominal["armature"][i])
        sj.damping = np.zeros_like(np.asarray(sj.damping, dtype=float))
        sj.frictionloss = 0.0
    for jn, attrs in robot.joint_overrides:
        sj = spec.joint(jn)
        for k, v in attrs:
            if k == "damping":
                sj.damping = np.concatenate([[v], np.zeros(np.asarray(sj.damping).size - 1)])
            else:
                setattr(sj, k, v)
    acts = list(spec.actuators)
    drop = [i for i, a in enumerate(acts)
            if a.trntype == mujoco.mjtTrn.mjTRN_JOINT and a.target in names]
    keep = [i for i in range(len(acts)) if i not in drop]
    for k in spec.keys:
        ctrl = list(k.ctrl)
        if len(ctrl) == len(acts):
            k.ctrl = [ctrl[i] for i in keep]
    for i in drop:
        spec.delete(acts[i])
    try:
        return spec.compile()
    except Exception as e:  # noqa: BLE001
        raise _err(path, f"the edited model does not compile: {e}") from None


def home_qpos(m: mujoco.MjModel) -> np.ndarray:
    """The home posture (nq,): the keyframe named home / standing / the first keyframe, else qpos0."""
    for i in range(m.nkey):
        if mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_KEY, i) in ("home", "standing"):
            return m.key_qpos[i].copy()
    return (m.key_qpos[0] if m.nkey else m.qpos0).copy()
