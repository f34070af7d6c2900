"""Actuator configurations for mjlab and Isaac Lab from a fitted analytic model (``RUN/model.json``).

Both frameworks compute an explicit actuator effort at **every physics step** from the joint's
position error ``e = q* - q`` [rad | m] and velocity ``dq``, and clip it with a linear DC-motor
torque-speed curve (mjlab ``actuator/dc_actuator.py`` ``dc_motor_clip``; Isaac Lab
``actuators/actuator_pd.py`` ``DCMotor._clip_effort``)::

    tau   = stiffness e - damping dq                                       PD part
    top   = min(S (1 - dq / w0), F)      bottom = max(S (-1 - dq / w0), -F)   S = saturation_effort,
    tau_c = clip(tau, bottom, top)                                          w0 = velocity_limit, F = effort_limit

The fitted PWM position servo (:mod:`actuatorlab.models.control`, :mod:`actuatorlab.models.motor`;
after Duclusaud et al., ICRA 2025) is exactly this law. With ``kp_eff = kt/R V_s g kp e_g``::

    V   = clip(V_s g kp e_g e, +-Vmax)                  firmware duty x supply [V]
    tau = clip(kt/R (V - kt dq), +-kt i_max)            DC motor, inductance neglected
        = clip(clip(kp_eff e - kt^2/R dq, S (-1 - dq/w0), S (1 - dq/w0)), +-F)

because ``tau`` grows monotonically with ``V``: clipping V at +-Vmax is clipping tau at the
torque-speed lines with ``S = kt Vmax / R`` (stall torque) and ``w0 = Vmax / kt`` (no-load speed);
``F = kt i_max`` (the fitted current limit). Hence ``stiffness = kp_eff``, ``damping = kt^2/R``
(back-EMF). Older Isaac Lab releases' ``DCMotor`` keeps the top line >= 0 and the bottom line <= 0
(``clip(..., min=0)``), which differs from the motor only beyond the no-load speed |dq| > w0;
current releases clip four-quadrant like mjlab.

mjlab's ``BuiltinDcMotorActuatorCfg`` wraps MuJoCo's ``<dcmotor>``; in MuJoCo 3.11 (the version
mjlab 1.6 pins) its position controller outputs the voltage itself, ``v = clip(kp e - kd dq,
+-Vmax)``, so it gets ``kp = V_s g kp e_g = kp_eff R / kt`` [V/rad] and ``kd = 0`` (MuJoCo 4.0's
controller differs: :mod:`.mjcf`).

The ``pd`` law is ``IdealPd`` (``clip(kp e - kd dq, +-u_max)``), ``emps_cascade`` the same with
``g_tau`` folded in (velocity estimate lost). ``delay`` becomes a whole number of physics steps
``round(delay / dt)`` (mjlab ``delay_min_lag = delay_max_lag``; Isaac Lab ``DelayedPDActuatorCfg``
``min_delay = max_delay``). ``dt`` is the model's control period (the log's sample period): the
files declare it and the simulator's physics step must equal it.

Each export writes ``<stem>.py`` (the configuration objects to paste), ``<stem>.json`` (the same
fields, machine-readable, with the metadata) and lists what is lost.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import ModelError, UnknownNameError
from ..models.actuator_model import LEARNED_KINDS
from . import mjcf_joint as _mjcf
from ..files import atomic_write as _write
from .. import __version__

__all__ = ["CfgExport", "analytic_law", "target_configs", "mjlab_configs", "isaaclab_configs", "write_cfg", "common_metadata",
           "POSITION_ERROR", "EXPORT_FORMAT"]

EXPORT_FORMAT = "actuatorlab-export"
#: the sign convention every export states (the second trap of shipped actuator nets)
POSITION_ERROR = "e = q_target - q (target minus measured position); e > 0 drives q up"


@dataclass(frozen=True)
class CfgExport:
    """What one mjlab / Isaac Lab export wrote.

    Attributes:
        target: "mjlab" | "isaaclab".
        files: every file written (the .py snippet, the .json, network files).
        configs: configuration class name -> its fields (SI units; the .json holds the same).
        metadata: rate, lags, sign convention, scales and units (also in the .json and README).
        not_representable: one line per fitted mechanism the target cannot reproduce, with why.
    """

    target: str
    files: list[Path]
    configs: dict[str, dict[str, Any]]
    metadata: dict[str, Any]
    not_representable: list[str] = field(default_factory=list)


def _unit(joint_type: str) -> dict[str, str]:
    lin = joint_type == "prismatic"
    return {"position": "m" if lin else "rad", "velocity": "m/s" if lin else "rad/s",
            "effort": "N" if lin else "N.m", "stiffness": "N/m" if lin else "N.m/rad",
            "damping": "N.s/m" if lin else "N.m.s/rad", "armature": "kg" if lin else "kg.m^2", "time": "s"}


def model_dt(model: dict[str, Any]) -> float:
    """The model's control period [s] (``fit.dt``, the sample period of the logs it was fitted on)."""
    dt = (model.get("fit") or {}).get("dt") or (model.get("data") or {}).get("dt")
    if dt is None or not float(dt) > 0:
        raise ModelError("model: no control period fit.dt [s] recorded; the export must declare the rate "
                         "the model runs at")
    return float(dt)


def common_metadata(model: dict[str, Any], target: str, dt: float) -> dict[str, Any]:
    """Rate, sign convention and units every export carries."""
    jt = model.get("joint_type") or (model.get("setup") or {}).get("joint_type") or "revolute"
    return {"format": EXPORT_FORMAT, "format_version": 1, "target": target, "actuatorlab_version": __version__,
            "model": model.get("model"), "kind": model.get("kind") or "analytic", "joint_type": jt,
            "physics_dt_s": dt, "sample_rate_hz": 1.0 / dt,
            "rate_note": f"run the actuator at every physics step of {dt:g} s ({1.0 / dt:g} Hz): it was "
                         "identified at this rate; another physics step changes its dynamics",
            "position_error": POSITION_ERROR, "effort_sign": "positive effort accelerates q positively",
            "units": _unit(jt)}


@dataclass(frozen=True)
class AnalyticLaw:
    """The fitted servo law reduced to the explicit PD + torque-speed-clip form (SI units)."""

    controller: str
    stiffness: float      # [N.m/rad]
    damping: float        # [N.m.s/rad]
    saturation: float     # [N.m] S, stall effort (inf: no torque-speed curve)
    velocity_limit: float  # [rad/s] w0 (inf: none)
    effort_limit: float   # [N.m] F
    kt: float | None
    R: float | None
    vmax: float | None    # [V]
    current_limited: bool  # effort_limit F is finite (a current limit, or a robot's effort bound)
    armature: float
    frictionloss: float
    viscous: float
    delay: float          # [s] fitted
    lag: int              # [physics steps]
    force_offset: float
    lost: list[str]


def analytic_law(model: dict[str, Any], dt: float) -> AnalyticLaw:
    """Reduce a fitted analytic model to :class:`AnalyticLaw` (see the module docstring)."""
    _mjcf._check_format(model)
    if model.get("kind") in LEARNED_KINDS:
        raise ModelError(f"model: a {model['kind']} model is not analytic")
    ctx = _mjcf.model_context(model, servo="position", timestep=dt)
    values, controller = ctx.values, ctx.controller
    act = _mjcf._LAWS[controller](ctx)
    w = act.written
    inf = math.inf
    lost = list(_mjcf._not_representable(ctx))
    kt = R = vmax = None
    limited = False
    if controller in ("dynamixel_pwm", "feetech_pwm"):
        kt, R, vmax = float(w["actuator.motorconst"]), float(w["actuator.resistance"]), float(w["actuator.vmax"])
        limited = "actuator.current_limit" in w or "actuator.effort_limit" in w
        S = float(w["actuator.stall_torque"])
        F = kt * float(values.get("current_limit", _mjcf._UNLIMITED_CURRENT))
        if "actuator.effort_limit" in w:  # a robot's bound on the motor effort (whole-robot export)
            F = min(F, float(w["actuator.effort_limit"]))
        stiffness, damping, w0 = float(w["actuator.kp_eff"]), float(w["actuator.back_emf_damping"]), vmax / kt
    else:
        stiffness, damping = float(w["actuator.kp_eff"]), float(w["actuator.kv"])
        F = float(w.get("actuator.forcerange", inf))
        S, w0 = inf, inf
        lost += [n for n in act.notes]
    delay = float(values.get("delay", 0.0))
    if delay < 0:
        raise ModelError(f"model: delay must be >= 0 (got {delay})")
    lag = int(round(delay / dt))
    if abs(lag * dt - delay) > 1e-9:
        lost.append(f"delay = {delay:.6g} s is rounded to {lag} physics step(s) = {lag * dt:.6g} s (the fitted "
                    "model interpolates between samples; the targets delay by whole steps)")
    offset = float(values.get("force_offset", 0.0))
    if offset:
        lost.append(f"force_offset = {offset:.6g}: a constant effort -force_offset on the joint; no actuator "
                    "field holds it: add it as a feed-forward effort target (joint effort target)")
    if "q_offset" in values and values["q_offset"] != 0.0:
        lost.append(f"q_offset = {values['q_offset']:.6g}: encoder zero of the test bench, not a property "
                    "of the robot's joint")
    return AnalyticLaw(controller, stiffness, damping, S, w0, F, kt, R, vmax, limited,
                       float(values.get("armature", 0.0)), float(values.get("friction_base", 0.0)),
                       float(values.get("friction_viscous", 0.0)), delay, lag, offset, lost)


def mjlab_configs(law: AnalyticLaw, joint: str) -> dict[str, dict[str, Any]]:
    """mjlab (1.6) actuator configuration fields; the first entry is the recommended one."""
    common = {"target_names_expr": [joint], "armature": law.armature, "frictionloss": law.frictionloss,
              "viscous_damping": law.viscous, "delay_min_lag": law.lag, "delay_max_lag": law.lag}
    if law.kt is not None:
        assert law.R is not None, "analytic_law sets kt, R and vmax together"
        return {
            "DcMotorActuatorCfg": {**common, "stiffness": law.stiffness, "damping": law.damping,
                                   "effort_limit": law.effort_limit, "saturation_effort": law.saturation,
                                   "velocity_limit": law.velocity_limit},
            # MuJoCo 3.11 (mjlab 1.6's): the dcmotor controller outputs the voltage itself,
            # v = clip(kp e - kd dq, +-Vmax) (MuJoCo 4.0 scales by R/K and adds back-EMF
            # compensation, see mjcf_joint.py): kp = V_s g kp e_g [V/rad] = kp_eff R / kt, kd = 0
            "BuiltinDcMotorActuatorCfg": {
                **common, "motor_params": {"DcMotorPhysicalParams": {"kt": law.kt, "ke": law.kt,
                                                                     "resistance": law.R}},
                "mode": "DcMotorInputMode.POSITION", "stiffness": law.stiffness * law.R / law.kt, "damping": 0.0,
                "voltage_limit": law.vmax, "effort_limit": law.effort_limit if law.current_limited else None},
        }
    return {"IdealPdActuatorCfg": {**common, "stiffness": law.stiffness, "damping": law.damping,
                                   "effort_limit": law.effort_limit}}


def isaaclab_configs(law: AnalyticLaw, joint: str) -> dict[str, dict[str, Any]]:
    """Isaac Lab actuator configuration fields; the first entry is the recommended one."""
    common = {"joint_names_expr": [joint], "armature": law.armature}
    out: dict[str, dict[str, Any]] = {}
    if law.kt is not None:
        out["DCMotorCfg"] = {**common, "stiffness": law.stiffness, "damping": law.damping,
                             "saturation_effort": law.saturation, "velocity_limit": law.velocity_limit,
                             "effort_limit": law.effort_limit}
    if law.lag or law.kt is None:
        out["DelayedPDActuatorCfg"] = {**common, "stiffness": law.stiffness, "damping": law.damping,
                                       "effort_limit": min(law.effort_limit, law.saturation),
                                       "min_delay": law.lag, "max_delay": law.lag}
    return out


def target_configs(law: AnalyticLaw, joint: str, target: str) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """(configuration fields, what is lost) of one joint's law for ``target`` ("mjlab" | "isaaclab")."""
    if target == "mjlab":
        return mjlab_configs(law, joint), list(law.lost)
    if target == "isaaclab":
        return isaaclab_configs(law, joint), law.lost + isaaclab_lost(law)
    raise UnknownNameError("export target", target, ["mjlab", "isaaclab"])


def isaaclab_lost(law: AnalyticLaw) -> list[str]:
    out = []
    if law.frictionloss or law.viscous:
        out.append(f"friction_base = {law.frictionloss:.6g}, friction_viscous = {law.viscous:.6g}: Isaac Lab's "
                   "joint 'friction' is a PhysX coefficient, not a constant effort; not written: add them to "
                   "the articulation (joint friction / damping of your asset) yourself")
    if law.kt is not None and law.lag:
        out.append(f"delay of {law.lag} step(s): Isaac Lab has no delayed DC motor; DCMotorCfg has no delay, "
                   "DelayedPDActuatorCfg clips at the stall torque without the torque-speed curve (both written)")
    if law.kt is not None:
        out.append("older Isaac Lab releases' DCMotor keeps the torque-speed limits >= 0 (top) and <= 0 (bottom) "
                   f"(current ones are four-quadrant): differs from the motor only beyond |dq| > {law.velocity_limit:.6g}")
    return out


def _py(v: Any) -> str:
    if isinstance(v, float):
        if math.isinf(v):
            return 'float("inf")' if v > 0 else '-float("inf")'
        return repr(v)
    if isinstance(v, list):
        return "(" + ", ".join(_py(x) for x in v) + ("," if len(v) == 1 else "") + ")"
    if isinstance(v, str) and v.startswith("DcMotorInputMode."):
        return v
    if isinstance(v, dict) and len(v) == 1 and next(iter(v)).startswith("DcMotor"):
        (name, kw), = v.items()
        return f"{name}(" + ", ".join(f"{k}={_py(x)}" for k, x in kw.items()) + ")"
    return repr(v)


_IMPORTS = {"mjlab": "mjlab.actuator", "isaaclab": "isaaclab.actuators"}


def _snippet(target: str, configs: dict[str, dict[str, Any]], metadata: dict[str, Any]) -> str:
    # a key "GROUP/ClassName" (whole-robot exports: one configuration per group of joints) names
    # the entry GROUP of ACTUATORS; a plain "ClassName" names both
    names = {name.rsplit("/", 1)[-1] for name in configs}
    for fields in configs.values():
        for v in fields.values():
            if isinstance(v, dict):
                names.update(v)
            if isinstance(v, str) and v.startswith("DcMotorInputMode."):
                names.add("DcMotorInputMode")
    lines = ['"""Actuator configuration written by `actuatorlab export` (see the README.md beside this file).',
             "",
             f"Physics step: {metadata['physics_dt_s']:g} s ({metadata['sample_rate_hz']:g} Hz). "
             f"Position error: {metadata['position_error']}.",
             "Units: " + ", ".join(f"{k} [{u}]" for k, u in metadata["units"].items()) + ".",
             '"""', "", f"from {_IMPORTS[target]} import {', '.join(sorted(names))}", "",
             "ACTUATORS = {"]
    if any("network_file" in f for f in configs.values()):
        lines.insert(lines.index(f"from {_IMPORTS[target]} import {', '.join(sorted(names))}"), "from pathlib import Path\n")
    for name, fields in configs.items():
        # the network file lies beside this snippet: resolve it from the snippet's own path
        body = ",\n        ".join(f"{k}=str(Path(__file__).with_name({v!r}))" if k == "network_file" else f"{k}={_py(v)}"
                                   for k, v in fields.items())
        lines.append(f"    {name!r}: {name.rsplit('/', 1)[-1]}(\n        {body}),")
    lines += ["}", "", "#: the metadata of this export (also in the .json beside this file)",
              f"METADATA = {json.dumps(metadata, indent=1, sort_keys=True, default=str)}", ""]
    text = "\n".join(lines)
    return text.replace(": Infinity", ': float("inf")').replace(": NaN", ': float("nan")').replace(
        ": true", ": True").replace(": false", ": False").replace(": null", ": None")


def atomic_write(path: Path, data: bytes | str) -> Path:
    """Write ``data`` to ``path`` atomically (:func:`actuatorlab.files.atomic_write`)."""

    return _write(path, data)


def cfg_paths(out: str | Path) -> tuple[Path, Path]:
    """(``<stem>.py``, ``<stem>.json``) for the path given on the command line (.py or .json)."""
    out = Path(out)
    if out.suffix not in (".py", ".json"):
        raise ModelError(f"{out}: name the configuration file .py or .json (both are written)")
    return out.with_suffix(".py"), out.with_suffix(".json")


def write_cfg(target: str, out: str | Path, configs: dict[str, dict[str, Any]], metadata: dict[str, Any],
              lost: list[str], extra_files: Sequence[Path] = ()) -> CfgExport:
    """Write the snippet and the JSON for ``configs``; returns a :class:`CfgExport`."""
    py, js = cfg_paths(out)
    metadata = {**metadata, "recommended": next(iter(configs)), "not_representable": list(lost)}
    atomic_write(js, json.dumps({"configs": configs, "metadata": metadata}, indent=1, sort_keys=True) + "\n")
    atomic_write(py, _snippet(target, configs, metadata))
    return CfgExport(target, [py, js, *extra_files], configs, metadata, list(lost))


def export_analytic_cfg(model: dict[str, Any], out: str | Path, target: str, *, joint: str = "joint") -> CfgExport:
    """mjlab or Isaac Lab configuration of a fitted analytic model (see the module docstring)."""
    dt = model_dt(model)
    law = analytic_law(model, dt)
    meta = common_metadata(model, target, dt)
    meta["delay"] = {"fitted_s": law.delay, "lag_steps": law.lag, "lag_s": law.lag * dt}
    meta["law"] = {"controller": law.controller, "equation": "tau = clip(stiffness e - damping dq, bottom(dq), top(dq))"
                   if law.kt is not None else "tau = clip(stiffness e - damping dq, +-effort_limit)"}
    configs, lost = target_configs(law, joint, target)
    return write_cfg(target, out, configs, meta, lost)
