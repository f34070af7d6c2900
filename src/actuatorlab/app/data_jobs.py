"""Typed jobs of the data commands: import, import-bam, audit, synth (see :mod:`.identify_jobs`)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Callable

from . import jobs
from .. import synth
from ..errors import ModelError, UnknownNameError
from ..synth.suites import SynthError
from ..files import read_json
from ..models.modelfile import model_from_bam, save_model
from .identify_jobs import Result, check_range


@dataclasses.dataclass(frozen=True)
class ImportJob:
    """Fields: data (logs: BAM JSON, EMPS .mat, CSV + mapping, ROS 2 MCAP bags, LeRobot dataset
    folders), out (folder of the native logs), mapping (CSV column mapping, MCAP topic mapping or
    LeRobot units mapping, docs/format.md)."""

    data: tuple[Path, ...]
    out: Path
    mapping: Path | None = None


def run_import_job(job: ImportJob) -> Result:
    """Convert logs to the native Parquet + JSON format; ``record``: the written files."""
    return Result([str(p) for p in jobs.run_import(list(job.data), job.out, mapping=job.mapping)])


@dataclasses.dataclass(frozen=True)
class ImportBamJob:
    """Fields: params (a BAM parameter file, bam.fit's output), out (model.json to write)."""

    params: Path
    out: Path


def run_import_bam_job(job: ImportBamJob) -> Result:
    """Convert a BAM parameter file to an actuatorlab model.json; ``record``: the model dict."""
    d = model_from_bam(read_json(job.params, ModelError, "no such BAM parameter file"), source=str(job.params))
    save_model(d, job.out)
    return Result(d)


@dataclasses.dataclass(frozen=True)
class AuditJob:
    """Fields: data (log files or folders), mapping (column mapping for CSV logs)."""

    data: tuple[Path, ...]
    mapping: Path | None = None


def run_audit_job(job: AuditJob) -> Result:
    """Audit every log (:func:`~actuatorlab.app.jobs.run_audit`); ``record``: one report per log."""
    return Result(jobs.run_audit(list(job.data), mapping=job.mapping))


@dataclasses.dataclass(frozen=True)
class SynthJob:
    """Fields: out (dataset folder), robot ("open_manipulator_x"), suite ("neural_actuator"; e.g.
    smoke; "bench": one-joint pendulum logs of a zoo actuator), seed, scale (in (0, 1]: shrinks number
    and length of trajectories), overwrite (replace a dataset this command wrote before),
    restricted_pairs (N restricted-joint-3 / normal pairs with identical commands, condition
    detection), push_pairs (N push / no-contact pairs, force estimation), actuator (with suite
    "bench": the zoo actuator, e.g. xl330_like; docs/synth.md, "The actuator zoo")."""

    out: Path
    robot: str = "open_manipulator_x"
    suite: str = "neural_actuator"
    seed: int = 0
    scale: float = 1.0
    overwrite: bool = False
    restricted_pairs: int = 0
    push_pairs: int = 0
    actuator: str | None = None


def check_synth(job: SynthJob) -> None:
    """The numeric fields' ranges, before any work (one line naming the option)."""
    check_range("--scale", job.scale, high=1.0)
    check_range("--restricted-pairs", job.restricted_pairs, low_ok=True)
    check_range("--push-pairs", job.push_pairs, low_ok=True)
    if job.suite == synth.BENCH_SUITE:
        if job.actuator is None:
            raise SynthError(f"--suite {synth.BENCH_SUITE} needs --actuator NAME; available: {', '.join(synth.ZOO)}")
        synth.get_actuator(job.actuator)
        if job.restricted_pairs or job.push_pairs:
            raise SynthError(f"--restricted-pairs / --push-pairs are arm-suite options, not {synth.BENCH_SUITE}'s")
    elif job.suite == synth.LEGGED_SUITE:
        if job.actuator is not None or job.restricted_pairs or job.push_pairs:
            raise SynthError(f"--suite {synth.LEGGED_SUITE} takes --robot anymal_c, --out, --seed, --scale only")
    elif job.actuator is not None:
        raise SynthError(f"--actuator applies to --suite {synth.BENCH_SUITE} only (suite {job.suite!r} is a robot "
                         f"suite: its joints are the robot's servos)")
    elif job.suite not in synth.SUITES:
        raise UnknownNameError("suite", job.suite, [*synth.SUITES, synth.BENCH_SUITE])


def run_synth_job(job: SynthJob, progress: Callable | None = None) -> Result:
    """Write the synthetic dataset (:func:`actuatorlab.synth.run_synth`); ``record``: its summary."""
    check_synth(job)
    if job.suite == synth.BENCH_SUITE and job.actuator is not None:
        return Result(synth.run_bench(job.actuator, job.out, job.seed, job.scale, progress=progress,
                                      overwrite=job.overwrite))
    if job.suite == synth.LEGGED_SUITE:
        return Result(synth.run_legged(job.robot, job.out, job.seed, job.scale, progress=progress,
                                       overwrite=job.overwrite))
    return Result(synth.run_synth(job.robot, job.suite, job.out, job.seed, job.scale, progress=progress,
                                  overwrite=job.overwrite, restricted_pairs=job.restricted_pairs,
                                  push_pairs=job.push_pairs))
