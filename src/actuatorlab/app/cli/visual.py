"""Camera commands: calibrate-camera."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from .. import visual_jobs
from ..visual_jobs import CalibrateCameraJob
from ._common import Config, app, console, documents, job_of

#: the commands this module registers on the CLI's typer app
__all__ = ["calibrate_camera"]


@app.command("calibrate-camera")
@documents(CalibrateCameraJob)
def calibrate_camera(ctx: typer.Context,
                     logs: Optional[List[Path]] = typer.Argument(None, help="log files or folders"),
                     masks: Optional[Path] = typer.Argument(None, help="folder with cameras.json and NAME.npz masks"),
                     robot: str = typer.Option("open_manipulator_x", "--robot", help="robot name or config file"),
                     out: Optional[Path] = typer.Option(None, "--out", "-o", help="folder for camera_calibration.json"),
                     config: Config = None):
    """Hand-eye calibration from robot silhouettes: each camera's camera-from-base transform from a
    three-point initialisation and the soft IoU of rendered and observed masks (docs/visual.md)."""

    job = job_of(ctx, CalibrateCameraJob, config, logs="logs", masks="masks", robot="robot", out="out")
    doc = visual_jobs.run_calibrate_camera_job(job).record
    for c in doc["cameras"]:
        console.print(f"{c['camera']}: soft IoU {c['soft_iou_before']:.3f} -> {c['soft_iou_after']:.3f}, "
                      f"std {c['translation_std_mm']:.2f} mm / {c['rotation_std_deg']:.3f} deg")
        console.print(f"  camera_from_base {c['camera_from_base']}")
    if out is not None:
        console.print(f"wrote {Path(out) / 'camera_calibration.json'}")
