"""RUN/model.json: the fitted model, its parameters with units and bounds, the data used, the
operating envelope of the training data, metrics, package version and git revision (schema
"actuatorlab-model" v1, docs/model_file.md)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from ..errors import ModelError, UnknownNameError
from ..files import atomic_write, git_revision
from .control import DEFAULT_ERROR_GAIN
from .params import PARAMS, neutral_params, unit_for
from .registry import get_model
from ..files import read_json
from .. import __version__

__all__ = ["MODEL_FORMAT", "MODEL_FORMAT_VERSION", "ARM_MODEL_FORMAT", "ENVELOPE_VERSION", "CONTINUOUS", "validate_envelope", "model_to_dict", "save_model", "load_model",
           "params_from_model", "model_from_bam", "BAM_PARAMETER_NAMES",
           "BAM_ACTUATORS"]

MODEL_FORMAT = "actuatorlab-model"
MODEL_FORMAT_VERSION = "1"
#: whole-robot model files (RUN/arm_model.json: analytic, learned or residual; docs/model_file.md)
ARM_MODEL_FORMAT = "actuatorlab-arm-model"


def model_to_dict(fit, *, setup: dict, data: dict, metrics: dict, identifiability: dict | None = None,
                  selection: dict | None = None, extra: dict | None = None,
                  uncertainty: dict | None = None) -> dict[str, Any]:
    """Serializable description of a :class:`~actuatorlab.identify.fit.FitResult`.

    uncertainty: resampled standard errors (:func:`actuatorlab.identify.select.group_jackknife`);
    stored as the top-level ``uncertainty`` and per free parameter as ``stderr_resampled``,
    ``relative_spread`` and ``poorly_determined`` (docs/model_file.md)."""
    joint = setup.get("joint_type", "revolute")
    stderr = (identifiability or {}).get("stderr", {})
    params = {}
    values = fit.params
    free = set(fit.space.names)
    for name, entry in _parameter_entries(values, free, joint).items():
        if name in free:
            i = fit.space.names.index(name)
            entry.update(lower=float(fit.space.lower[i]), upper=float(fit.space.upper[i]),
                         stderr=stderr.get(name))
            if uncertainty:
                entry.update(stderr_resampled=uncertainty["stderr"].get(name),
                             relative_spread=uncertainty["relative"].get(name),
                             poorly_determined=name in uncertainty["flagged"])
        params[name] = entry
    law = setup.get("controller", "")
    d = {
        "format": MODEL_FORMAT, "format_version": MODEL_FORMAT_VERSION,
        "model": fit.model, "description": fit.spec.description,
        "features": list(fit.spec.free),
        "actuator": setup.get("actuator"), "joint_type": joint, "controller": law,
        "setup": setup,
        "controller_constants": {"error_gain": setup.get("gains", {}).get("error_gain", DEFAULT_ERROR_GAIN.get(law)),
                                 "max_duty": setup.get("gains", {}).get("max_duty", 1.0)},
        "parameters": params,
        "fit": {"train_mae": fit.train_mae, "objective": fit.objective, "effort_weight": fit.effort_weight,
                "evaluations": fit.evaluations, "wall_s": fit.wall_s,
                "profile": fit.profile, "dt": fit.dt, "history": fit.history},
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
    return atomic_write(path, json.dumps(d, indent=2, default=_json_default) + "\n")


def _json_default(o):
    import numpy as np

    if isinstance(o, (np.floating, np.integer)):
        return o.item()
    if isinstance(o, np.ndarray):
        return o.tolist()
    raise TypeError(type(o).__name__)


def load_model(path: str | Path) -> dict[str, Any]:
    """Read and validate a model.json; errors name the file and the problem."""

    path = Path(path)
    d = read_json(path, ModelError, "no such model file")
    if not isinstance(d, dict) or d.get("format") != MODEL_FORMAT:
        raise ModelError(f"{path}: not an actuatorlab model file (missing format '{MODEL_FORMAT}')")
    if d.get("format_version") != MODEL_FORMAT_VERSION:
        raise ModelError(f"{path}: model format version {d.get('format_version')!r} is not supported "
                         f"(this version reads {MODEL_FORMAT_VERSION!r})")
    if "kind" in d:  # a learned / residual one-joint model (docs/model_file.md)
        return _check_learned(d, path)
    for key in ("model", "parameters", "setup"):
        if key not in d:
            raise ModelError(f"{path}: missing key {key!r}")
    _check_model_name(d["model"], path)
    for name, entry in d["parameters"].items():
        if name not in PARAMS:
            raise ModelError(f"{path}: unknown parameter {name!r}")
        if not isinstance(entry, dict) or not isinstance(entry.get("value"), (int, float)):
            raise ModelError(f"{path}: parameter {name!r} has no numeric value")
    _check_finite({k: e["value"] for k, e in d["parameters"].items()}, path)
    if d.get("envelope") is not None:  # optional: files written before envelopes were recorded lack it
        validate_envelope(d["envelope"], str(path))
    return d


def _check_model_name(name, path: Path) -> None:
    """An unknown model name in a model file: the registry's one-line error, naming the file."""
    try:
        get_model(name)
    except UnknownNameError as e:
        raise ModelError(f"{path}: {e}") from None


def _check_finite(values: dict, path: Path, what: str = "parameter") -> None:
    """Refuse a model whose parameters are not all finite numbers (NaN or inf in the file would
    replay as NaN everywhere: every metric null), naming the file and the first such parameter."""
    for name, v in values.items():
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise ModelError(f"{path}: {what} {name!r} is not a finite number ({v!r})")


LEARNED_KINDS = ("learned", "residual")


def _check_learned(d: dict, path: Path) -> dict[str, Any]:
    """Validate the JSON side of a learned/residual model.json; the weights file beside it is read
    (and checked) when the model is replayed (:func:`actuatorlab.learned.joint_train.load_joint_model`)."""
    if d["kind"] not in LEARNED_KINDS:
        raise ModelError(f"{path}: unknown model kind {d['kind']!r}; available: {', '.join(LEARNED_KINDS)}")
    for key in ("model", "arch", "weights", "layout", "normalizer", "physics_parameters", "step_config", "setup"):
        if key not in d:
            raise ModelError(f"{path}: learned model file has no {key!r}")
    if not (path.parent / str(d["weights"])).is_file():
        raise ModelError(f"{path}: weights file {d['weights']!r} not found beside it")
    if d["kind"] == "residual" and not isinstance(d.get("base"), dict):
        raise ModelError(f"{path}: residual model file has no analytic 'base' model")
    if not isinstance(d["physics_parameters"], dict):
        raise ModelError(f"{path}: learned model file's 'physics_parameters' is not an object")
    _check_finite(d["physics_parameters"], path, "physics parameter")
    if d["kind"] == "residual":
        base = d["base"].get("parameters") or {}
        _check_finite({k: e.get("value") if isinstance(e, dict) else e for k, e in base.items()}, path,
                      "base model parameter")
    d["_path"] = str(path)
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
        "format": MODEL_FORMAT, "format_version": MODEL_FORMAT_VERSION,
        "model": spec.name, "description": spec.description, "features": list(spec.free),
        "actuator": actuator, "joint_type": "revolute", "controller": law, "setup": setup,
        "controller_constants": {"error_gain": DEFAULT_ERROR_GAIN.get(law), "max_duty": 1.0},
        "parameters": params,
        "fit": {"dt": None, "source": f"imported from BAM ({source})"},
        "data": {"logs": []}, "metrics": {}, "identifiability": None, "selection": None, "uncertainty": None,
        "imported_from": {"tool": "bam", "file": str(source), "parameters": dict(bam)},
        "package_version": __version__, "git_revision": git_revision(),
    }


# --------------------------------------------------------------------------------------------
# The operating envelope's stored form (computed and checked by actuatorlab.evaluate.envelope)
# --------------------------------------------------------------------------------------------

#: version of the stored envelope dict
ENVELOPE_VERSION = "1"


#: Continuous signals with a 1-D range: name -> unit (revolute, prismatic).
CONTINUOUS: dict[str, tuple[str, str]] = {
    "position": ("rad", "m"),
    "velocity": ("rad/s", "m/s"),
    "effort": ("1", "1"),
    "gravity_torque": ("N.m", "N"),
    "temperature": ("degC", "degC"),
    "supply_voltage": ("V", "V"),
}

def _unrows(rows: Sequence[str], shape: tuple[int, int], what: str) -> np.ndarray:
    a = np.array([[c == "1" for c in r] for r in rows], dtype=bool)
    if a.shape != shape:
        raise ModelError(f"envelope: {what} occupancy has shape {a.shape}, expected {shape}")
    return a


def validate_envelope(env: Any, where: str = "model.json") -> dict[str, Any]:
    """Check the structure of a stored envelope; errors name ``where`` and the problem."""
    if not isinstance(env, dict):
        raise ModelError(f"{where}: envelope must be an object, got {type(env).__name__}")
    if env.get("version") != ENVELOPE_VERSION:
        raise ModelError(f"{where}: envelope version {env.get('version')!r} is not supported "
                         f"(this version reads {ENVELOPE_VERSION!r})")
    for key in ("dt", "settings", "dimensions", "planes", "conditions"):
        if key not in env:
            raise ModelError(f"{where}: envelope lacks key {key!r}")
    for name, d in env["dimensions"].items():
        if name not in CONTINUOUS:
            raise ModelError(f"{where}: envelope has unknown dimension {name!r} (known: {', '.join(CONTINUOUS)})")
        if not all(isinstance(d.get(k), (int, float)) for k in ("lower", "upper")):
            raise ModelError(f"{where}: envelope dimension {name!r} needs numeric 'lower' and 'upper'")
    for name, p in env["planes"].items():
        try:
            nx, ny = len(p["x_edges"]) - 1, len(p["y_edges"]) - 1
            _unrows(p["occupied"], (nx, ny), f"{where}: plane {name!r}")
        except (KeyError, TypeError) as e:
            raise ModelError(f"{where}: envelope plane {name!r} is malformed ({e})") from None
    return env
