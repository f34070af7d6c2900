"""Commands that bring logs in and look at them: import, import-bam, audit, synth."""

from __future__ import annotations

import json
from pathlib import Path
from typing import List, Optional

import typer

from .. import data_jobs
from ..data_jobs import AuditJob, ImportBamJob, ImportJob, SynthJob
from ...logs import render_audit
from ._common import Config, app, console, documents, job_of, _emit_json, _json_command, _progress

#: the commands this module registers on the CLI's typer app
__all__ = ["import_", "import_bam", "audit", "synth"]


@app.command("import")
@documents(ImportJob)
def import_(ctx: typer.Context, data: Optional[List[Path]] = typer.Argument(None),
            out: Optional[Path] = typer.Option(None, "--out", "-o"),
            mapping: Optional[Path] = typer.Option(None, "--mapping", help="CSV column mapping, MCAP topic "
                                                    "mapping or LeRobot units mapping (docs/format.md)"),
            config: Config = None):
    """Convert logs (BAM JSON, EMPS .mat, CSV + mapping, ROS 2 MCAP bags, LeRobot dataset folders) to
    the native Parquet + JSON format (one pair per log or LeRobot episode)."""

    job = job_of(ctx, ImportJob, config, data="data", out="out", mapping="mapping")
    for p in data_jobs.run_import_job(job).record:
        console.print(f"wrote {p}")


@app.command("import-bam")
@documents(ImportBamJob)
def import_bam(ctx: typer.Context,
               params: Optional[Path] = typer.Argument(None, help="BAM parameter file (bam.fit's output, e.g. params/xl330/m5.json of the BAM repository)"),
               out: Optional[Path] = typer.Option(None, "--out", "-o", help="model.json to write"), config: Config = None):
    """Convert a BAM (Better Actuator Models) parameter file to an actuatorlab model.json, so that
    `evaluate`, `export` and the simulators use the BAM-identified actuator (docs/models.md)."""

    job = job_of(ctx, ImportBamJob, config, params="params", out="out")
    d = data_jobs.run_import_bam_job(job).record
    console.print(f"wrote {job.out} ({d['model']}, from {job.params})")


@app.command()
@_json_command
@documents(AuditJob)
def audit(ctx: typer.Context, data: Optional[List[Path]] = typer.Argument(None),
          as_json: bool = typer.Option(False, "--json"), config: Config = None):
    """Audit logs: rate, jitter, gaps, timestamps, NaN, saturation, derived channels, causality."""

    reports = data_jobs.run_audit_job(job_of(ctx, AuditJob, config, data="data")).to_json()
    if as_json:
        _emit_json(reports, default=float)
        return
    for r in reports:
        for line in render_audit(r):
            console.print(line)
        console.print()
    if any(i.get("severity") == "error" for r in reports for i in r.get("issues", [])):
        raise typer.Exit(1)


@app.command()
@documents(SynthJob)
def synth(ctx: typer.Context, robot: str = typer.Option("open_manipulator_x", "--robot", help="robot name"),
          suite: str = typer.Option("neural_actuator", "--suite", help="suite name (neural_actuator, smoke, cameras, "
                                    "cameras_gripper; legged with --robot anymal_c; bench: one-joint logs of a zoo actuator)"),
          out: Optional[Path] = typer.Option(None, "--out", "-o", help="dataset folder to write"),
          seed: int = typer.Option(0, "--seed"),
          scale: float = typer.Option(1.0, "--scale", help="in (0, 1]: shrinks number and length of trajectories"),
          actuator: Optional[str] = typer.Option(None, "--actuator", help="with --suite bench: the zoo actuator "
                                                 "(xl330_like, sts3250_like, bldc_module, high_gear, harmonic_drive)"),
          config: Config = None):
    """Write realistic synthetic logs from virtual hardware with known ground truth."""

    job = job_of(ctx, SynthJob, config, robot="robot", suite="suite", out="out", seed="seed", scale="scale",
                 actuator="actuator")
    data_jobs.check_synth(job)  # before the progress bar: nothing is written
    with _progress() as p:
        task = p.add_task(f"{job.actuator or job.robot}/{job.suite}", total=None)

        def cb(done, total, name):
            p.update(task, total=total, completed=done, description=f"{job.suite}: {name}"[:28])

        summary = data_jobs.run_synth_job(job, progress=cb).record
    console.print(json.dumps({k: v for k, v in summary.items() if not isinstance(v, (list, dict))}, indent=1,
                             default=str), markup=False, highlight=False, soft_wrap=True)
    card = "README.md" if job.suite in ("bench", "legged") else "DATASET.md"
    console.print(f"wrote {job.out} (dataset card: {Path(job.out) / card})")
