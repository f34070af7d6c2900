"""Commands of the estimators on top of a learned model: estimate-force, condition, report-heads."""


from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer
from rich.table import Table

from .. import heads_jobs
from ..heads_jobs import ConditionJob, EstimateForceJob, HeadsReportJob
from ...estimate.condition_windows import METHODS
from ._common import Config, documents, job_of, app, console, _json_command, _emit_json

#: the commands this module registers on the CLI's typer app
__all__ = ["estimate_force", "condition", "report_heads"]


@app.command("estimate-force")
@_json_command
@documents(EstimateForceJob)
def estimate_force(ctx: typer.Context,
                   model_json: Optional[str] = typer.Argument(None, help="RUN/arm_model.json of a learned model, or - for none"),
                   data: Optional[List[Path]] = typer.Argument(None, help="labelled multi-joint logs or folders to evaluate"),
                   robot: Optional[str] = typer.Option(None, "--robot", help="robot name"),
                   calibrate: Optional[List[Path]] = typer.Option(None, "--calibrate", help="training logs or folder: "
                                                                  "the classical baselines are fitted on their free-motion logs"),
                   as_json: bool = typer.Option(False, "--json"),
                   report: Optional[Path] = typer.Option(None, "--report", help="self-contained HTML report to write"),
                   out: Optional[Path] = typer.Option(None, "--out", "-o", help="CSV of the per-frame estimates"),
                   config: Config = None):
    """Sensorless end-effector force: the learned force head x gate and three classical baselines
    (inverse-dynamics residual, + friction/backlash, momentum observer), run causally per frame."""

    job = job_of(ctx, EstimateForceJob, config, model="model_json", data="data", robot="robot", calibrate="calibrate",
                 report="report", out="out")
    r = heads_jobs.run_estimate_force_job(job).to_json()
    if as_json:
        _emit_json(r, default=float)
        return
    t = Table(title=f"End-effector force, {r['n_logs']} logs ({r['n_frames']} frames)")
    for c in ("method", "force MAE [N]", "contact accuracy", "false-positive contact", "contact rule"):
        t.add_column(c)
    pct = lambda x: "-" if x is None else f"{100 * x:.1f} %"  # noqa: E731
    for m in r["methods"]:
        t.add_row(m, "-" if r["force_mae"][m] is None else f"{r['force_mae'][m]:.3f}", pct(r["gate_accuracy"][m]), pct(r["false_positive_contact_rate"][m]),
                  r["contact_rule"][m])
    z = (r.get("zero_estimate") or {}).get("force_mae")
    if z is not None:
        t.add_row("zero force (reference)", f"{z:.3f}", "-", "-", "never")
    console.print(t)
    for w in r.get("gain_warnings", []):
        console.print(f"[yellow]calibration:[/] {w}")
    for key in ("report", "out"):
        if r.get(key):
            console.print(f"wrote {r[key]}")


@app.command()
@_json_command
@documents(ConditionJob)
def condition(ctx: typer.Context,
              model_json: Optional[Path] = typer.Argument(None, help="RUN/arm_model.json of a learned or residual whole-robot model"),
              data: Optional[List[Path]] = typer.Argument(None, help="multi-joint logs to evaluate (files or folders)"),
              robot: Optional[str] = typer.Option(None, "--robot", help="robot name"),
              train: Optional[List[Path]] = typer.Option(None, "--train", help="training logs: fit the baselines "
                                                         "(threshold, SVM, random forest) on them, and train the "
                                                         "benchmark's detector (checked and calibrated on the val "
                                                         "folder beside them) when the model has none"),
              as_json: bool = typer.Option(False, "--json", help="print one JSON object"),
              report: Optional[Path] = typer.Option(None, "--report", help="HTML report (ROC curves, tables, scores)"),
              config: Config = None):
    """Motor-condition detection: per-frame condition scores (1 = normal) of the learned head,
    a per-log verdict, and window metrics against threshold / SVM / random-forest baselines."""

    job = job_of(ctx, ConditionJob, config, model="model_json", data="data", robot="robot",
                 **{"options.train": "train", "options.report": "report"})
    report = job.options.report
    d = heads_jobs.run_condition_job(job).to_json()
    if as_json:
        _emit_json(d, default=float)
        return
    t = Table(title=f"condition detection, {d['n_logs']} logs (64-step windows, restricted = positive)")
    pos = [c for c in d["channels"] if any(d[m]["by_channel"][c]["auc"] is not None for m in METHODS if m in d)]
    for c in ("method", "accuracy", "precision", "recall", "AUC", *[f"AUC {c}" for c in pos]):
        t.add_column(c)
    f = lambda x: "-" if x is None else f"{x:.3f}"  # noqa: E731
    for m in METHODS:
        if m in d:
            r = d[m]
            t.add_row(m, f(r["accuracy"]), f(r["precision"]), f(r["recall"]), f(r["auc"]),
                      *[f(r["by_channel"][c]["auc"]) for c in pos])
    console.print(t)
    meths = [m for m in METHODS if m in d and d[m].get("by_excitation")]
    if meths:
        tf = Table(title=f"by excitation family ({', '.join(d.get('restricted_channels', []))}): recall / AUC")
        for c in ("family", "windows (restricted)", *meths):
            tf.add_column(c)
        for fam in sorted(d[meths[0]]["by_excitation"]):
            b0 = d[meths[0]]["by_excitation"][fam]
            tf.add_row(fam, f"{b0['n_windows']} ({b0['n_restricted']})",
                       *[f"{f(d[m]['by_excitation'][fam]['recall'])} / {f(d[m]['by_excitation'][fam]['auc'])}"
                         for m in meths])
        console.print(tf)
    cv = (d.get("calibration") or {}).get("val") or {}
    if cv.get("window_recall_loo") is not None:  # a calibration chosen on validation logs: its own check
        console.print(f"calibration: window recall {cv['window_recall']:.3f} on its {cv['n_logs']} logs, "
                      f"{cv['window_recall_loo']:.3f} on a log left out (leave-one-log-out, "
                      f"precision {f(cv['window_precision_loo'])}); motion absent from the calibration logs can do worse")
    al = (d.get("learned") or {}).get("alarms")
    if al:  # what ConditionMonitor's per-frame alarm does on these logs
        ra, na = al["restricted"], al["normal"]
        hold = f", raised after {al['hold_s']:.2f} s below the threshold" if al.get("hold_s") else ""
        console.print(f"per-frame alarm (after a {al['warmup_s']:.2f} s warm-up{hold}): {ra['detected']} of {ra['n']} restricted "
                      f"channels alarmed (first {f(ra['first_alarm_s']['median'])} s median, "
                      f"{f(ra['first_alarm_s']['max'])} s max); {na['with_alarm']} of {na['n']} normal channels ever "
                      f"alarmed, {f(na['alarm_time_fraction'])} of their time, "
                      f"{f(na['false_alarms_per_hour'])} onsets per hour")
    for lg in d["logs"]:
        bad = [c for c, v in lg["verdict"].items() if v == "restricted"]
        console.print(f"{lg['log']}: " + (f"[red]restricted: {', '.join(bad)}[/]" if bad else "normal"))
    if report is not None:
        console.print(f"wrote {report}")


@app.command("report-heads")
@_json_command
@documents(HeadsReportJob)
def report_heads(ctx: typer.Context,
                 model_json: Optional[Path] = typer.Argument(None, help="RUN/arm_model.json of a learned whole-robot model"),
                 data: Optional[List[Path]] = typer.Argument(None, help="labelled multi-joint logs or folders to evaluate"),
                 robot: Optional[str] = typer.Option(None, "--robot", help="robot name"),
                 train: Optional[List[Path]] = typer.Option(None, "--train", help="training logs: calibrate / fit the baselines"),
                 out: Path = typer.Option(Path("heads_report.html"), "--out", "-o", help="HTML report to write"),
                 as_json: bool = typer.Option(False, "--json", help="print one JSON object {report, force, condition}"),
                 config: Config = None):
    """One self-contained HTML run report: force traces (estimate vs label, gate), the force
    baseline table, condition metrics and ROC curves (estimate-force and condition together)."""

    job = job_of(ctx, HeadsReportJob, config, model="model_json", data="data", robot="robot", train="train", out="out")
    d = heads_jobs.run_heads_report_job(job).to_json()
    if as_json:
        _emit_json(d, default=float)
        return
    f = lambda x: "-" if x is None else f"{x:.3f}"  # noqa: E731
    console.print("force MAE [N]: " + ", ".join(f"{m} {f(v)}" for m, v in d["force"]["force_mae"].items()))
    console.print("condition AUC: " + ", ".join(f"{m} {f(d['condition'][m]['auc'])}" for m in
                                                 ("learned", "current_threshold", "svm", "random_forest")
                                                 if m in d["condition"]))
    console.print(f"wrote {d['report']}")