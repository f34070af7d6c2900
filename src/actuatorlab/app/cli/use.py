"""Commands that hand a model to its users: export, randomize."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer
from rich.table import Table

from ...identify.identifiability import SENSITIVITY_STEP
from ...identify.nested import MIN_GAIN
from .. import use_jobs
from ..use_jobs import ExportJob, RandomizeJob
from ._common import Config, app, console, documents, job_of

#: the commands this module registers on the CLI's typer app
__all__ = ["export", "randomize"]


@app.command()
@documents(ExportJob)
def export(ctx: typer.Context,
           model_json: Optional[Path] = typer.Argument(None, help="RUN/model.json (analytic or learned one-joint) or RUN/arm_model.json (whole robot)"),
           mjcf: Optional[Path] = typer.Option(None, "--mjcf", help="MJCF file to write (analytic)"),
           mjlab: Optional[Path] = typer.Option(None, "--mjlab", help="mjlab actuator config .py/.json (+ .pt for a learned actuator_net)"),
           isaaclab: Optional[Path] = typer.Option(None, "--isaaclab", help="Isaac Lab actuator config .py/.json (+ .pt for a learned actuator_net)"),
           onnx: Optional[Path] = typer.Option(None, "--onnx", help="ONNX file of a learned model's network"),
           torchscript: Optional[Path] = typer.Option(None, "--torchscript", help="TorchScript file of a learned model (raw window -> effort)"),
           robot: Optional[str] = typer.Option(None, "--robot", help="arm_model.json: robot name or config file "
                                               "(default: the robot the file names)"),
           config: Config = None):
    """Export a fitted model to MuJoCo, mjlab, Isaac Lab, ONNX or TorchScript (one or several), each
    with its rate, lags, sign convention and units, a README.md beside it, and what is lost."""

    job = job_of(ctx, ExportJob, config, model="model_json", mjcf="mjcf", mjlab="mjlab", isaaclab="isaaclab",
                 onnx="onnx", torchscript="torchscript", robot="robot")
    results = use_jobs.run_export_job(job).record
    for r in results:
        t = Table(title=f"{r.target}: wrote " + ", ".join(str(p) for p in r.files))
        t.add_column("quantity")
        t.add_column("value")
        for k, v in r.summary.items():
            t.add_row(k, f"{v:.6g}" if isinstance(v, float) else str(v))
        console.print(t)
        for line in r.not_representable:
            console.print(f"[yellow]not representable ({r.target}):[/] {line}")


@app.command()
@documents(RandomizeJob)
def randomize(ctx: typer.Context,
              model_json: Optional[List[Path]] = typer.Argument(None, help="RUN/model.json; several files = several units "
                                                                "of one actuator (their spread becomes unit variation); "
                                                                "or one RUN/arm_model.json fitted per joint (a robot's fleet)"),
              out: Optional[Path] = typer.Option(None, "--out", "-o", help="randomization spec (JSON) to write"),
              check: bool = typer.Option(False, "--check", help="only validate the spec given as MODEL_JSON"),
              config: Config = None):
    """Propose a randomization spec from the identification (docs/randomization.md)."""

    job = job_of(ctx, RandomizeJob, config, models="model_json", out="out", check="check")
    doc = use_jobs.run_randomize_job(job).record
    if job.check:
        console.print(f"{job.models[0]}: valid, {len(doc['entries'])} entries "
                      f"({', '.join(k + ':' + n for k, n in doc['entries'])})")
        return
    out = job.out
    t = Table(title=f"wrote {out}")
    for c in ("entry", "kind", "what", "from"):
        t.add_column(c)
    for e in doc["entries"]:
        what = ", ".join(e["parameters"]) if e["kind"] == "identified" else e.get("parameter") or e.get("signal")
        t.add_row(e["name"], e["kind"], what, e.get("uncertainty_source", e.get("note", ""))[:60])
    console.print(t)
    undetermined = doc["source"].get("undetermined")
    if undetermined:
        console.print(f"warning: no unit's fit determines {', '.join(undetermined)} (each moved alone by "
                      f"-+{100 * SENSITIVITY_STEP:g} % changes its fit's error by less than {100 * MIN_GAIN:g} %): "
                      "their spread across units is estimation error, not unit variation; edit the spec, or record "
                      "logs that determine them")
