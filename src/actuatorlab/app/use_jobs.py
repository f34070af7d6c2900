"""Typed jobs of the commands that hand a model to its users: export, randomize (see :mod:`.identify_jobs`)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from ..errors import ActuatorlabError
from ..export import targets
from ..models.actuator_model import load
from ..models.modelfile import joint_dict
from ..sim.randomization import load_spec, save_spec
from ..sim.randomization_proposal import propose_fleet_spec, propose_spec
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
    to write), check (only validate the spec given as the first of models)."""

    models: tuple[Path, ...]
    out: Path | None = None
    check: bool = False


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
    save_spec(doc, job.out)
    return Result(doc)
