"""Typed jobs of the commands that hand a model to its users: export, randomize (see :mod:`.identify_jobs`)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from ..errors import ActuatorlabError
from ..export import targets
from ..identify.arm_cover import cover_document, cover_spec
from ..identify.drive import drive_logs
from ..robots.loader import load_robot
from ..models.actuator_model import load
from ..models.modelfile import joint_dict
from ..sim.randomization import load_spec, save_spec
from ..sim.randomization_proposal import propose_fleet_spec, propose_spec
from .data_files import load_data
from .identify_jobs import Result


@dataclasses.dataclass(frozen=True)
class ExportJob:
    """Fields: model (RUN/model.json, analytic or learned one-joint, or RUN/arm_model.json), mjcf
    (MJCF file, analytic), mjlab / isaaclab (actuator config .py/.json, + .pt for a learned
    actuator_net), onnx (a learned model's network), torchscript (a learned model, raw window ->
    effort), base (with mjcf: an existing MJCF to patch, never overwritten), joint (joint of base to
    patch / joint name in the configs), robot (arm_model.json: robot name or config file)."""

    model: Path
    mjcf: Path | None = None
    mjlab: Path | None = None
    isaaclab: Path | None = None
    onnx: Path | None = None
    torchscript: Path | None = None
    base: Path | None = None
    joint: str | None = None
    robot: str | None = None


def run_export_job(job: ExportJob) -> Result:
    """Write every requested target (:func:`actuatorlab.export.targets.export_targets`); ``record``:
    one :class:`~actuatorlab.export.targets.ExportResult` per target."""
    return Result(targets.export_targets(job.model, {"mjcf": job.mjcf, "mjlab": job.mjlab, "isaaclab": job.isaaclab,
                                                     "onnx": job.onnx, "torchscript": job.torchscript},
                                         base=job.base, joint=job.joint, robot=job.robot))


@dataclasses.dataclass(frozen=True)
class RandomizeJob:
    """Fields: models (RUN/model.json files; several = several units of one actuator, their spread
    becomes unit variation; or one RUN/arm_model.json fitted per joint: the robot's joints are the
    units, :func:`~actuatorlab.sim.randomization_proposal.propose_fleet_spec`), out (randomization spec
    to write), check (only validate the spec given as the first of models), cover (the robot's training
    logs, files or folders: the parameter spread is scaled until it covers the model's replay error on
    them, :func:`~actuatorlab.identify.arm_cover.cover_spec`; drive-rate logs among them are left out),
    centre (with cover: the arm_model.json the environment runs, e.g. the fit by joint type; default the
    model given)."""

    models: tuple[Path, ...]
    out: Path | None = None
    check: bool = False
    cover: tuple[Path, ...] = ()
    centre: Path | None = None


def _covered(job: RandomizeJob, doc: dict) -> dict:
    """``doc`` scaled to cover the centre model's replay error on ``job.cover`` (:mod:`~actuatorlab.identify.arm_cover`)."""
    centre = load(job.centre or job.models[0])
    if centre.one_joint or centre.kind != "analytic":
        raise ActuatorlabError(f"randomize --cover: {job.centre or job.models[0]}: the centre must be an analytic "
                               "arm_model.json (a robot's fit), not a one-joint or learned model")
    robot = str(centre.document["robot"])
    _, trajs = drive_logs(load_data(list(job.cover)), load_robot(robot).joint_names)
    if not trajs:
        raise ActuatorlabError(f"randomize --cover: no logs at the control rate in {', '.join(map(str, job.cover))}")
    res = cover_spec(robot, centre.document, doc, trajs)
    res["centre"], res["logs"] = str(job.centre or job.models[0]), [t.source_file or t.name for t in trajs]
    return cover_document(doc, res)


def run_randomize_job(job: RandomizeJob) -> Result:
    """Propose (and write) a randomization spec, or validate one; ``record``: the spec document
    (with ``check``: {"entries": [[kind, name], ...]})."""
    if job.check:
        s = load_spec(job.models[0])
        return Result({"entries": [[e.kind, e.name] for e in s.entries]})
    if job.out is None:
        raise ActuatorlabError("randomize: give --out SPEC (or --check to validate a spec)")
    loaded = [load(p) for p in job.models]
    if any(not m.one_joint for m in loaded):
        if len(loaded) != 1:
            raise ActuatorlabError("randomize: give one arm_model.json fitted per joint (its joints are the units), "
                                   f"not {len(loaded)} model files")
        doc = propose_fleet_spec(loaded[0].document, str(job.models[0]))
    else:
        doc = propose_spec([joint_dict(m) for m in loaded], [str(p) for p in job.models])
    if job.cover:
        doc = _covered(job, doc)
    save_spec(doc, job.out)
    return Result(doc)
