"""One actuator model type and one file format: :class:`ActuatorModel`, :func:`load`, :func:`save`.

Every model file actuatorlab reads or writes goes through this module: the one-joint RUN/model.json
(``actuatorlab fit``, ``train``, ``import-bam``), the whole-robot RUN/arm_model.json
(``fit --robot``, ``train --robot``) and hand-written files such as
``robots/actuators/anymal_c_sea.json``. :func:`save` writes format ``"actuatorlab-model"``
version ``"2"``; :func:`load` reads version 2 and every version-1 file written before it
(``"actuatorlab-model"`` v1 one-joint files, ``"actuatorlab-arm-model"`` v1 whole-robot files).
Field by field: docs/model_file.md.

A one-joint model is a model of a one-joint robot, its test bench: ``robot`` is
``"bench:revolute"`` (a pendulum) or ``"bench:prismatic"`` (a carriage) and the file's ``setup``
holds the bench (:mod:`actuatorlab.robots.bench` builds its MJCF and robot config).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from ..errors import ModelError, UnknownNameError
from ..files import atomic_write, read_json
from .params import PARAMS
from .registry import get_model

__all__ = ["FORMAT", "FORMAT_VERSION", "V1_JOINT_FORMAT", "V1_ROBOT_FORMAT", "KINDS", "LEARNED_KINDS",
           "BENCH_PREFIX", "ActuatorModel", "load", "save", "from_document", "check_robot",
           "validate_envelope", "ENVELOPE_VERSION", "CONTINUOUS"]

#: the one model file format (docs/model_file.md)
FORMAT = "actuatorlab-model"
FORMAT_VERSION = "2"
#: version-1 formats that :func:`load` still reads: one-joint model.json, whole-robot arm_model.json
V1_JOINT_FORMAT = "actuatorlab-model"
V1_ROBOT_FORMAT = "actuatorlab-arm-model"
KINDS = ("analytic", "learned", "residual")
LEARNED_KINDS = ("learned", "residual")
#: robot names of one-joint test benches: "bench:revolute" (pendulum), "bench:prismatic" (carriage)
BENCH_PREFIX = "bench:"
#: the file's keys that :attr:`ActuatorModel.network` collects (learned / residual models)
_NETWORK_KEYS = ("arch", "sizes", "weights", "layout", "normalizer", "params_count", "effort_scale",
                 "effort_bound", "step_config", "force_prior", "force_frame", "residual_input")
#: the file's keys that :attr:`ActuatorModel.provenance` collects
_PROVENANCE_KEYS = ("package_version", "git_revision", "data", "fit", "selection", "metrics", "identifiability",
                    "uncertainty", "training", "imported_from", "sources")


@dataclass(frozen=True, eq=False)
class ActuatorModel:
    """A fitted or trained actuator model, read from or written to one file.

    robot: the robot it runs on: a bundled robot name, a robot config path, or ``"bench:revolute"``
        / ``"bench:prismatic"`` for a one-joint model (its bench is the file's ``setup``); None
        for a file that names no robot (:func:`check_robot` then needs one; :func:`save` refuses it).
    kind: "analytic" | "learned" | "residual".
    model: registry name of the analytic model (of the base model for "residual"; None for a
        whole-robot "learned" model without a base, or a one-joint "learned" one).
    parameters: analytic values (the base's for "residual"). One joint: name -> value (SI, output
        shaft); robot: name -> value or {parameter set or joint: value} (servo side).
    network: arch, sizes, weights file (beside the model file), layout, normalizer, ... of a
        learned / residual model, else None.
    envelope: the training data's operating envelope (one joint: docs/envelope.md; robot: per
        joint), or None.
    provenance: package version, git revision, data, fit / selection / metrics records.
    path: the file it came from (errors name it), or None.
    document: the whole file as a dict (version 2 layout; docs/model_file.md), for the records
        this view does not lift out (setup, controller constants, per-parameter bounds).
    """

    robot: str | None
    kind: str
    model: str | None
    parameters: Mapping[str, Any]
    network: Mapping[str, Any] | None
    envelope: Mapping[str, Any] | None
    provenance: Mapping[str, Any]
    path: str | None = None
    document: Mapping[str, Any] = field(default_factory=dict, repr=False)

    @property
    def one_joint(self) -> bool:
        """True for a one-joint model (its robot is a test bench)."""
        return self.joint_type is not None

    @property
    def joint_type(self) -> str | None:
        """"revolute" | "prismatic" of a one-joint model, None for a robot."""
        robot = self.robot
        return robot[len(BENCH_PREFIX):] if isinstance(robot, str) and robot.startswith(BENCH_PREFIX) else None

    @property
    def setup(self) -> dict[str, Any]:
        """The bench (one-joint models): actuator, joint type, controller, gains, supply, bench."""
        return dict(self.document.get("setup") or {})

    @property
    def where(self) -> str:
        """What errors name: the file, or "model" for one not read from a file."""
        return self.path or "model"


# ---------------------------------------------------------------------------------------------
# reading


def load(path: str | Path) -> ActuatorModel:
    """Read and validate a model file (version 2, or any version-1 model.json / arm_model.json).

    Errors are one-line :class:`ModelError` naming the file: missing file, not JSON, unknown
    format or version, unknown model name or kind, unknown or non-finite parameter, malformed
    envelope, learned weights not beside the file."""
    path = Path(path)
    d = read_json(path, ModelError, "no such model file")
    return from_document(d, path)


def from_document(d: Any, path: str | Path | None = None, *, validate: bool = True) -> ActuatorModel:
    """The :class:`ActuatorModel` of a model file's dict (any version; upgraded to version 2).
    ``path``: the file it came from (errors name it; learned weights are looked for beside it).
    ``validate=False`` only upgrades (writers that store what a fit produced, even non-finite)."""
    where = str(path) if path is not None else "model"
    doc = _upgrade(d, where)
    if validate:
        _validate(doc, where, None if path is None else Path(path))
    return _view(doc, where if path is not None else None)


def _upgrade(d: Any, where: str) -> dict[str, Any]:
    """A version-2 document from any supported version (a copy; ``d`` is not changed)."""
    if not isinstance(d, dict):
        raise ModelError(f"{where}: not an actuatorlab model file (a JSON object with format '{FORMAT}')")
    fmt, ver = d.get("format"), str(d.get("format_version"))
    if fmt == V1_ROBOT_FORMAT and d.get("format_version") is None:  # version-1 readers never checked it
        ver = "1"
    if fmt not in (FORMAT, V1_ROBOT_FORMAT):
        raise ModelError(f"{where}: not an actuatorlab model file (missing format '{FORMAT}')")
    if (fmt, ver) not in ((FORMAT, FORMAT_VERSION), (FORMAT, "1"), (V1_ROBOT_FORMAT, "1")):
        raise ModelError(f"{where}: model format version {d.get('format_version')!r} is not supported "
                         f"(this version reads {FORMAT_VERSION!r} and '1')")
    doc = {k: v for k, v in d.items() if k != "_path"}
    if ver == "1":
        if fmt == V1_JOINT_FORMAT:  # a one-joint model: its robot is its bench
            jt = doc.get("joint_type") or (doc.get("setup") or {}).get("joint_type") or "revolute"
            doc["robot"] = BENCH_PREFIX + str(jt)
        doc["kind"] = doc.get("kind") or "analytic"
    doc.update(format=FORMAT, format_version=FORMAT_VERSION)
    if doc.get("kind") not in KINDS:
        raise ModelError(f"{where}: unknown model kind {doc.get('kind')!r}; available: {', '.join(KINDS)}")
    return doc


def _one_joint(doc: dict) -> bool:
    return isinstance(doc.get("robot"), str) and doc["robot"].startswith(BENCH_PREFIX)


def _validate(doc: dict, where: str, path: Path | None) -> None:
    if _one_joint(doc):
        jt = doc["robot"][len(BENCH_PREFIX):]
        if jt not in ("revolute", "prismatic"):
            raise ModelError(f"{where}: unknown bench {doc['robot']!r}; available: "
                             f"{BENCH_PREFIX}revolute, {BENCH_PREFIX}prismatic")
        if doc["kind"] in LEARNED_KINDS:
            _check_learned_joint(doc, where, path)
            return
        for key in ("model", "parameters", "setup"):
            if key not in doc:
                raise ModelError(f"{where}: missing key {key!r}")
        _check_model_name(doc["model"], where)
        for name, entry in doc["parameters"].items():
            if name not in PARAMS:
                raise ModelError(f"{where}: unknown parameter {name!r}")
            if not isinstance(entry, dict) or not isinstance(entry.get("value"), (int, float)):
                raise ModelError(f"{where}: parameter {name!r} has no numeric value")
        _check_finite({k: e["value"] for k, e in doc["parameters"].items()}, where)
        if doc.get("envelope") is not None:  # optional: files written before envelopes were recorded lack it
            validate_envelope(doc["envelope"], where)
        return
    # a whole robot
    if doc["kind"] in LEARNED_KINDS:  # its network is read by actuatorlab.learned.arm.load_arm_model
        if path is not None and "weights" in doc and not (path.parent / str(doc["weights"])).is_file():
            raise ModelError(f"{where}: weights file {doc['weights']!r} not found beside it")
        base = doc.get("base") or {}
        if base.get("model"):
            _check_model_name(base["model"], where)
        _check_robot_params(base.get("params") or {}, where, "base model parameter")
        return
    if doc.get("model"):
        _check_model_name(doc["model"], where)
    _check_robot_params(doc.get("params") or {}, where, "parameter")
    env = doc.get("envelope")
    if env is not None and not isinstance(env, dict):
        raise ModelError(f"{where}: envelope must be an object, got {type(env).__name__}")


def _check_learned_joint(doc: dict, where: str, path: Path | None) -> None:
    """The JSON side of a learned/residual one-joint model; the weights file is read (and checked)
    when the model is replayed (:func:`actuatorlab.learned.joint_train.load_joint_model`)."""
    for key in ("model", "arch", "weights", "layout", "normalizer", "physics_parameters", "step_config", "setup"):
        if key not in doc:
            raise ModelError(f"{where}: learned model file has no {key!r}")
    if path is not None and not (path.parent / str(doc["weights"])).is_file():
        raise ModelError(f"{where}: weights file {doc['weights']!r} not found beside it")
    if doc["kind"] == "residual" and not isinstance(doc.get("base"), dict):
        raise ModelError(f"{where}: residual model file has no analytic 'base' model")
    if not isinstance(doc["physics_parameters"], dict):
        raise ModelError(f"{where}: learned model file's 'physics_parameters' is not an object")
    _check_finite(doc["physics_parameters"], where, "physics parameter")
    if doc["kind"] == "residual":
        base = doc["base"].get("parameters") or {}
        _check_finite({k: e.get("value") if isinstance(e, dict) else e for k, e in base.items()}, where,
                      "base model parameter")


def _check_model_name(name, where: str) -> None:
    """An unknown model name in a model file: the registry's one-line error, naming the file."""
    try:
        get_model(name)
    except UnknownNameError as e:
        raise ModelError(f"{where}: {e}") from None


def _check_finite(values: Mapping, where: str, what: str = "parameter") -> None:
    """Refuse a model whose parameters are not all finite numbers (NaN or inf in the file would
    replay as NaN everywhere: every metric null), naming the file and the first such parameter."""
    for name, v in values.items():
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise ModelError(f"{where}: {what} {name!r} is not a finite number ({v!r})")


def _check_robot_params(params: Any, where: str, what: str) -> None:
    """Whole-robot parameters: name -> value or {parameter set or joint: value}, all finite."""
    if not isinstance(params, dict):
        raise ModelError(f"{where}: '{what}s' must be an object (name -> value or {{set or joint: value}})")
    for name, v in params.items():
        if name not in PARAMS:
            raise ModelError(f"{where}: unknown parameter {name!r}")
        _check_finite({f"{name}@{k}": x for k, x in v.items()} if isinstance(v, dict) else {name: v}, where, what)


def _view(doc: dict, path: str | None) -> ActuatorModel:
    kind = doc["kind"]
    one = _one_joint(doc)
    base = doc.get("base") if isinstance(doc.get("base"), dict) else None
    if one and kind == "analytic":
        model, params = doc.get("model"), _values(doc.get("parameters"))
    elif one:
        model = base.get("model") if base else None
        params = dict(doc.get("physics_parameters") or {})
    elif kind == "analytic":
        model, params = doc.get("model"), dict(doc.get("params") or {})
    else:
        model, params = (base or {}).get("model"), dict((base or {}).get("params") or {})
    network = {k: doc[k] for k in _NETWORK_KEYS if k in doc} if kind in LEARNED_KINDS else None
    return ActuatorModel(robot=doc.get("robot"), kind=kind, model=model, parameters=params, network=network,
                         envelope=doc.get("envelope"),
                         provenance={k: doc[k] for k in _PROVENANCE_KEYS if k in doc}, path=path, document=doc)


def _values(entries: Any) -> dict[str, float]:
    """name -> value of a one-joint file's ``parameters`` ({name: {"value", "unit", ...}})."""
    out = {}
    for k, e in (entries or {}).items():
        v = e.get("value") if isinstance(e, dict) else e
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            out[k] = float(v)
    return out


def check_robot(model: ActuatorModel, robot: Any) -> str:
    """The robot ``model`` runs on, checked against an explicit ``robot`` (a name, config path,
    or None: the file's). A disagreement is one line naming both."""
    mine = model.robot
    if robot is None or str(robot) == "":
        if not mine:
            raise ModelError(f"{model.where}: names no robot; give --robot NAME (or a robot config file)")
        return mine
    if mine is not None and str(robot) != mine:
        raise ModelError(f"{model.where}: fitted for robot {mine!r}, not {str(robot)!r} (--robot; "
                         "without it the file's robot is used)")
    return str(robot)


# ---------------------------------------------------------------------------------------------
# writing


def save(model: ActuatorModel, path: str | Path) -> Path:
    """Write ``model`` as a version-2 model file, atomically (temporary file + rename).

    The file is ``model.document`` with its header set from the view: format, format_version,
    robot, kind. A model that names no robot is refused (version 2 always has ``robot``)."""
    if not model.robot:
        raise ModelError(f"{path}: a model file must name its robot")
    doc = {**model.document, "format": FORMAT, "format_version": FORMAT_VERSION, "robot": model.robot,
           "kind": model.kind}
    return atomic_write(path, json.dumps(doc, indent=2, default=_json_default) + "\n")


def _json_default(o):
    if isinstance(o, (np.floating, np.integer)):
        return o.item()
    if isinstance(o, np.ndarray):
        return o.tolist()
    try:  # a scalar of another array library (a JAX scalar)
        return float(o)
    except (TypeError, ValueError):
        raise TypeError(type(o).__name__) from None


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


def _unrows(rows, shape: tuple[int, int], what: str) -> np.ndarray:
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
