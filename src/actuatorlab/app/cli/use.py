"""Commands that hand a model to its users: export, randomize."""


from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer
from rich.table import Table

from ...errors import ActuatorlabError
from ...models.modelfile import load_model
from ...export.targets import export_targets
from ...sim.randomization import load_spec, propose_spec, save_spec
from ._common import app, console


@app.command()
def export(model_json: Path = typer.Argument(..., help="RUN/model.json (analytic or learned one-joint) or RUN/arm_model.json (whole robot)"),
           mjcf: Optional[Path] = typer.Option(None, "--mjcf", help="MJCF file to write (analytic)"),
           mjlab: Optional[Path] = typer.Option(None, "--mjlab", help="mjlab actuator config .py/.json (+ .pt for a learned actuator_net)"),
           isaaclab: Optional[Path] = typer.Option(None, "--isaaclab", help="Isaac Lab actuator config .py/.json (+ .pt for a learned actuator_net)"),
           onnx: Optional[Path] = typer.Option(None, "--onnx", help="ONNX file of a learned model's network"),
           torchscript: Optional[Path] = typer.Option(None, "--torchscript", help="TorchScript file of a learned model (raw window -> effort)"),
           base: Optional[Path] = typer.Option(None, "--base", help="--mjcf: existing MJCF to patch (never overwritten)"),
           joint: Optional[str] = typer.Option(None, "--joint", help="joint of --base to patch / joint name in the configs"),
           robot: Optional[str] = typer.Option(None, "--robot", help="arm_model.json: robot name or config file "
                                               "(default: the robot the file names)")):
    """Export a fitted model to MuJoCo, mjlab, Isaac Lab, ONNX or TorchScript (one or several), each
    with its rate, lags, sign convention and units, a README.md beside it, and what is lost."""

    results = export_targets(model_json, {"mjcf": mjcf, "mjlab": mjlab, "isaaclab": isaaclab, "onnx": onnx,
                                          "torchscript": torchscript}, base=base, joint=joint, robot=robot)
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
def randomize(model_json: List[Path] = typer.Argument(..., help="RUN/model.json; several files = several units "
                                                     "of one actuator (their spread becomes unit variation)"),
              out: Optional[Path] = typer.Option(None, "--out", "-o", help="randomization spec (JSON) to write"),
              check: bool = typer.Option(False, "--check", help="only validate the spec given as MODEL_JSON")):
    """Propose a randomization spec from the identification (docs/randomization.md)."""

    if check:
        s = load_spec(model_json[0])
        console.print(f"{model_json[0]}: valid, {len(s.entries)} entries "
                      f"({', '.join(e.kind + ':' + e.name for e in s.entries)})")
        return
    if out is None:
        raise ActuatorlabError("randomize: give --out SPEC (or --check to validate a spec)")
    doc = propose_spec([load_model(p) for p in model_json], [str(p) for p in model_json])
    save_spec(doc, out)
    t = Table(title=f"wrote {out}")
    for c in ("entry", "kind", "what", "from"):
        t.add_column(c)
    for e in doc["entries"]:
        what = ", ".join(e["parameters"]) if e["kind"] == "identified" else e.get("parameter") or e.get("signal")
        t.add_row(e["name"], e["kind"], what, e.get("uncertainty_source", e.get("note", ""))[:60])
    console.print(t)

