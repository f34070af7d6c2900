"""One joint's fitted actuator model in MuJoCo's terms, and the patch of that joint in an MJCF tree.

Every MJCF export (:mod:`.mjcf`: a one-joint bench, one joint of a given robot file, every joint of
a whole robot) is this one patch applied to the joint(s) of a base tree: :func:`patch_joint` sets
the joint's armature, damping and frictionloss and replaces the joint's actuator(s) by the fitted
servo law (plus a constant-bias actuator for ``force_offset``).

What maps to what (derivations in docs/export.md)::

    armature          -> joint armature                              [kg.m^2 | kg]
    friction_viscous  -> joint damping                               [N.m.s/rad | N.s/m]
    friction_base     -> joint frictionloss (constant dry friction)  [N.m | N]
    PWM law (dynamixel_pwm, feetech_pwm) + DC motor -> <dcmotor input="pos">:
        V    = clip(g kp e_g V_s (q_t - q), +-max_duty V_s)          firmware duty x supply [V]
        tau  = clip(kt/R (V - kt dq), +-kt i_max)                    DC motor at the output [N.m]
      written as motorconst = kt, resistance = R, saturation current = i_max and
      controller = "kp_eff 0 kt^2/R 0 0 max_duty V_s" with kp_eff = kt/R V_s g kp e_g [N.m/rad]:
      MuJoCo's dcmotor controller drives v = (R/kt) (kp_eff (q_t - q) - kd dq) + kt dq, so
      kd = kt^2/R cancels its built-in back-EMF compensation and v is exactly the firmware
      voltage; Vmax clips it like the duty cycle, and the motor's back-EMF then gives the
      torque-speed envelope (MuJoCo XML reference, actuator/dcmotor, MuJoCo 4.0).
    pd           -> <position kp kv forcerange>: tau = clip(kp (q_t - q) - kd dq, +-u_max)
    emps_cascade -> <position>: f = g_tau clip(kp kv (q_t - q) - kv dq, +-u_max)
                    = clip(g_tau kp kv (q_t - q) - g_tau kv dq, +-g_tau u_max)
    delay        -> actuator delay / nsample (ctrl history buffer, zero-order hold)
    force_offset -> a constant-bias <general> actuator "<actuator>_force_offset" applying
                    -force_offset (the fitted plants add -force_offset to the external effort)
    q_offset     -> bench only: the pendulum body is rotated by q_offset so gravity acts on
                    sin(q + q_offset) with q the encoder reading (actuatorlab.models.plant)

Everything else (Stribeck, load-dependent and directional friction, backlash, series compliance,
unknown parameter names) is listed as not representable with a reason. The law and motor equations
are the ones of :mod:`actuatorlab.models.control` and :mod:`actuatorlab.models.motor` (after
Duclusaud et al., "Extended Friction Models for the Physics Simulation of Servo Actuators", ICRA 2025).
"""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from typing import Any, Callable, Literal, overload

import mujoco

from ..errors import ModelError, UnknownNameError
from ..models.control import DEFAULT_ERROR_GAIN
from ..models.params import PARAMS, unit_for
from ..robots.bench import fmt as _fmt, fmts as _fmts

__all__ = ["MODEL_FORMAT", "MODEL_FORMAT_VERSIONS", "FRICTION_SOLIMP", "BIAS_GROUP", "Servo", "has_dcmotor",
           "model_context", "patch_joint"]

MODEL_FORMAT = "actuatorlab-model"
MODEL_FORMAT_VERSIONS = ("1", "2")
#: fitted-model values at or beyond which a mechanism is off (see actuatorlab.models.params).
_UNLIMITED_CURRENT = float(PARAMS["current_limit"].neutral)  # [A]
_RIGID_STIFFNESS = float(PARAMS["stiffness"].neutral)  # [N.m/rad]
_UNLIMITED_EFFORT = 1e9  # [N.m | N] "no effort limit" in the pd law constants
#: impedance of the dry-friction constraint of the exported joint (MuJoCo default "0.9 0.95 0.001"):
#: closer to 1 makes the constraint harder, so a joint inside its friction band creeps ~100x less.
FRICTION_SOLIMP = "0.999 0.9999 0.001"
#: actuator group of the force_offset bias, so that disabling the servo's group (torque off, via
#: ``MjModel.opt.disableactuator``) keeps the bias, as in the fitted plant.
BIAS_GROUP = 3

#: how a PWM law becomes a MuJoCo actuator: "dcmotor" (exact, MuJoCo >= 4), "position" (first order), "auto"
Servo = Literal["auto", "dcmotor", "position"]


def has_dcmotor() -> bool:
    """Whether the installed MuJoCo has the ``dcmotor`` actuator (MuJoCo 4)."""
    return hasattr(mujoco.mjtGain, "mjGAIN_DCMOTOR")


# ----------------------------------------------------------------------------------------------
# reading the model file


@dataclass(frozen=True)
class _Context:
    """Everything the mappers need, resolved once from the model dict."""

    model: dict[str, Any]
    values: dict[str, float]  # fitted parameter values (SI)
    joint_type: Literal["revolute", "prismatic"]
    controller: str
    setup: dict[str, Any]
    constants: dict[str, Any]  # controller_constants
    timestep: float  # [s]
    servo: Servo
    bench_mode: bool
    ctrlrange: tuple[float, float] | None  # [rad | m] target range, None = unlimited

    @overload
    def const(self, *keys: str, default: float) -> float: ...

    @overload
    def const(self, *keys: str, default: None = None) -> float | None: ...

    def const(self, *keys: str, default: float | None = None) -> float | None:
        """First of ``keys`` found in controller_constants, then setup.gains, then setup.bench."""
        for src in (self.constants, self.setup.get("gains") or {}, self.setup.get("bench") or {}):
            for k in keys:
                if k in src and src[k] is not None:
                    return float(src[k])
        return default

    def v(self, name: str, default: float = 0.0) -> float:
        return self.values.get(name, default)


def _joint_type(model: dict[str, Any], setup: dict[str, Any]) -> Literal["revolute", "prismatic"]:
    """The model's joint type (``joint_type``, else ``setup.joint_type``, else revolute), checked."""
    joint_type = model.get("joint_type") or setup.get("joint_type") or "revolute"
    if joint_type == "revolute":
        return "revolute"
    if joint_type == "prismatic":
        return "prismatic"
    raise ModelError(f"model: joint_type {joint_type!r} is not 'revolute' or 'prismatic'")


def _read_values(model: dict[str, Any]) -> dict[str, float]:
    params = model.get("parameters")
    if not isinstance(params, dict):
        raise ModelError("model: 'parameters' is missing or not an object")
    out: dict[str, float] = {}
    for name, entry in params.items():
        value = entry.get("value") if isinstance(entry, dict) else entry
        if value is None:
            continue
        try:
            x = float(value)
        except (TypeError, ValueError):
            raise ModelError(f"model: parameter {name!r} has a non-numeric value {value!r}") from None
        if not math.isfinite(x):
            raise ModelError(f"model: parameter {name!r} is not finite ({x})")
        out[name] = x
    return out


def _check_format(model: dict[str, Any]) -> None:
    if not isinstance(model, dict):
        raise ModelError("model: expected a dict read from model.json")
    fmt, ver = model.get("format"), str(model.get("format_version"))
    if fmt is not None and fmt != MODEL_FORMAT:
        raise ModelError(f"model: format is {fmt!r}, expected {MODEL_FORMAT!r}")
    if fmt is not None and ver not in MODEL_FORMAT_VERSIONS:
        raise ModelError(f"model: format_version {ver!r} is not supported "
                         f"(supported: {', '.join(MODEL_FORMAT_VERSIONS)})")


# ----------------------------------------------------------------------------------------------
# the servo law -> one MuJoCo actuator


@dataclass(frozen=True)
class _Actuator:
    tag: str  # "dcmotor" | "position"
    attrib: dict[str, str]
    written: dict[str, float | str]
    notes: list[str] = field(default_factory=list)
    comment: str = ""


def _pwm_actuator(ctx: _Context) -> _Actuator:
    """Dynamixel/Feetech PWM position law driving a DC motor (actuatorlab.models.control)."""
    kt, R = ctx.v("kt"), ctx.v("R")
    if kt <= 0 or R <= 0:
        raise ModelError(f"model: controller {ctx.controller!r} needs kt > 0 and R > 0 (got kt={kt}, R={R})")
    v_supply = ctx.setup.get("supply_voltage")
    if v_supply is None:
        v_supply = ctx.const("supply_voltage", "vin")
    if v_supply is None or float(v_supply) <= 0:
        raise ModelError(f"model: controller {ctx.controller!r} needs setup.supply_voltage [V] > 0")
    v_supply = float(v_supply)
    kp = ctx.const("kp")
    if kp is None:
        raise ModelError(f"model: controller {ctx.controller!r} needs gain 'kp' in setup.gains")
    error_gain = ctx.const("error_gain", default=DEFAULT_ERROR_GAIN[ctx.controller])  # a PWM law has one
    max_duty = ctx.const("max_duty", default=1.0)
    gain_scale = ctx.v("gain_scale", 1.0)
    kp_eff = kt / R * v_supply * gain_scale * kp * error_gain  # [N.m/rad]
    b_emf = kt * kt / R  # [N.m.s/rad]
    v_max = max_duty * v_supply  # [V]
    stall = kt / R * v_max  # [N.m]
    i_max = ctx.v("current_limit", _UNLIMITED_CURRENT)
    limited = i_max < _UNLIMITED_CURRENT
    written: dict[str, float | str] = {
        "actuator.kp_eff": kp_eff, "actuator.back_emf_damping": b_emf, "actuator.stall_torque": stall,
        "actuator.motorconst": kt, "actuator.resistance": R, "actuator.vmax": v_max,
        "controller.kp": kp, "controller.error_gain": error_gain, "controller.max_duty": max_duty,
        "controller.gain_scale": gain_scale, "supply_voltage": v_supply,
    }
    if limited:
        written["actuator.current_limit"] = i_max
        written["actuator.torque_limit"] = kt * i_max
    e_lim = _effort_limit(ctx)  # written on the joint (_set_joint); the fallback clips at it too
    if e_lim is not None:
        written["actuator.effort_limit"] = e_lim
    servo = ctx.servo
    if servo == "auto":
        servo = "dcmotor" if has_dcmotor() else "position"
    if servo == "dcmotor":
        if not has_dcmotor():
            raise ModelError(f"MuJoCo {mujoco.__version__} has no dcmotor actuator; use servo='position'")
        attrib = {"input": "pos", "motorconst": _fmt(kt), "resistance": _fmt(R),
                  "controller": _fmts(kp_eff, 0.0, b_emf, 0.0, 0.0, v_max)}
        if limited:
            attrib["saturation"] = _fmts(0.0, i_max, 0.0)
        written["actuator.type"] = "dcmotor"
        comment = (f" actuatorlab: {ctx.controller} law + DC motor. V = clip(kp_eff*R/kt*(ctrl - q), "
                   f"+-Vmax); tau = kt/R*(V - kt*dq)"
                   + (", clipped to +-kt*current_limit" if limited else "")
                   + f". kp_eff = kt/R*V_s*gain_scale*kp*error_gain = {kp_eff:.6g} N.m/rad; controller kd"
                   f" = kt^2/R cancels dcmotor's back-EMF compensation. ")
        return _Actuator("dcmotor", attrib, written, [], comment)
    # first-order fallback: a position servo with the back-EMF as velocity feedback
    t_max = min(stall, kt * i_max) if limited else stall
    t_max = t_max if e_lim is None else min(t_max, e_lim)
    attrib = {"kp": _fmt(kp_eff), "kv": _fmt(b_emf), "forcerange": _fmts(-t_max, t_max),
              "forcelimited": "true"}
    written.update({"actuator.type": "position", "actuator.forcerange": t_max})
    notes = [f"{ctx.controller} duty saturation: a position actuator clips kp_eff*(q_t - q) - (kt^2/R)*dq "
             "as a whole at the stall torque, the motor clips the voltage before the back-EMF, so the "
             "torque-speed envelope tau_max(dq) = kt/R*(Vmax - kt*dq) is lost (use MuJoCo >= 4 dcmotor)"]
    comment = (f" actuatorlab: {ctx.controller} law linearised: tau = clip(kp_eff*(ctrl - q) - kt^2/R*dq,"
               f" +-{t_max:.6g}) ")
    return _Actuator("position", attrib, written, notes, comment)


def _pd_actuator(ctx: _Context) -> _Actuator:
    """Ideal-torque PD law: tau = clip(kp (q_t - q) - kd dq, +-u_max)."""
    kp = ctx.const("kp")
    if kp is None:
        raise ModelError("model: controller 'pd' needs gain 'kp'")
    kd = ctx.const("kd", "kv", default=0.0)
    u_max = ctx.const("u_max", "effort_limit", default=_UNLIMITED_EFFORT)
    attrib = {"kp": _fmt(kp), "kv": _fmt(kd)}
    written: dict[str, float | str] = {"actuator.type": "position", "actuator.kp_eff": kp, "actuator.kv": kd}
    if u_max < _UNLIMITED_EFFORT:
        attrib.update(forcerange=_fmts(-u_max, u_max), forcelimited="true")
        written["actuator.forcerange"] = u_max
    else:
        attrib["forcelimited"] = "false"
    comment = " actuatorlab: pd law, tau = clip(kp*(ctrl - q) - kd*dq, +-u_max) "
    return _Actuator("position", attrib, written, [], comment)


def _emps_actuator(ctx: _Context) -> _Actuator:
    """EMPS cascade: f = g_tau clip(kp kv (q_t - q) - kv dq, +-u_max) (Janot et al. 2019)."""
    kp, kv = ctx.const("kp"), ctx.const("kv", "kd")
    g_tau = ctx.v("drive_gain", 0.0) or ctx.v("gtau", 0.0) or ctx.const("drive_gain", "gtau")
    if kp is None or kv is None or not g_tau:
        raise ModelError("model: controller 'emps_cascade' needs gains kp, kv and bench gtau [N/V]")
    u_max = ctx.const("u_max", default=10.0)
    attrib = {"kp": _fmt(g_tau * kp * kv), "kv": _fmt(g_tau * kv),
              "forcerange": _fmts(-g_tau * u_max, g_tau * u_max), "forcelimited": "true"}
    written: dict[str, float | str] = {
        "actuator.type": "position", "actuator.kp_eff": g_tau * kp * kv, "actuator.kv": g_tau * kv,
        "actuator.forcerange": g_tau * u_max, "controller.kp": kp, "controller.kv": kv,
        "controller.u_max": u_max, "drive_gain": g_tau}
    notes = ["emps_cascade velocity estimate: the controller differentiates sampled positions over "
             "control periods (actuatorlab.models.control.emps_cascade), MuJoCo feeds back the exact "
             "joint velocity"]
    comment = " actuatorlab: emps_cascade, f = gtau*clip(kp*kv*(ctrl - q) - kv*dq, +-u_max) "
    return _Actuator("position", attrib, written, notes, comment)


_LAWS: dict[str, Callable[[_Context], _Actuator]] = {
    "dynamixel_pwm": _pwm_actuator,
    "feetech_pwm": _pwm_actuator,
    "pd": _pd_actuator,
    "emps_cascade": _emps_actuator,
}

def model_context(model: dict[str, Any], *, servo: Servo = "auto", bench: bool = True, timestep: float = 0.0,
                  ctrlrange: tuple[float, float] | None = None) -> _Context:
    """The mapping context of a one-joint model dict (format, parameters, controller checked).

    servo: how a PWM law maps (:data:`Servo`); bench: the base applies the fitted ``q_offset`` (the
    bench robot); timestep [s]: the physics step the actuator runs at; ctrlrange [rad | m]: the
    joint's range, None = unlimited."""
    _check_format(model)
    if servo not in ("auto", "dcmotor", "position"):
        raise UnknownNameError("servo mapping", str(servo), ["auto", "dcmotor", "position"])
    values = _read_values(model)
    setup = dict(model.get("setup") or {})
    controller = model.get("controller") or setup.get("controller")
    joint_type = _joint_type(model, setup)
    if controller not in _LAWS:
        raise UnknownNameError("controller", str(controller), list(_LAWS))
    constants = dict(model.get("controller_constants") or {})
    return _Context(model, values, joint_type, controller, setup, constants, timestep, servo, bench, ctrlrange)


# ----------------------------------------------------------------------------------------------
# what cannot be represented

_REASONS: dict[str, str] = {
    "friction_stribeck": "Stribeck peak above Coulomb at rest: MuJoCo frictionloss is one constant "
                         "dry-friction level, only friction_base is exported",
    "load_friction": "Coulomb friction growing with the torque through the gearbox: frictionloss is "
                     "load-independent",
    "load_friction_stribeck": "load-dependent friction at rest: frictionloss is load-independent",
    "load_friction_motor": "directional (driving) load friction: frictionloss is load-independent "
                           "and symmetric",
    "load_friction_external": "directional (backdriving) load friction: frictionloss is "
                              "load-independent and symmetric",
    "load_friction_motor_stribeck": "directional load friction at rest: frictionloss is "
                                    "load-independent and symmetric",
    "load_friction_external_stribeck": "directional load friction at rest: frictionloss is "
                                       "load-independent and symmetric",
    "load_friction_motor_quad": "quadratic load friction at rest: frictionloss is load-independent",
    "mesh_friction_static": "gear-mesh breakaway at rest growing with the transmitted torque: "
                            "frictionloss is load-independent",
    "mesh_friction_drive": "gear-mesh efficiency loss when the motor drives the load (a fraction of "
                           "the transmitted torque): frictionloss is load-independent and the same "
                           "in both power-flow directions",
    "mesh_friction_back": "gear-mesh efficiency loss when the load backdrives the motor (a fraction "
                          "of the transmitted torque): frictionloss is load-independent and the same "
                          "in both power-flow directions",
    "load_friction_external_quad": "quadratic load friction at rest: frictionloss is load-independent",
    "source_resistance": "supply sag through a source resistance (duty-dependent effective "
                         "resistance R + d^2 R_s): the exported motor sees the stiff supply",
    "backlash": "dead band between motor and output needs a second (motor-side) joint; the "
                "export does not add bodies to the kinematic tree",
    "stiffness": "series compliance needs a second (motor-side) joint coupled by a spring; the "
                 "export does not add bodies to the kinematic tree",
}
#: parameters of the winding temperature (``+thermal``): neutral values that are not zero
_THERMAL = ("thermal_resistance", "thermal_capacitance", "ambient_temperature", "resistance_tempco")
#: parameters whose effect the mapping covers, or that carry no mechanism of their own
_HANDLED = {"kt", "R", "armature", "friction_base", "friction_viscous", "delay", "current_limit",
            "gain_scale", "force_offset", "q_offset", "stribeck_velocity", "stribeck_alpha",
            "drive_gain", "gtau"}


def _is_on(name: str, value: float) -> bool:
    if name == "stiffness":
        return value < _RIGID_STIFFNESS
    if name == "current_limit":
        return value < _UNLIMITED_CURRENT
    return value != 0.0


def _unit(name: str, joint_type: str) -> str:
    return unit_for(name, joint_type) if name in PARAMS else "(unit unknown)"


def _not_representable(ctx: _Context) -> list[str]:
    out: list[str] = []
    vals = ctx.values
    thermal = "thermal" in str(ctx.model.get("model", "")).split("+")[1:]
    for name, value in vals.items():
        if name in _THERMAL:  # start values, not off switches: lost only where the model is +thermal
            if thermal and name == "thermal_resistance":
                out.append(f"+thermal (thermal_resistance = {value:.6g} K/W, thermal_capacitance = "
                           f"{vals.get('thermal_capacitance', float('nan')):.6g} J/K): winding temperature "
                           f"with R(T) and I^2 R heating; MuJoCo's dcmotor has a constant R (the exported "
                           f"R is the fitted one at 25 degC)")
            continue
        if not _is_on(name, value):
            continue
        unit = _unit(name, ctx.joint_type)
        head = f"{name} = {value:.6g}{'' if unit == '1' else ' ' + unit}: "
        if name in _REASONS:
            out.append(head + _REASONS[name])
        elif name in ("stribeck_velocity", "stribeck_alpha"):
            if any(_is_on(k, vals.get(k, 0.0)) for k in ("friction_stribeck", "load_friction_stribeck",
                                                            "load_friction_motor_stribeck",
                                                            "load_friction_external_stribeck",
                                                            "mesh_friction_static")):
                out.append(head + "shape of the Stribeck decay exp(-(|dq|/v_s)^alpha), not exported "
                                  "(see friction_stribeck)")
        elif name == "q_offset" and not ctx.bench_mode and ctx.joint_type == "revolute":
            out.append(head + "encoder zero of the test bench (gravity acts on sin(q + q_offset)); "
                              "it belongs to the bench calibration, not to this robot's joint")
        elif name not in _HANDLED:
            out.append(head + "unknown parameter, not representable by this exporter")
    return out


# ----------------------------------------------------------------------------------------------
# XML building blocks


def _effort_limit(ctx: _Context) -> float | None:
    """A robot's bound on the motor effort [N.m | N] (``controller_constants.effort_limit``, set by
    the whole-robot export, :mod:`actuatorlab.export.robot`; the robot rollouts clip
    ``|tau_m| <= effort_limit``), or None."""
    e = ctx.constants.get("effort_limit")
    if e is None or not math.isfinite(float(e)):
        return None
    if float(e) <= 0:
        raise ModelError(f"model: controller_constants.effort_limit must be > 0 (got {e})")
    return float(e)


def _set_joint(joint_el: ET.Element, ctx: _Context) -> dict[str, float | str]:
    armature = ctx.v("armature")
    damping = ctx.v("friction_viscous")
    frictionloss = ctx.v("friction_base")
    if armature < 0 or damping < 0 or frictionloss < 0:
        raise ModelError("model: armature, friction_viscous and friction_base must be >= 0")
    joint_el.set("armature", _fmt(armature))
    joint_el.set("damping", _fmt(damping))
    joint_el.set("frictionloss", _fmt(frictionloss))
    written: dict[str, float | str] = {"joint": joint_el.get("name", ""), "joint.armature": armature,
                                       "joint.damping": damping, "joint.frictionloss": frictionloss}
    e_lim = _effort_limit(ctx)
    if e_lim is not None:  # MuJoCo clamps the joint's total actuator force (dcmotor has no forcerange)
        joint_el.set("actuatorfrclimited", "true")
        joint_el.set("actuatorfrcrange", _fmts(-e_lim, e_lim))
        written["joint.actuatorfrcrange"] = e_lim
    if frictionloss > 0:
        # the fitted friction sticks exactly (stick/slip budget); MuJoCo's soft friction constraint
        # creeps. A harder impedance cuts the creep ~100x (see docs/export.md).
        joint_el.set("solimpfriction", FRICTION_SOLIMP)
        written["joint.solimpfriction"] = FRICTION_SOLIMP
    return written


def _actuator_elements(ctx: _Context, joint: str,
                       name: str) -> tuple[list[ET.Element[Any]], dict[str, float | str], list[str]]:
    """The servo actuator (and a constant-bias actuator for force_offset) as XML elements."""
    try:
        mapper = _LAWS[ctx.controller]
    except KeyError:
        raise UnknownNameError("controller", ctx.controller, list(_LAWS)) from None
    act = mapper(ctx)
    attrib = {"name": name, "joint": joint, "gear": "1"}
    if ctx.ctrlrange is not None:
        attrib.update(ctrllimited="true", ctrlrange=_fmts(*ctx.ctrlrange))
    else:
        attrib["ctrllimited"] = "false"
    attrib.update(act.attrib)
    written: dict[str, float | str] = {"actuator": name, **act.written}
    delay = ctx.v("delay")
    if delay < 0:
        raise ModelError(f"model: delay must be >= 0 (got {delay})")
    if delay > 0:
        n = max(1, math.ceil(delay / ctx.timestep - 1e-9))
        attrib.update(delay=_fmt(delay), nsample=str(n + 1), interp="zoh")
        written["actuator.delay"] = delay
        written["actuator.delay_effective"] = n * ctx.timestep
    elements: list[ET.Element[Any]] = [ET.Comment(_comment_text(act.comment)), ET.Element(act.tag, attrib)]
    offset = ctx.v("force_offset")
    if offset != 0.0:
        bias = ET.Element("general", {
            "name": f"{name}_force_offset", "joint": joint, "gear": "1", "group": str(BIAS_GROUP),
            "ctrllimited": "false",
            "forcelimited": "false", "gaintype": "fixed", "gainprm": "0", "biastype": "affine",
            "biasprm": _fmts(-offset, 0.0, 0.0)})
        elements += [ET.Comment(_comment_text(
            f" actuatorlab: force_offset, a constant effort of -force_offset = {-offset:.6g} on the joint ")),
            bias]
        written["bias_actuator"] = f"{name}_force_offset"
        written["bias.effort"] = -offset
    return elements, written, act.notes


def _comment_text(text: str) -> str:
    """XML comments may not contain '--' nor end with '-'."""
    text = text.replace("--", "- -")
    return text + " " if text.endswith("-") else text



# ----------------------------------------------------------------------------------------------
# patching one joint of a tree


def _actuator_children(root: ET.Element) -> list[ET.Element]:
    return [c for sec in root.iter("actuator") for c in sec if isinstance(c.tag, str)]


def _find_joint_element(root: ET.Element, name: str) -> ET.Element | None:
    for wb in root.iter("worldbody"):
        for j in wb.iter("joint"):
            if j.get("name") == name:
                return j
    return None


def patch_joint(root: ET.Element, m0: mujoco.MjModel, ctx: _Context, joint: str, *, label: str,
                act_name: str | None = None) -> tuple[dict[str, float | str], list[str]]:
    """Give ``joint`` of the MJCF tree ``root`` (in place) the fitted joint properties and servo of ``ctx``.

    ``m0`` is ``root`` compiled (actuator names, keyframes); ``label`` names the base file in
    errors. The joint's own actuators are replaced by the fitted servo (named like the first of
    them, else ``act_name``, else the joint, else ``<joint>_actuatorlab``) at the place of the
    first, else at the end of the last ``<actuator>`` section (created when there is none); keyframe
    ``ctrl`` vectors follow. Returns (written quantities, notes on what the servo cannot express)."""
    joint_el = _find_joint_element(root, joint)
    if joint_el is None:
        raise ModelError(f"{label}: joint {joint!r} exists in the compiled model but not as a <joint> "
                         "element of the XML (attached or generated?); cannot patch it")
    written = _set_joint(joint_el, ctx)
    old = _actuator_children(root)
    if len(old) != m0.nu:
        raise ModelError(f"{label}: found {len(old)} actuator elements but the model has {m0.nu} "
                         "actuators (plugins/attach?); cannot patch safely")
    mine = [a for a in old if a.get("joint") == joint or a.get("jointinparent") == joint]
    taken = {m0.actuator(i).name for i in range(m0.nu)} - {a.get("name") for a in mine}
    name = next((a.get("name") for a in mine if a.get("name")), act_name)
    if name is None:
        name = joint if joint not in taken else f"{joint}_actuatorlab"
    elements, w_act, notes = _actuator_elements(ctx, joint, name)
    if f"{name}_force_offset" in taken and "bias_actuator" in w_act:
        raise ModelError(f"{label}: an actuator named {name}_force_offset already exists")
    # place the new actuator where the first replaced one was, else at the end of the last section
    if mine:
        parent = next(sec for sec in root.iter("actuator") if any(c is mine[0] for c in sec))
        pos = list(parent).index(mine[0])
    else:
        secs = list(root.iter("actuator"))
        parent = secs[-1] if secs else ET.SubElement(root, "actuator")
        pos = len(parent)
    for a in mine:
        for sec in root.iter("actuator"):
            if any(c is a for c in sec):
                sec.remove(a)
                break
    for k, el in enumerate(elements):
        parent.insert(pos + k, el)
    if mine:
        written["removed_actuators"] = ", ".join(f"{a.get('name', '?')} ({a.tag})" for a in mine)
    written.update(w_act)
    _fix_keyframes(root, old, m0, joint, name)
    return written, notes


def _fix_keyframes(root: ET.Element, old: list[ET.Element], m0: mujoco.MjModel, joint: str,
                   act_name: str) -> None:
    """Keep keyframe ctrl vectors consistent with the new actuator list: surviving actuators keep
    their value, the new servo gets the keyframe's joint position as target, the bias actuator 0."""
    keys = [k for k in root.iter("key")]
    if not any("ctrl" in k.attrib for k in keys):
        return
    new = _actuator_children(root)
    index = {id(a): i for i, a in enumerate(old)}
    jid = m0.joint(joint).id
    qadr = int(m0.jnt_qposadr[jid])
    for k_idx, key in enumerate(keys):
        if "ctrl" not in key.attrib or k_idx >= m0.nkey:
            continue
        ctrl_old = m0.key_ctrl[k_idx]
        vals = []
        for a in new:
            if id(a) in index:
                vals.append(float(ctrl_old[index[id(a)]]))
            elif a.get("name") == act_name:
                vals.append(float(m0.key_qpos[k_idx][qadr]))
            else:
                vals.append(0.0)
        key.set("ctrl", _fmts(*vals))
