"""Commands that bring logs in and look at them: import, import-bam, audit, synth."""


from __future__ import annotations

import json
from pathlib import Path
from typing import List, Optional

import typer

from ...errors import ModelError
from .. import jobs
from ...files import read_json
from ...models.modelfile import model_from_bam, save_model
from ...logs import render_audit
from ...synth import run_synth
from ._common import app, console, _progress, _json_command, _emit_json, _check_range


@app.command("import")
def import_(data: List[Path] = typer.Argument(...), out: Path = typer.Option(..., "--out", "-o"),
            mapping: Optional[Path] = typer.Option(None, "--mapping", help="CSV column mapping, MCAP topic "
                                                    "mapping or LeRobot units mapping (docs/format.md)")):
    """Convert logs (BAM JSON, EMPS .mat, CSV + mapping, ROS 2 MCAP bags, LeRobot dataset folders) to
    the native Parquet + JSON format (one pair per log or LeRobot episode)."""

    for p in jobs.run_import(data, out, mapping=mapping):
        console.print(f"wrote {p}")


@app.command("import-bam")
def import_bam(params: Path = typer.Argument(..., help="BAM parameter file (bam.fit's output, e.g. params/xl330/m5.json of the BAM repository)"),
               out: Path = typer.Option(..., "--out", "-o", help="model.json to write")):
    """Convert a BAM (Better Actuator Models) parameter file to an actuatorlab model.json, so that
    `evaluate`, `export` and the simulators use the BAM-identified actuator (docs/models.md)."""

    d = model_from_bam(read_json(params, ModelError, "no such BAM parameter file"), source=str(params))
    save_model(d, out)
    console.print(f"wrote {out} ({d['model']}, from {params})")


@app.command()
@_json_command
def audit(data: List[Path] = typer.Argument(...), as_json: bool = typer.Option(False, "--json"),
          mapping: Optional[Path] = typer.Option(None, "--mapping")):
    """Audit logs: rate, jitter, gaps, timestamps, NaN, saturation, derived channels, causality."""

    reports = jobs.run_audit(data, mapping=mapping)
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
def synth(robot: str = typer.Option("open_manipulator_x", "--robot", help="robot name"),
          suite: str = typer.Option("neural_actuator", "--suite", help="suite name (e.g. neural_actuator, smoke)"),
          out: Path = typer.Option(..., "--out", "-o", help="dataset folder to write"),
          seed: int = typer.Option(0, "--seed"),
          scale: float = typer.Option(1.0, "--scale", help="in (0, 1]: shrinks number and length of trajectories"),
          overwrite: bool = typer.Option(False, "--overwrite", help="replace a dataset this command wrote before"),
          restricted_pairs: int = typer.Option(0, "--restricted-pairs", help="append N restricted-joint-3 / normal "
                                               "pairs with identical commands (condition detection)"),
          push_pairs: int = typer.Option(0, "--push-pairs", help="append N push / no-contact pairs at new random "
                                         "poses, directions cycled through those not held out (force "
                                         "estimation)")):
    """Write realistic synthetic logs from virtual hardware with known ground truth."""

    _check_range("--scale", scale, high=1.0)  # before the progress bar: nothing is written
    _check_range("--restricted-pairs", restricted_pairs, low_ok=True)
    _check_range("--push-pairs", push_pairs, low_ok=True)
    with _progress() as p:
        task = p.add_task(f"{robot}/{suite}", total=None)

        def cb(done, total, name):
            p.update(task, total=total, completed=done, description=f"{suite}: {name}"[:28])

        summary = run_synth(robot, suite, out, seed, scale, progress=cb, overwrite=overwrite,
                            restricted_pairs=restricted_pairs, push_pairs=push_pairs)
    console.print(json.dumps({k: v for k, v in summary.items() if not isinstance(v, (list, dict))}, indent=1,
                             default=str), markup=False, highlight=False, soft_wrap=True)
    console.print(f"wrote {out} (dataset card: {Path(out) / 'DATASET.md'})")

