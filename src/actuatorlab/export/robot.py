"""Whole-robot exports: ``actuatorlab export RUN/arm_model.json --mjcf F --mjlab F --isaaclab F``.

An ``arm_model.json`` (``actuatorlab fit --robot``) holds a fitted actuator model per parameter set
(or per joint) of a robot config (:mod:`actuatorlab.robots`). Each modelled joint is first turned
into the one-joint model dict the one-joint exporters read (:func:`joint_model_dicts`), with the
joint-side values the robot rollouts use (:meth:`~actuatorlab.robots.Robot.joint_params`,
:meth:`~actuatorlab.robots.Robot.law_constants`: gear ratio and linkage ratio folded in), plus the
robot's bound on the motor effort (``controller_constants.effort_limit``, written as the
joint's ``actuatorfrcrange``: the rollouts clip ``|tau_m| <= effort_limit``). Then:

* MJCF (:func:`export_robot_mjcf`): the robot's own MJCF is patched joint after joint by the
  one-joint patch (:func:`actuatorlab.export.mjcf.patch_mjcf`, the path of every MJCF export),
  every joint's built-in actuator replaced by the MuJoCo form of its fitted model. The robot's
  other content is unchanged, except what the robot config itself sets for the rollouts: the
  physics step and integrator of the config (the rate the model was identified at) and its
  ``joint_overrides``. Contacts stay as the MJCF has them.
* mjlab / Isaac Lab (:func:`export_robot_cfg`): one configuration per group of joints with equal
  fields (a shared parameter set at the same linkage ratio), keyed by the joint-name regexes
  those libraries match (``target_names_expr`` / ``joint_names_expr``), the fields of each joint
  exactly the one-joint export's (:func:`actuatorlab.export.sim_cfg.analytic_law`) at the robot's
  physics step.

What is lost is listed per joint: the one-joint lists, plus what the robot rollout
(:mod:`actuatorlab.sim.arm`) does that the target cannot (:func:`robot_losses`). Learned
whole-robot models are one network over all channels, not one network per joint; they are refused
with the joints named.
"""

from __future__ import annotations

import json
import math
import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ModelError
from ..models.params import PARAMS
from ..models.actuator_model import load
from ..envs.actuators import load_actuator
from ..robots.loader import load_robot, Robot
from ..models.modelfile import MODEL_FORMAT, MODEL_FORMAT_VERSION
from .mjcf import file_base, patch_mjcf, write_mjcf
from .mjcf_joint import _THERMAL, Servo, _comment_text
from .sim_cfg import _unit, analytic_law, common_metadata, target_configs, write_cfg
from .targets import TargetResult, TARGETS
from .. import __version__

__all__ = ["RobotExport", "load_arm_actuator", "joint_model_dicts", "robot_losses",
           "export_robot_mjcf", "export_robot_cfg", "export_robot_targets"]

_MJCF_INTEGRATOR = {"euler": "Euler", "implicitfast": "implicitfast"}


@dataclass(frozen=True)
class RobotExport:
    """What a whole-robot MJCF export wrote.

    path: the MJCF file; per_joint: joint -> (written quantities of the one-joint patch, SI units;
    what is lost); written: robot-level settings (timestep, integrator, joint overrides)."""

    path: Path
    per_joint: dict[str, tuple[dict[str, Any], list[str]]]
    written: dict[str, Any]

    @property
    def not_representable(self) -> list[str]:
        """Every joint's losses, one line each, prefixed with the joint's name."""
        return [f"{j}: {line}" for j, (_, lost) in self.per_joint.items() for line in lost]


def _read(arm_model: Any) -> tuple[dict, str]:
    if isinstance(arm_model, dict):
        return arm_model, "arm model"
    m = load(arm_model)
    if m.one_joint:
        raise ModelError(f"{arm_model}: a one-joint model (robot {m.robot!r}), not a whole-robot arm_model.json")
    return dict(m.document), str(arm_model)


def load_arm_actuator(arm_model: Any, robot: Any = None):
    """(:class:`~actuatorlab.envs.actuators.Actuator`, model dict, label) of an arm_model.json (path
    or dict); ``robot`` (name, config path or :class:`~actuatorlab.robots.Robot`) defaults to the
    file's ``robot``. Learned / residual models are refused, naming their network's joints."""

    d, label = _read(arm_model)
    if d.get("kind") in ("learned", "residual"):
        joints = (d.get("layout") or {}).get("channels") or ["(every channel)"]
        raise ModelError(f"{label}: a {d['kind']} whole-robot model is one {d.get('arch', '?')} network over the "
                         f"channels {', '.join(joints)}; joint {joints[0]!r} has no network of its own, and the "
                         "one-joint exporters (--torchscript, --onnx, --mjlab, --isaaclab) take one network per "
                         "joint: train per-joint models (actuatorlab train on one joint's logs) to export them")
    if robot is None:
        if not d.get("robot"):
            raise ModelError(f"{label}: names no robot; give --robot NAME (or a robot config file)")
        robot = d["robot"]
    r = robot if isinstance(robot, Robot) else load_robot(robot)
    if d.get("robot") not in (None, r.name):
        raise ModelError(f"{label}: fitted for robot {d.get('robot')!r}, not {r.name!r}")
    return load_actuator(r, d), d, label


def robot_losses(robot, i: int, p: dict[str, float], integrator: str) -> list[str]:
    """What the whole-robot rollout (:mod:`actuatorlab.sim.arm`) does on joint ``i`` that a native
    MuJoCo actuator (and the mjlab / Isaac Lab ones, which also act every physics step) does not.
    ``p`` the joint-side parameter values."""
    j = robot.joints[i]
    out = []
    if robot.law_every > 1:
        out.append(f"sample-and-hold: the firmware law runs every {robot.firmware_dt:g} s (held between ticks); "
                   f"the target evaluates it every physics step of {robot.physics_dt:g} s")
    if robot.target != "hold":
        out.append(f"target {robot.target!r} between control steps: the rollout "
                   f"{'interpolates' if robot.target == 'linear' else 'filters'} the host target inside a control "
                   "period; ctrl is held: do it in the host")
    if p.get("delay", 0.0) > 0:
        out.append(f"delay = {p['delay']:.6g} s: the rollout delays the control-rate targets with linear "
                   "interpolation between control samples; the target's delay is a whole number of physics "
                   "steps of the held ctrl (zero-order hold): equal only for a delay of whole control periods")
    if p.get("friction_base", 0.0) > 0:
        out.append(f"friction_base = {p['friction_base']:.6g}: the rollout sticks exactly per joint (explicit "
                   "stick/slip budget on the diagonal of M); MuJoCo's frictionloss is a soft constraint solved with the "
                   "whole robot: close, not equal (docs/export.md section 4)")
    if p.get("friction_viscous", 0.0) > 0:
        out.append(f"friction_viscous = {p['friction_viscous']:.6g}: applied explicitly by the rollout; MuJoCo "
                   f"integrates joint damping implicitly ({integrator}): differs by O(h b / M)")
    if j.drive == "effort" and (math.isfinite(j.saturation_effort) or math.isfinite(j.velocity_limit)):
        out.append(f"torque-speed envelope of the effort drive (saturation {j.saturation_effort:.6g}, velocity "
                   f"limit {j.velocity_limit:.6g}): a MuJoCo position actuator clips at a constant forcerange")
    if p.get("force_offset", 0.0) != 0.0:
        out.append(f"force_offset = {p['force_offset']:.6g} with the effort bound {j.effort_limit:.6g}: MuJoCo clamps "
                   "the joint's total actuator force (servo + bias actuator) at actuatorfrcrange, the rollout "
                   "clips the motor effort alone")
    if bool(robot.thermal[i]):
        out.append("winding temperature (+thermal: R(T), I^2 R heating): MuJoCo's dcmotor has a constant R")
    return out


def joint_model_dicts(arm_model: Any, robot: Any = None) -> tuple[Any, dict[str, dict], dict[str, list[str]]]:
    """(robot, {joint: one-joint model dict}, {joint: robot-level losses}) of an arm model.

    Each dict is a ``model.json`` (format "actuatorlab-model") with the joint-side parameters and
    controller constants of the whole-robot rollout, ``fit.dt`` = the robot's physics step (the
    actuator acts at every physics step) and ``controller_constants.effort_limit`` = the joint's
    bound on the motor effort."""
    act, d, _ = load_arm_actuator(arm_model, robot)
    r = act.robot
    jp = r.joint_params(act.params)
    lc = r.law_constants()
    integrator = r.integrator
    out, losses = {}, {}
    for i, j in enumerate(r.joints):
        g = r.groups[j.group]
        vals = {k: float(np.asarray(v)[i]) for k, v in jp.items() if k in PARAMS}
        params = {k: {"value": v} for k, v in vals.items() if k not in _THERMAL}
        consts = {"kp": float(lc.kp[i]), "kd": float(lc.kd[i]), "error_gain": float(lc.error_gain[i]),
                  "max_duty": float(lc.max_duty[i]), "drive_gain": float(lc.drive_gain[i]),
                  "u_max": float(min(lc.u_max[i], j.effort_limit)) if j.drive == "effort" else float(lc.u_max[i]),
                  "effort_limit": float(j.effort_limit)}
        setup = {"controller": j.law, "joint_type": j.joint_type, "supply_voltage": float(j.supply_voltage),
                 "actuator": j.actuator, "robot": r.name, "joint": j.name, "parameter_set": g.name,
                 "output_to_joint": float(j.output_to_joint), "gear_ratio": float(j.gear_ratio)}
        out[j.name] = {"format": MODEL_FORMAT, "format_version": MODEL_FORMAT_VERSION, "model": g.model,
                       "actuator": j.actuator, "joint_type": j.joint_type, "controller": j.law, "setup": setup,
                       "controller_constants": consts, "parameters": params,
                       "fit": {"dt": float(r.physics_dt)},
                       "package_version": d.get("package_version", __version__),
                       "git_revision": d.get("git_revision", "?")}
        losses[j.name] = robot_losses(r, i, vals, integrator)
    return r, out, losses


def _set_option(root: ET.Element, robot) -> dict[str, Any]:
    """The config's physics step and integrator on the (first) <option>; the config's
    joint_overrides on their joints. Returns what was written."""
    opt = next((c for c in root if c.tag == "option"), None)
    if opt is None:
        opt = ET.Element("option")
        pos = next((k + 1 for k, c in enumerate(root) if c.tag == "compiler"), 0)
        root.insert(pos, opt)
    opt.set("timestep", repr(float(robot.physics_dt)))
    opt.set("integrator", _MJCF_INTEGRATOR[robot.integrator])
    written: dict[str, Any] = {"timestep": float(robot.physics_dt), "integrator": robot.integrator}
    for jn, attrs in robot.joint_overrides:
        el = next((e for wb in root.iter("worldbody") for e in wb.iter("joint") if e.get("name") == jn), None)
        if el is None:
            raise ModelError(f"{robot.mjcf_path}: joint_overrides.{jn}: no <joint> element named {jn!r}")
        for k, v in attrs:
            el.set(k, repr(float(v)))
            written[f"joint_override.{jn}.{k}"] = float(v)
    return written


def export_robot_mjcf(arm_model: Any, out_path: str | Path, *, robot: Any = None, servo: Servo = "auto") -> RobotExport:
    """The robot's MJCF with every modelled joint's actuator replaced by its fitted model (module
    docstring), written atomically to ``out_path`` (loaded by MuJoCo before it replaces anything).
    ``robot`` defaults to the model file's; ``servo`` as :func:`~actuatorlab.export.mjcf.export_mjcf`."""

    r, models, losses = joint_model_dicts(arm_model, robot)
    out = Path(out_path)
    if out.resolve() == Path(r.mjcf_path).resolve():
        raise ModelError(f"{out}: refusing to overwrite the robot's MJCF; choose another path")
    if r.mechanisms:
        raise ModelError(f"{r.config_path}: the MJCF export patches joints of {Path(r.mjcf_path).name}; the "
                         f"mechanism joint(s) {', '.join(m.name for m in r.mechanisms)} are built by the loader, "
                         "not in that file (not supported yet)")
    base = file_base(r.mjcf_path, out)
    per_joint = {jn: (dict(w), lost + losses[jn])
                 for jn, (w, lost) in patch_mjcf(base, out, models, servo=servo).items()}
    root = base.root
    written = _set_option(root, r)
    lost = [f"{j}: {line}" for j, (_, ls) in per_joint.items() for line in ls]
    root.insert(0, ET.Comment(_comment_text(
        f" Whole robot {r.name}: actuatorlab models on {', '.join(models)} (actuatorlab export). Physics "
        f"step {r.physics_dt:g} s and integrator {r.integrator} of the robot config (the model's rate). "
        "Not representable:" + "".join(f"\n    - {x}" for x in lost) + ("" if lost else " nothing") + " ")))
    write_mjcf(root, out)
    return RobotExport(out, per_joint, {"robot": r.name, "base_xml": Path(r.mjcf_path).name, **written})


def _names_expr(joints: list[str]) -> list[str]:
    """Regexes matching exactly these joints (mjlab and Isaac Lab match names with re.fullmatch)."""
    return [re.escape(j) for j in joints]


def export_robot_cfg(arm_model: Any, out: str | Path, target: str, *, robot: Any = None):
    """mjlab or Isaac Lab configurations of a whole robot (module docstring): one entry
    ``"<group>/<ClassName>"`` per group of joints with equal fields, ``target_names_expr`` /
    ``joint_names_expr`` listing the group's joints. Returns a :class:`~actuatorlab.export.sim_cfg.CfgExport`
    whose ``metadata["per_joint"]`` maps each joint to its group and losses."""

    r, models, losses = joint_model_dicts(arm_model, robot)
    dt = float(r.physics_dt)
    key_of = "target_names_expr" if target == "mjlab" else "joint_names_expr"
    groups: dict[str, dict] = {}  # group name -> {"configs", "joints", "fields_key"}
    per_joint: dict[str, dict] = {}
    lost_all: list[str] = []
    for jn, md in models.items():
        cfgs, lost = target_configs(analytic_law(md, dt), jn, target)
        lost = lost + losses[jn]
        fields = json.dumps({c: {k: v for k, v in f.items() if k != key_of} for c, f in cfgs.items()},
                            sort_keys=True, default=str)
        pset = md["setup"]["parameter_set"]
        name = next((g for g, v in groups.items() if v["fields"] == fields), None)
        if name is None:
            name = pset if pset not in groups else f"{pset}@{jn}"
            groups[name] = {"fields": fields, "configs": cfgs, "joints": []}
        groups[name]["joints"].append(jn)
        per_joint[jn] = {"group": name, "config": f"{name}/{next(iter(cfgs))}", "not_representable": lost}
        lost_all += [f"{jn}: {x}" for x in lost]
    configs: dict[str, dict] = {}
    for name, g in groups.items():
        for cls, f in g["configs"].items():
            configs[f"{name}/{cls}"] = {key_of: _names_expr(g["joints"]), **{k: v for k, v in f.items() if k != key_of}}
    jt = {j.joint_type for j in r.joints}
    md0 = next(iter(models.values()))
    meta = common_metadata(md0, target, dt)
    if len(jt) > 1:
        meta["units"] = {"revolute joints": "rad, rad/s, N.m, N.m/rad, N.m.s/rad, kg.m^2",
                         "prismatic joints": "m, m/s, N, N/m, N.s/m, kg", "time": "s"}
    meta.update(robot=r.name, model=md0["model"], control_dt_s=float(r.control_dt),
                rate_note=f"run the actuators at every physics step of {dt:g} s ({1 / dt:g} Hz), the robot config's "
                          f"physics step; the host sends targets every {r.control_dt:g} s (held)",
                per_joint=per_joint, groups={n: g["joints"] for n, g in groups.items()},
                names_expr=f"{key_of}: regexes matched against the articulation's joint names")
    meta["delay"] = {jn: {"fitted_s": float(md["parameters"].get("delay", {}).get("value", 0.0)),
                          "lag_steps": int(round(float(md["parameters"].get("delay", {}).get("value", 0.0)) / dt))}
                     for jn, md in models.items()}
    return write_cfg(target, out, configs, meta, lost_all)


def export_robot_targets(model_path: str | Path, targets: dict[str, Path], *, robot: Any = None) -> list:
    """:func:`~actuatorlab.export.targets.export_targets` for an arm_model.json: mjcf, mjlab and
    isaaclab; onnx / torchscript need a learned per-joint network (refused naming the joints)."""

    model_path = Path(model_path)
    act, d, label = load_arm_actuator(model_path, robot)  # refuses learned models, naming joints
    for t in targets:
        if t in ("onnx", "torchscript"):
            raise ModelError(f"{model_path}: --{t}: an analytic whole-robot model has no network to export "
                             f"(joints {', '.join(act.robot.joint_names)}); use --mjcf, --mjlab or --isaaclab")

    results = []
    for t in TARGETS:
        if t not in targets:
            continue
        if t == "mjcf":
            res = export_robot_mjcf(d, targets[t], robot=act.robot)
            r = act.robot
            units = {j.name: _unit(j.joint_type)["effort"] for j in r.joints}
            meta = {"physics_dt_s": float(r.physics_dt), "sample_rate_hz": 1.0 / float(r.physics_dt),
                    "position_error": "ctrl of each replaced actuator is the joint's position target q*; the servo "
                                      "acts on e = q* - q (e > 0 drives q up)",
                    "effort_sign": "positive effort accelerates q positively",
                    "units": {"effort per joint": ", ".join(f"{j} {u}" for j, u in units.items()), "time": "s"},
                    "input": f"ctrl every control step of {r.control_dt:g} s (held), one per replaced actuator"}
            summary = {"robot": r.name, "joints": ", ".join(res.per_joint)}
            for jn, (w, _) in res.per_joint.items():
                for k in ("actuator.type", "actuator.kp_eff", "actuator.effort_limit", "joint.armature"):
                    if k in w:
                        summary[f"{jn}.{k}"] = w[k]
            results.append(TargetResult("mjcf", [res.path], summary, meta, res.not_representable))
        else:
            c = export_robot_cfg(d, targets[t], t, robot=act.robot)
            summary = {"robot": act.robot.name, **{f"group {n}": ", ".join(js) for n, js in c.metadata["groups"].items()}}
            results.append(TargetResult(t, c.files, summary, c.metadata, c.not_representable))
    return results
