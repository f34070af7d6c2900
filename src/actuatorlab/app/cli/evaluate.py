"""Commands that replay and check models: evaluate, replay, infer."""


from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer
from rich.markup import escape
from rich.table import Table

from ...errors import ActuatorlabError
from .. import jobs
from ...evaluate import format_table
from ...evaluate import suite
from ._common import app, console, err_console, _json_command, _emit_json, _check_range, _print_per_joint, _robot_of_model


@app.command()
@_json_command
def evaluate(model_json: Path = typer.Argument(..., help="RUN/model.json"),
             data: List[Path] = typer.Argument(..., help="log files or folders to replay"),
             as_json: bool = typer.Option(False, "--json", help="print one JSON object"),
             dt: Optional[float] = typer.Option(None, "--dt", help="replay period [s] (default: the fitted one)"),
             report: Optional[Path] = typer.Option(None, "--report", help="also write an HTML report (overlays, "
                                                   "errors, regimes, envelope coverage) to this file"),
             standalone: bool = typer.Option(False, "--standalone", help="with --report: inline plotly.js (one "
                                             "self-contained file, ~4.8 MB more) instead of a shared sibling file"),
             robot: Optional[str] = typer.Option(None, "--robot", help="multi-joint logs of this robot; MODEL_JSON "
                                                  "is RUN/arm_model.json or the word 'nominal'")):
    """Replay logs with a fitted model (never refitting) and report errors by log and regime, and
    how much of each log lies outside the model's operating envelope (the region its training
    data covered)."""

    _check_range("--dt", dt)
    robot = _robot_of_model(model_json, robot)
    if robot is not None:
        if report is not None:
            raise ActuatorlabError("--report is not available with --robot (whole-robot models)")
        s = jobs.run_evaluate_arm(robot, model_json, data)
        if as_json:
            _emit_json(s, default=float)
        else:
            _print_per_joint(s)
        for w in s.get("warnings") or []:
            err_console.print(f"[yellow]warning:[/] {escape(w)}", soft_wrap=True)
        return

    if robot is None and report is None and standalone:
        raise ActuatorlabError("--standalone needs --report")
    s = jobs.run_evaluate(model_json, data, dt=dt, report=report, standalone=standalone)
    if as_json:
        _emit_json(s, default=float)
    else:
        console.print(format_table(s))
        _print_envelope(s)
    for w in (s.get("envelope_warnings") or []) + (s.get("regime_warnings") or []):
        err_console.print(f"[yellow]warning:[/] {w}", soft_wrap=True)
    if report is not None and not as_json:
        console.print(f"wrote {report}")


def _print_envelope(s: dict) -> None:
    """Per-log share of samples outside the model's operating envelope, by dimension."""
    if not s.get("envelope_available"):
        console.print(f"[yellow]envelope check unavailable:[/] {s.get('envelope_unavailable_reason', '')}")
        return
    t = Table(title="Samples outside the model's operating envelope (training coverage)")
    for c in ("log", "outside", "by dimension", "error from outside (share of error / of samples)"):
        t.add_column(c)
    for r in s["per_log"]:
        dims = r.get("envelope_outside_dimensions") or {}
        err = (r.get("envelope") or {}).get("error") or {}
        conc = [(k, v) for k, v in (err.get("by_dimension") or {}).items() if v["concentrated"]]
        t.add_row(str(r["log"]), f"{100 * r['envelope_outside_fraction']:.1f} %",
                  ", ".join(f"{k} {100 * v:.1f} %" for k, v in sorted(dims.items(), key=lambda kv: -kv[1])) or "-",
                  ", ".join(f"[yellow]{k}[/] {100 * v['error_share']:.0f} % / {100 * v['sample_share']:.1f} %"
                            for k, v in conc) or "no")
    t.add_section()
    t.add_row("all", f"{100 * s['envelope_outside_fraction']:.1f} %", "", "")
    console.print(t)


@app.command()
def infer(model_json: Path = typer.Argument(..., help="RUN/arm_model.json of a learned or residual whole-robot model"),
          data: List[Path] = typer.Argument(..., help="multi-joint log files or folders"),
          out: Path = typer.Option(..., "--out", "-o", help="CSV file to write"),
          robot: Optional[str] = typer.Option(None, "--robot", help="check the model was trained for this robot")):
    """Causal online inference, one telemetry frame at a time (never a future sample): the
    network's effort per channel, the end-effector force, the contact probability and the
    condition scores, written as CSV."""

    d = jobs.run_infer(model_json, data, out, robot=robot)
    console.print(f"{d['frames']} frames of {d['logs']} logs, {d['mean_step_ms']:.3f} ms per frame; wrote {d['out']}")


@app.command()
@_json_command
def replay(args: List[str] = typer.Argument(..., help="SUITE [MODEL]; with --create: SUITE MODEL LOGS..."),
           create: bool = typer.Option(False, "--create", help="create SUITE from MODEL's errors on LOGS"),
           margin: float = typer.Option(1.2, "--margin", help="with --create: tolerance = margin x measured error"),
           dt: Optional[float] = typer.Option(None, "--dt", help="replay period in s (default: the suite's; whole robot: the MuJoCo timestep)"),
           gain: Optional[List[str]] = typer.Option(None, "--gain", help="NAME=VALUE: simulate with this controller "
                                                    "gain instead of the logged one (repeatable)"),
           robot: Optional[str] = typer.Option(None, "--robot", help="with --create: whole-robot arm_model.json"),
           horizon: Optional[int] = typer.Option(None, "--horizon", help="with --robot: window in control steps (default 300)"),
           overwrite: bool = typer.Option(False, "--overwrite", help="with --create: replace an existing suite"),
           as_json: bool = typer.Option(False, "--json")):
    """Calibration replay as a regression suite: exit 1 when a stored log's error exceeds its
    tolerance (docs/replay.md)."""

    _check_range("--margin", margin)
    _check_range("--dt", dt)
    _check_range("--horizon", horizon)
    if create:
        if len(args) < 3:
            raise ActuatorlabError("replay --create needs SUITE MODEL LOGS...")
        m = suite.create_suite(args[0], args[1], args[2:], margin=margin, dt=dt, robot=robot, horizon=horizon,
                         overwrite=overwrite)
        console.print(f"wrote {Path(args[0]) / 'suite.json'}: {len(m['logs'])} logs, tolerance = {margin:g} x "
                      f"the errors of {args[1]} (replay {m['replay']})")
        return
    if len(args) > 2:
        raise ActuatorlabError("replay takes SUITE [MODEL] (to create a suite: replay --create SUITE MODEL LOGS...)")
    gains = {}
    for g in gain or []:
        k, sep, v = g.partition("=")
        try:
            gains[k] = float(v)
        except ValueError:
            sep = ""
        if not sep or not k:
            raise ActuatorlabError(f"--gain {g!r}: expected NAME=VALUE, e.g. kp=800")
    r = suite.run_suite(args[0], args[1] if len(args) > 1 else None, dt=dt, gains=gains or None)
    if as_json:
        _emit_json(r)
    else:
        for w in r["warnings"]:
            console.print(f"[yellow]warning:[/] {w}")
        t = Table(title=f"replay {r['suite']} with {r['model']}: {r['n_logs'] - r['n_failed']}/{r['n_logs']} logs pass")
        for c in ("log", "metric", "error", "tolerance", "at creation", "ratio", ""):
            t.add_column(c)
        for row in r["logs"]:
            shown = [c for c in row["checks"] if not c["passed"]] or [max(row["checks"], key=lambda c: c["ratio"] or 0)]
            for c in shown:
                f = (lambda x: "-" if x is None else f"{x:.4g}")
                t.add_row(row["name"], c["metric"], f(c["value"]), f(c["tolerance"]), f(c["measured_at_creation"]),
                          f(c["ratio"]), "[green]ok[/]" if c["passed"] else "[red]FAIL[/]")
        console.print(t)
    if not r["passed"]:
        raise SystemExit(1)  # a failed regression check: exit code 1 (bad input is 2)

