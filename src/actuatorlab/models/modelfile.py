"""RUN/model.json: the fitted model, its parameters with units and bounds, the data used, the
operating envelope of the training data, metrics, package version and git revision (schema
"actuatorlab-model" v2, docs/model_file.md; read and written by :mod:`.actuator_model`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .. import __version__
from ..errors import ModelError
from ..files import git_revision
from .actuator_model import (ActuatorModel, BENCH_PREFIX, CONTINUOUS, ENVELOPE_VERSION, FORMAT, FORMAT_VERSION,
                             from_document, load, save, validate_envelope)
from .control import DEFAULT_ERROR_GAIN
from .params import PARAMS, neutral_params, unit_for
from .registry import get_model

__all__ = ["MODEL_FORMAT", "MODEL_FORMAT_VERSION", "ENVELOPE_VERSION", "CONTINUOUS", "validate_envelope",
           "model_to_dict", "save_model", "load_model", "joint_dict", "params_from_model", "model_from_bam",
           "BAM_PARAMETER_NAMES", "BAM_ACTUATORS"]

#: the model file format that :func:`actuatorlab.models.actuator_model.save` writes
MODEL_FORMAT = FORMAT
MODEL_FORMAT_VERSION = FORMAT_VERSION


def model_to_dict(fit, *, setup: dict, data: dict, metrics: dict, identifiability: dict | None = None,
                  selection: dict | None = None, extra: dict | None = None,
                  uncertainty: dict | None = None) -> dict[str, Any]:
    """Serializable description of a :class:`~actuatorlab.identify.fit.FitResult`.

    uncertainty: resampled standard errors (:func:`actuatorlab.identify.select.group_jackknife`);
    stored as the top-level ``uncertainty`` and per free parameter as ``stderr_resampled``,
    ``relative_spread`` and ``poorly_determined`` (docs/model_file.md). identifiability's
    ``sensitivity`` (:func:`~actuatorlab.identify.identifiability.sensitivity`) is stored per free
    parameter as ``sensitivity`` ([MAE change at -10 %, at +10 %]) and ``determined`` (False: these
    logs do not determine it to 10 %; None: a parameter at 0)."""
    joint = setup.get("joint_type", "revolute")
    stderr = (identifiability or {}).get("stderr", {})
    sens = (identifiability or {}).get("sensitivity")
    params = {}
    values = fit.params
    free = set(fit.space.names)
    for name, entry in _parameter_entries(values, free, joint).items():
        if name in free:
            i = fit.space.names.index(name)
            entry.update(lower=float(fit.space.lower[i]), upper=float(fit.space.upper[i]),
                         stderr=stderr.get(name))
            if sens is not None and name in sens["change"]:
                entry.update(sensitivity=sens["change"][name],
                             determined=None if sens["change"][name] is None else name not in sens["not_determined"])
            if uncertainty:
                entry.update(stderr_resampled=uncertainty["stderr"].get(name),
                             relative_spread=uncertainty["relative"].get(name),
                             poorly_determined=name in uncertainty["flagged"])
        params[name] = entry
    law = setup.get("controller", "")
    d = {
        "format": MODEL_FORMAT, "format_version": MODEL_FORMAT_VERSION, "robot": BENCH_PREFIX + joint,
        "kind": "analytic", "model": fit.model, "description": fit.spec.description,
        "features": list(fit.spec.free),
        "actuator": setup.get("actuator"), "joint_type": joint, "controller": law,
        "setup": setup,
        "controller_constants": {"error_gain": setup.get("gains", {}).get("error_gain", DEFAULT_ERROR_GAIN.get(law)),
                                 "max_duty": setup.get("gains", {}).get("max_duty", 1.0)},
        "parameters": params,
        "fit": {"train_mae": fit.train_mae, "objective": fit.objective, "effort_weight": fit.effort_weight,
                "evaluations": fit.evaluations, "wall_s": fit.wall_s,
                "profile": fit.profile, "dt": fit.dt, "history": fit.history,
                "boxes_widened": getattr(fit, "widened", None)},
        "data": data, "metrics": metrics, "identifiability": identifiability, "selection": selection,
        "uncertainty": uncertainty,
        "package_version": __version__, "git_revision": git_revision(),
    }
    if extra:
        d.update(extra)
    return d


def _parameter_entries(values: dict, free, joint: str = "revolute") -> dict[str, dict]:
    """``parameters`` of a model file: every parameter's value, unit, whether it is free, meaning."""
    return {n: {"value": values[n], "unit": unit_for(n, joint), "free": n in free,
                "description": PARAMS[n].description} for n in PARAMS}


def save_model(d: dict, path: str | Path) -> Path:
    """Write a one-joint model's dict (version 1 or 2 layout; written as version 2) with :func:`save`.
    A dict that names no robot runs on its bench (``bench:<joint_type>``; kind "analytic" unless given). The values are stored
    as they are (a fit's non-finite parameters too: :func:`load` refuses them, naming them)."""
    if not d.get("robot") and d.get("format") == MODEL_FORMAT:
        jt = d.get("joint_type") or (d.get("setup") or {}).get("joint_type") or "revolute"
        d = {**d, "robot": BENCH_PREFIX + str(jt), "kind": d.get("kind") or "analytic"}
    return save(from_document(d, validate=False), path)


def load_model(path: str | Path) -> dict[str, Any]:
    """The dict of a one-joint model file (version 2 layout; :func:`load` validates it), as the
    one-joint replay, export and evaluation read it; a learned / residual model's dict carries
    ``_path`` (its file, for the weights beside it). A whole-robot file is refused, naming it."""
    return joint_dict(load(path))


def joint_dict(m: ActuatorModel) -> dict[str, Any]:
    """The dict of a loaded one-joint model (see :func:`load_model`); a whole-robot model is refused."""
    if not m.one_joint:
        raise ModelError(f"{m.where}: a whole-robot model (robot {m.robot!r}); this takes a one-joint model.json "
                         f"(give --robot {m.robot} where the command has it)")
    d = dict(m.document)
    if m.kind != "analytic":
        d["_path"] = m.where
    return d


def params_from_model(d: dict) -> dict[str, float]:
    """Full parameter dict (neutral values for anything the file does not list)."""
    p = neutral_params()
    p.update({k: float(v["value"]) for k, v in d["parameters"].items()})
    return p


# --------------------------------------------------------------------------------------------
# BAM parameter files -> model.json
# --------------------------------------------------------------------------------------------

#: BAM parameter name -> actuatorlab parameter name (BAM 1.0.x, ``bam.model.Model`` and the
#: Dynamixel actuators' ``kt``, ``R``, ``armature``)
BAM_PARAMETER_NAMES: dict[str, str] = {
    "kt": "kt", "R": "R", "armature": "armature", "q_offset": "q_offset",
    "friction_base": "friction_base", "friction_viscous": "friction_viscous",
    "friction_stribeck": "friction_stribeck", "dtheta_stribeck": "stribeck_velocity", "alpha": "stribeck_alpha",
    "load_friction_base": "load_friction", "load_friction_stribeck": "load_friction_stribeck",
    "load_friction_motor": "load_friction_motor", "load_friction_external": "load_friction_external",
    "load_friction_motor_stribeck": "load_friction_motor_stribeck",
    "load_friction_external_stribeck": "load_friction_external_stribeck",
    "load_friction_motor_quad": "load_friction_motor_quad",
    "load_friction_external_quad": "load_friction_external_quad",
}

#: BAM actuators whose firmware law actuatorlab reproduces: controller, fixed firmware constants
#: (BAM's ``bam/dynamixel/actuator.py``: the XL330 limits the motor current to 1.75 A; its error
#: gain (4096 / 2 pi) / (256 * 885) and duty limit 1 are actuatorlab's ``dynamixel_pwm`` defaults)
BAM_ACTUATORS: dict[str, dict[str, Any]] = {
    "xl330": {"controller": "dynamixel_pwm", "fixed": {"current_limit": 1.75}, "extensions": ("qoffset", "climit")},
}


def model_from_bam(bam: dict, source: str = "BAM parameter file") -> dict[str, Any]:
    """An actuatorlab model dict (save with :func:`save_model`) from a BAM parameter file's dict.

    BAM's models M1..M6 are actuatorlab's m1..m6 term for term (``models/friction.py``); BAM always
    fits an encoder offset (``+qoffset``) and its XL330 firmware law limits the current to 1.75 A
    (``+climit``, held at that value). The result replays the same trajectories as BAM's simulator
    up to the position update (``tests/test_bam_equivalence.py``). Raises :class:`ModelError` naming
    ``source`` for an unknown model or actuator, or a parameter that has no actuatorlab meaning.
    """
    missing = [k for k in ("model", "actuator") if not isinstance(bam, dict) or k not in bam]
    if missing:
        raise ModelError(f"{source}: not a BAM parameter file (bam.fit's output): no {' and no '.join(map(repr, missing))} "
                         "entry")
    name, actuator = bam.get("model"), bam.get("actuator")
    if name not in ("m1", "m2", "m3", "m4", "m5", "m6"):
        raise ModelError(f"{source}: BAM model {name!r} is not one of m1..m6")
    if actuator not in BAM_ACTUATORS:
        raise ModelError(f"{source}: BAM actuator {actuator!r} is not supported; supported: "
                         f"{', '.join(BAM_ACTUATORS)} (other BAM actuators use firmware laws or gains "
                         "that actuatorlab's control laws do not reproduce yet)")
    a = BAM_ACTUATORS[actuator]
    unknown = sorted(k for k in bam if k not in BAM_PARAMETER_NAMES and k not in ("model", "actuator"))
    if unknown:
        raise ModelError(f"{source}: BAM parameters with no actuatorlab meaning: {', '.join(unknown)}")
    spec = get_model("+".join((name,) + a["extensions"]))
    values = neutral_params()
    for k, v in bam.items():
        if k in BAM_PARAMETER_NAMES:
            if not isinstance(v, (int, float)):
                raise ModelError(f"{source}: BAM parameter {k!r} is not a number: {v!r}")
            values[BAM_PARAMETER_NAMES[k]] = float(v)
    values.update(a["fixed"])
    params = _parameter_entries(values, set(spec.free))
    law = a["controller"]
    setup = {"actuator": actuator, "joint_type": "revolute", "controller": law, "gains": {}}
    return {
        "format": MODEL_FORMAT, "format_version": MODEL_FORMAT_VERSION, "robot": BENCH_PREFIX + "revolute",
        "kind": "analytic", "model": spec.name, "description": spec.description, "features": list(spec.free),
        "actuator": actuator, "joint_type": "revolute", "controller": law, "setup": setup,
        "controller_constants": {"error_gain": DEFAULT_ERROR_GAIN.get(law), "max_duty": 1.0},
        "parameters": params,
        "fit": {"dt": None, "source": f"imported from BAM ({source})"},
        "data": {"logs": []}, "metrics": {}, "identifiability": None, "selection": None, "uncertainty": None,
        "imported_from": {"tool": "bam", "file": str(source), "parameters": dict(bam)},
        "package_version": __version__, "git_revision": git_revision(),
    }
