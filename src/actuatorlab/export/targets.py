"""``actuatorlab export MODEL --mjcf F --mjlab F --isaaclab F --onnx F --torchscript F``: one fitted
model (analytic or learned one-joint ``model.json``, or a whole robot's analytic ``arm_model.json``,
:mod:`.robot`) to one or several simulators / runtimes.

What each target can represent (docs/export.md):

==============  ===========================================  ===========================================
target          analytic model                               learned one-joint model
==============  ===========================================  ===========================================
mjcf            MuJoCo native actuator (:mod:`.mjcf`)        refused (no MuJoCo equivalent)
mjlab           DcMotorActuatorCfg / BuiltinDcMotor... /     LearnedMlpActuatorCfg + TorchScript
                IdealPd (:mod:`.sim_cfg`)                    (arch ``actuator_net``, stride 1)
isaaclab        DCMotorCfg / DelayedPDActuatorCfg            ActuatorNetMLPCfg + TorchScript
                                                             (arch ``actuator_net``), ActuatorNetLSTMCfg
                                                             + TorchScript (arch ``actuator_lstm``)
onnx            refused (nothing to run)                     the network (mlp, transformer)
torchscript     refused                                      raw window -> effort (mlp, transformer,
                                                             actuator_net)
==============  ===========================================  ===========================================

A target that cannot represent the model raises :class:`~actuatorlab.errors.ModelError` naming what
is missing, before anything is written. Every call writes a ``README.md`` beside the files (one per
folder) with the rate, lags, sign convention, scales, units and what is lost.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ModelError
from ..models.actuator_model import LEARNED_KINDS, check_robot, load
from ..errors import UnknownNameError
from ..models.modelfile import joint_dict
from .sim_cfg import _unit, atomic_write, cfg_paths, export_analytic_cfg, model_dt, write_cfg
from .torch_export import actuator_lstm_module, actuator_net_module, learned_metadata, save_torchscript, window_module
from ..learned.onnx_export import _require, export_onnx
from ..learned.joint_train import load_joint_model
from .mjcf import export_mjcf
from ..learned.onnx_export import onnx_available
from .torch_export import torch_available

__all__ = ["TARGETS", "TargetResult", "export_targets"]

TARGETS = ("mjcf", "mjlab", "isaaclab", "onnx", "torchscript")


@dataclass(frozen=True)
class TargetResult:
    """One target written: its files, the key quantities, metadata and what is lost."""

    target: str
    files: list[Path]
    summary: dict[str, Any]
    metadata: dict[str, Any] = field(default_factory=dict)
    not_representable: list[str] = field(default_factory=list)


def _check(d: dict, targets: dict[str, Path], path: Path) -> None:
    """Refuse targets that cannot represent the model before anything is written."""
    kind = d.get("kind")
    learned = kind in LEARNED_KINDS
    for t in targets:
        if t == "mjcf" and learned:
            raise ModelError(f"{path}: --mjcf: a {kind} model has no MuJoCo equivalent (its effort is a "
                             "network); export the analytic model it was trained with, or use --onnx / "
                             "--torchscript / --isaaclab / --mjlab")
        if t in ("onnx", "torchscript") and not learned:
            raise ModelError(f"{path}: --{t}: an analytic model has no network to export; use --mjcf, "
                             "--mjlab or --isaaclab")
        arch = d.get("arch")
        if t == "onnx" and learned and arch not in ("mlp", "transformer"):
            raise ModelError(f"{path}: --onnx exports the mlp and transformer architectures, not {arch!r} "
                             "(use --torchscript)")
        if t == "torchscript" and learned and arch not in ("mlp", "transformer", "actuator_net"):
            raise ModelError(f"{path}: --torchscript exports the mlp, transformer and actuator_net "
                             f"architectures, not {arch!r}" + (" (an actuator_lstm's TorchScript file is written by "
                                                               "--isaaclab)" if arch == "actuator_lstm" else ""))
        if t == "mjlab" and arch == "actuator_lstm":
            raise ModelError(f"{path}: --mjlab: mjlab 1.6 has no recurrent learned actuator (LearnedMlpActuator "
                             "only); use --isaaclab (ActuatorNetLSTMCfg)")
        if t in ("mjlab", "isaaclab") and learned:
            if arch not in ("actuator_net", "actuator_lstm") or kind != "learned":
                raise ModelError(f"{path}: --{t}: a {kind} {d.get('arch')} model reads "
                                 f"{(d.get('layout') or {}).get('per_channel')}; {t}'s actuator net reads only "
                                 "the position error q* - q and the velocity: missing a learned model with "
                                 "arch actuator_net or actuator_lstm (actuatorlab train --arch actuator_net)")
            stride = int((d.get("sizes") or {}).get("stride", 1))
            if t == "mjlab" and stride != 1:
                raise ModelError(f"{path}: --mjlab: mjlab's LearnedMlpActuator reads a contiguous history; "
                                 f"this actuator_net skips frames (stride {stride}); use --isaaclab (input_idx)")


def _check_extras(d: dict, targets: dict[str, Path], path: Path) -> None:
    """The optional packages a learned model's targets need, checked before anything is written:
    one line naming the file, the target and the extra to install (pyproject's optional
    dependencies: ``export`` has torch, onnx and onnxruntime; ``onnx`` the latter two)."""
    if d.get("kind") not in LEARNED_KINDS:
        return

    for t in targets:
        if t in ("torchscript", "mjlab", "isaaclab") and not torch_available():
            raise ModelError(f"{path}: --{t} of a {d['kind']} model writes TorchScript, which needs the optional "
                             "package torch: install the extra 'export' (pip install 'actuatorlab[export]')")
        if t == "onnx" and not onnx_available():
            raise ModelError(f"{path}: --onnx needs the optional packages onnx and onnxruntime: install the extra "
                             "'onnx' (pip install 'actuatorlab[onnx]'; the extra 'export' has them too)")


def _readme(results: list[TargetResult], model_path: Path) -> str:
    lines = [f"# Actuator export of `{model_path}`", "",
             "Written by `actuatorlab export`. Every file below declares the physics step it must run at, "
             "its history lags, the sign of the position error, its scales and units "
             "(docs/export.md in actuatorlab explains each target).", ""]
    for r in results:
        m = r.metadata
        lines += [f"## {r.target}: " + ", ".join(f"`{p.name}`" for p in r.files), ""]
        if m.get("physics_dt_s"):
            lines.append(f"- **rate**: physics step {m['physics_dt_s']:g} s ({m['sample_rate_hz']:g} Hz); "
                         "the actuator is evaluated at every physics step. Another step changes the dynamics.")
        if m.get("position_error"):
            lines.append(f"- **sign**: {m['position_error']}; {m.get('effort_sign', '')}.")
        if m.get("units"):
            lines.append("- **units**: " + ", ".join(f"{k} [{u}]" for k, u in m["units"].items()) + ".")
        for key, label in (("history", "history"), ("delay", "delay"), ("scales", "scales"),
                           ("input", "input"), ("output", "output"), ("history_init", "history at reset")):
            if key in m:
                lines.append(f"- **{label}**: `{json.dumps(m[key], sort_keys=True)}`"
                             if not isinstance(m[key], str) else f"- **{label}**: {m[key]}")
        for k, v in r.summary.items():
            lines.append(f"- {k}: `{v}`")
        if r.not_representable:
            lines += ["- **not representable**:"] + [f"  - {x}" for x in r.not_representable]
        lines.append("")
    return "\n".join(lines)


def export_targets(model_path: str | Path, targets: Mapping[str, str | Path | None], *,
                   base: str | Path | None = None, joint: str | None = None,
                   robot: str | Path | None = None) -> list[TargetResult]:
    """Export ``model_path`` (a model.json, or a whole robot's arm_model.json) to every target in
    ``targets`` ({name: output path}); names from :data:`TARGETS`. Returns one :class:`TargetResult`
    per target, in :data:`TARGETS` order. ``robot`` (arm models only): the robot config to use
    instead of the one the file names (:mod:`actuatorlab.export.robot`)."""

    model_path = Path(model_path)
    outs = {k: Path(v) for k, v in targets.items() if v is not None}
    if not outs:
        raise ModelError(f"{model_path}: give at least one target: " + ", ".join(f"--{t} FILE" for t in TARGETS))
    for t in outs:
        if t not in TARGETS:
            raise UnknownNameError("export target", t, list(TARGETS))
    m = load(model_path)
    if not m.one_joint:
        if base is not None or joint is not None:
            raise ModelError(f"{model_path}: --base / --joint patch one joint; a whole-robot model patches its "
                             "robot's own MJCF, every modelled joint (use --robot to choose the robot config)")
        from .robot import export_robot_targets

        results = export_robot_targets(model_path, outs, robot=robot)
        _write_readmes(results, model_path)
        return results
    check_robot(m, robot)
    d = joint_dict(m)
    _check(d, outs, model_path)
    _check_extras(d, outs, model_path)
    if (base is not None or joint is not None) and "mjcf" not in outs:
        raise ModelError("--base / --joint patch a MuJoCo model: only with --mjcf")
    jm = None
    if d.get("kind") in LEARNED_KINDS:
        jm = load_joint_model(d, model_path)
    results = []
    for t in TARGETS:
        if t in outs:
            results.append(_export_one(t, d, jm, outs[t], model_path, base, joint))
    _write_readmes(results, model_path)
    return results


def _write_readmes(results: list[TargetResult], model_path: Path) -> None:
    """One README.md per output folder, describing the files written there."""
    by_dir: dict[Path, list[TargetResult]] = {}
    for r in results:
        by_dir.setdefault(r.files[0].resolve().parent, []).append(r)
    for folder, rs in by_dir.items():
        readme = atomic_write(folder / "README.md", _readme(rs, model_path))
        for r in rs:
            r.files.append(readme)


def _export_one(t: str, d: dict, jm, out: Path, model_path: Path, base, joint) -> TargetResult:
    if t == "mjcf":
        r = export_mjcf(d, out, base_xml=base, joint=joint)
        jt = d.get("joint_type") or (d.get("setup") or {}).get("joint_type") or "revolute"
        meta: dict[str, Any] = {
            "units": _unit(jt), "position_error": "ctrl is the position target q*; the servo acts on "
            "e = q* - q (e > 0 drives q up)", "effort_sign": "positive effort accelerates q positively"}
        ts = r.written.get("timestep")
        if isinstance(ts, float):
            meta.update(physics_dt_s=ts, sample_rate_hz=1.0 / ts)
        if "actuator.delay_effective" in r.written:
            meta["delay"] = {"fitted_s": r.written.get("actuator.delay"),
                             "effective_s": r.written["actuator.delay_effective"]}
        return TargetResult(t, [r.path], {k: v for k, v in r.written.items()}, meta, list(r.not_representable))
    dt = model_dt(d)
    joint_name = joint or "joint"
    if jm is None:  # analytic -> mjlab / isaaclab
        cfg = export_analytic_cfg(d, out, t, joint=joint_name)
        first = next(iter(cfg.configs))
        return TargetResult(t, cfg.files, {"config": first, **{k: v for k, v in cfg.configs[first].items()
                                                               if isinstance(v, float)}},
                            cfg.metadata, cfg.not_representable)
    if t == "isaaclab" and d.get("arch") == "actuator_lstm":
        return _actuator_lstm_cfg(d, jm, out, dt, joint_name)
    if t in ("mjlab", "isaaclab"):
        return _actuator_net_cfg(t, d, jm, out, dt, joint_name)
    if t == "torchscript":
        return _torchscript(d, jm, out, dt)
    return _onnx(d, jm, out, dt)


def _actuator_net_cfg(t: str, d: dict, jm, out: Path, dt: float, joint: str) -> TargetResult:
    import torch


    mod, ps, vs, ts, idx = actuator_net_module(jm)
    py, _ = cfg_paths(out)
    net_path = py.with_suffix(".pt")
    meta = learned_metadata(jm, d, t, dt)
    meta["history"] = {"input_idx": idx, "lag_s": [i * dt for i in idx],
                       "index_meaning": "0 = current physics step, n = n physics steps ago"}
    meta["scales"] = {"pos_scale": ps, "vel_scale": vs, "torque_scale": ts, "input_order": "pos_vel"}
    meta["input"] = (f"(N, {2 * len(idx)}) float32: [e_i * pos_scale for i in input_idx] + "
                     "[dq_i * vel_scale for i in input_idx], e = q_target - q")
    meta["output"] = "(N, 1); times torque_scale = joint effort; clipped inside to +-effort_bound"
    if t == "isaaclab":
        meta["history_init"] = ("Isaac Lab fills the history with zeros at reset, actuatorlab with copies of the "
                                "first frame: identical when an episode starts at rest on its target")
    else:
        meta["history_init"] = "mjlab fills the history with copies of the first frame, as actuatorlab does"
    save_torchscript(mod, net_path, torch.zeros(2, 2 * len(idx)), meta)
    arm = float(jm.params["armature"])
    lim = float(jm.effort_bound)
    common = {"network_file": net_path.name, "pos_scale": ps, "vel_scale": vs, "torque_scale": ts,
              "input_order": "pos_vel", "saturation_effort": lim, "effort_limit": lim,
              "velocity_limit": float("inf"), "armature": arm}
    if t == "isaaclab":
        configs = {"ActuatorNetMLPCfg": {"joint_names_expr": [joint], **common, "input_idx": idx}}
    else:
        configs = {"LearnedMlpActuatorCfg": {"target_names_expr": [joint], **common, "history_length": len(idx),
                                             "frictionloss": 0.0, "viscous_damping": 0.0}}
    meta["network_file"] = ("beside the configuration; the .py resolves it from its own path, the .json "
                            "names it relative to its folder")
    lost = ["the bench's rigid body (inertia, gravity) is the robot's own in the target; only the actuator "
            f"(effort) and the rotor armature {arm:.6g} are exported"]
    r = write_cfg(t, out, configs, meta, lost, [net_path])
    return TargetResult(t, r.files, {"network_file": str(net_path), "input_idx": idx, "pos_scale": ps,
                                     "vel_scale": vs, "torque_scale": ts}, r.metadata, lost)


def _actuator_lstm_cfg(d: dict, jm, out: Path, dt: float, joint: str) -> TargetResult:
    import torch


    mod, n_layers, hidden = actuator_lstm_module(jm)
    py, _ = cfg_paths(out)
    net_path = py.with_suffix(".pt")
    meta = learned_metadata(jm, d, "isaaclab", dt)
    meta["history"] = {"recurrent": f"LSTM state ({n_layers} layers x {hidden}) carried from one physics step to "
                                    "the next; zero at reset", "lag_s": [0.0]}
    meta["scales"] = {"input": "raw (q_target - q [rad], dq [rad/s]); the normalizer is folded into the weights",
                      "output": "effort [N.m], clipped inside to +-effort_bound"}
    meta["input"] = "x (N, 1, 2) float32 = (q_target - q, dq), hc = (h, c) each (n_layers, N, hidden)"
    meta["output"] = "(effort (N, 1) [N.m], (h, c))"
    meta["history_init"] = "Isaac Lab zeroes (h, c) at reset; actuatorlab starts every rollout from the zero state"
    N = 2
    example = (torch.zeros(N, 1, 2), (torch.zeros(n_layers, N, hidden), torch.zeros(n_layers, N, hidden)))
    save_torchscript(mod, net_path, example, meta)
    lim = float(jm.effort_bound)
    configs = {"ActuatorNetLSTMCfg": {"joint_names_expr": [joint], "network_file": net_path.name,
                                      "saturation_effort": lim, "effort_limit": lim, "velocity_limit": float("inf"),
                                      "armature": float(jm.params["armature"])}}
    lost = ["the bench's rigid body (inertia, gravity) is the robot's own in the target; only the actuator "
            f"(effort) and the rotor armature {float(jm.params['armature']):.6g} are exported"]
    r = write_cfg("isaaclab", out, configs, meta, lost, [net_path])
    return TargetResult("isaaclab", r.files, {"network_file": str(net_path), "lstm_layers": n_layers,
                                              "hidden": hidden}, r.metadata, lost)


def _torchscript(d: dict, jm, out: Path, dt: float) -> TargetResult:
    import torch


    mod = window_module(jm)
    meta = learned_metadata(jm, d, "torchscript", dt)
    L = jm.layout
    meta["input"] = (f"window (N, {L.n_frames}, {L.n_features}) float32 raw frames, oldest first, features "
                     f"{list(L.per_channel)}; frame j is (history - j) physics steps old")
    meta["output"] = "effort (N, 1) [N.m | N], normalizer, effort_scale and effort_bound inside"
    meta["history"] = {"frame_lag_steps": [L.history - j for j in range(L.n_frames)],
                       "frame_lag_s": [(L.history - j) * dt for j in range(L.n_frames)]}
    save_torchscript(mod, out, torch.zeros(2, L.n_frames, L.n_features), meta)
    return TargetResult("torchscript", [out], {"input": f"(N, {L.n_frames}, {L.n_features})", "output": "(N, 1)"},
                        meta, [])


def _onnx(d: dict, jm, out: Path, dt: float) -> TargetResult:
    _require()
    import onnx

    L = jm.layout
    meta = learned_metadata(jm, d, "onnx", dt)
    meta["input"] = (f"x (N, {L.n_frames}, {L.n_features}) float32 NORMALIZED frames (x - mean) / std, "
                     f"oldest first, features {list(L.per_channel)}")
    meta["output"] = "torque (N, 1): effort = clip(effort_scale * torque, +-effort_bound) [N.m | N]"
    meta["history"] = {"frame_lag_steps": [L.history - j for j in range(L.n_frames)],
                       "frame_lag_s": [(L.history - j) * dt for j in range(L.n_frames)]}
    tmp = out.with_name(f".{out.name}.raw")
    try:
        export_onnx(jm.net, tmp, n_frames=L.n_frames)
    except ModelError as e:
        raise ModelError(f"{out}: --onnx: {e}") from None
    m = onnx.load(str(tmp))
    tmp.unlink()
    for k, v in (("actuatorlab", json.dumps(meta, sort_keys=True)), ("physics_dt_s", repr(dt)),
                 ("input_layout", meta["input"]), ("position_error", meta["position_error"]),
                 ("effort_scale", repr(jm.effort_scale)), ("effort_bound", repr(jm.effort_bound)),
                 ("normalizer_mean", json.dumps(np.asarray(jm.norm.mean, np.float64).tolist())),
                 ("normalizer_std", json.dumps(np.asarray(jm.norm.std, np.float64).tolist()))):
        p = m.metadata_props.add()
        p.key, p.value = k, v
    atomic_write(out, m.SerializeToString())
    return TargetResult("onnx", [out], {"input": f"x (N, {L.n_frames}, {L.n_features}) normalized",
                                        "outputs": "torque, force_raw, gate_logit, condition_logit"}, meta, [])
