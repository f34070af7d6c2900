"""Commands that replay and check models: evaluate, replay, infer."""


from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer
from rich.markup import escape
from rich.table import Table

from ...evaluate import format_table
from .. import evaluate_jobs
from ..evaluate_jobs import EvaluateJob, InferJob, ReplayJob
from ._common import Config, documents, job_of, app, console, err_console, _json_command, _emit_json, _print_per_joint

#: the commands this module registers on the CLI's typer app
__all__ = ["evaluate", "infer", "replay"]


@app.command()
@_json_command
@documents(EvaluateJob)
def evaluate(ctx: typer.Context, model_json: Optional[str] = typer.Argument(None, help="RUN/model.json"),
             data: Optional[List[Path]] = typer.Argument(None, help="log files or folders to replay"),
             as_json: bool = typer.Option(False, "--json", help="print one JSON object"),
             report: Optional[Path] = typer.Option(None, "--report", help="also write an HTML report (overlays, "
                                                   "errors, regimes, envelope coverage) to this file"),
             robot: Optional[str] = typer.Option(None, "--robot", help="multi-joint logs of this robot; MODEL_JSON "
                                                  "is RUN/arm_model.json or the word 'nominal'"),
             config: Config = None):
    """Replay logs with a fitted model (never refitting) and report errors by log and regime, and
    how much of each log lies outside the model's operating envelope (the region its training
    data covered)."""

    job = job_of(ctx, EvaluateJob, config, model="model_json", data="data", report="report", robot="robot")
    res = evaluate_jobs.run_evaluate_job(job)
    s = res.to_json()
    if res.robot is not None:
        if as_json:
            _emit_json(s, default=float)
        else:
            _print_per_joint(s)
            _print_joint_regimes(s)
        for w in (s.get("warnings") or []) + (s.get("envelope_warnings") or []) + (s.get("regime_warnings") or []):
            err_console.print(f"[yellow]warning:[/] {escape(w)}", soft_wrap=True)
        return
    if as_json:
        _emit_json(s, default=float)
    else:
        console.print(format_table(s))
        _print_envelope(s)
    for w in (s.get("envelope_warnings") or []) + (s.get("regime_warnings") or []):
        err_console.print(f"[yellow]warning:[/] {w}", soft_wrap=True)
    if job.report is not None and not as_json:
        console.print(f"wrote {job.report}")


def _print_joint_regimes(s: dict) -> None:
    """Per joint, the position MAE by regime (the one-joint regimes) at the longest horizon."""
    per = s.get("per_joint_regimes") or {}
    if not per:
        return
    regimes = list(next(iter(per.values())))
    t = Table(title=f"rollout MAE by regime at {s.get('regime_horizon')} steps {escape('[' + s.get('unit', 'rad') + ']')} "
                    "(share of samples)")
    t.add_column("joint")
    for k in regimes:
        t.add_column(k, justify="right")
    for j, reg in per.items():
        t.add_row(j, *["-" if reg[k]["position_mae"] is None else
                       f"{reg[k]['position_mae']:.3g} ({100 * reg[k]['fraction']:.0f} %)" for k in regimes])
    console.print(t)


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
@documents(InferJob)
def infer(ctx: typer.Context,
          model_json: Optional[Path] = typer.Argument(None, help="RUN/arm_model.json of a learned or residual whole-robot model"),
          data: Optional[List[Path]] = typer.Argument(None, help="multi-joint log files or folders"),
          out: Optional[Path] = typer.Option(None, "--out", "-o", help="CSV file to write"),
          config: Config = None):
    """Causal online inference, one telemetry frame at a time (never a future sample): the
    network's effort per channel, the end-effector force, the contact probability and the
    condition scores, written as CSV."""

    d = evaluate_jobs.run_infer_job(job_of(ctx, InferJob, config, model="model_json", data="data", out="out")).record
    console.print(f"{d['frames']} frames of {d['logs']} logs, {d['mean_step_ms']:.3f} ms per frame; wrote {d['out']}")


@app.command()
@_json_command
@documents(ReplayJob)
def replay(ctx: typer.Context,
           args: Optional[List[str]] = typer.Argument(None, help="SUITE [MODEL]; with --create: SUITE MODEL LOGS..."),
           create: bool = typer.Option(False, "--create", help="create SUITE from MODEL's errors on LOGS"),
           robot: Optional[str] = typer.Option(None, "--robot", help="with --create: whole-robot arm_model.json"),
           as_json: bool = typer.Option(False, "--json"), config: Config = None):
    """Calibration replay as a regression suite: exit 1 when a stored log's error exceeds its
    tolerance (docs/replay.md)."""

    given = dict(zip(("suite", "model"), args or ())) | ({"logs": args[2:]} if args and len(args) > 2 else {})
    job = job_of(ctx, ReplayJob, config, given, create="create", robot="robot")
    r = evaluate_jobs.run_replay_job(job).to_json()
    if job.create:
        console.print(f"wrote {Path(job.suite) / 'suite.json'}: {len(r['logs'])} logs, tolerance = {job.margin:g} x "
                      f"the errors of {job.model} (replay {r['replay']})")
        return
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