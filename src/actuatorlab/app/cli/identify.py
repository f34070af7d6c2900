"""Commands that identify actuator models: fit, compare, fit-fleet, excite, models."""


from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import numpy as np
import typer
from rich.markup import escape
from rich.table import Table

from ...models.control import CONTROL_LAWS
from ...models.params import PARAMS
from ...models.registry import BASE_MODELS, EXTENSIONS
from ...identify.calibrate import describe, describe_judgement
from ...identify.boxes import describe_widening
from .. import identify_jobs
from ..identify_jobs import CompareJob, ExciteJob, FitJob, FleetJob
from ._common import Config, documents, job_of, app, console, _progress, _Bars, _json_command, _emit_json, _mrad, _print_per_joint

#: the commands this module registers on the CLI's typer app
__all__ = ["fit", "compare", "excite", "models", "fit_fleet_"]


@app.command()
@documents(FitJob)
def fit(ctx: typer.Context,
        data: Optional[List[Path]] = typer.Argument(None, help="log files or folders (default: bundled XL330 example)"),
        model: Optional[str] = typer.Option(None, "--model", "-m", help="fit one model (e.g. m4+delay); default: the nested family, selected by leave-one-group-out over condition tags"),
        out: Path = typer.Option(Path("run"), "--out", "-o", help="run folder for model.json and report.html"),
        seed: int = typer.Option(0, "--seed"),
        budget: str = typer.Option("default", "--budget", help="quick | default | thorough"),
        robot: Optional[str] = typer.Option(None, "--robot", help="multi-joint logs of this robot (e.g. open_manipulator_x)"),
        config: Config = None):
    """Fit actuator models to logs; write RUN/model.json, RUN/report.html, RUN/identifiability.json
    (a whole robot, named by --robot or by its multi-joint logs: RUN/arm_model.json)."""

    job = job_of(ctx, FitJob, config, data="data", model="model", out="out", robot="robot",
                 **{"options.seed": "seed", "options.budget": "budget"})
    with _progress() as p:
        bars = _Bars(p)
        res = identify_jobs.run_fit_job(job, progress=bars)
        bars.done()
    if res.robot is not None:  # a whole robot (--robot, or the robot the logs name)
        _print_fit_robot(res)
        return
    d = res.record
    out = job.out
    unit = d["_summary"]["unit"]
    if d.get("selection"):
        _print_selection(d["selection"], unit)
    elif d["fit"].get("boxes_widened"):
        console.print(describe_widening(d["fit"]["boxes_widened"]), soft_wrap=True)
    unc = d.get("uncertainty")
    t = Table(title=f"{d['model']}: parameters (fitted on all given logs)")
    for c in ("parameter", "value", "unit", "stderr (Jacobian)", "stderr (resampled)", "bounds"):
        t.add_column(c)
    for name, e in d["parameters"].items():
        if e["free"]:
            se, sr = e.get("stderr"), e.get("stderr_resampled")
            t.add_row(name, f"{e['value']:.5g}", e["unit"], "-" if se is None else f"{se:.2g}",
                      "-" if sr is None else f"{sr:.2g}" + (" [yellow](poorly determined)[/]"
                                                            if e.get("poorly_determined") else ""),
                      f"[{e['lower']:.3g}, {e['upper']:.3g}]")
    console.print(t)
    if unc:
        console.print(f"[dim]resampled: {unc['method']}; flagged when the spread exceeds "
                      f"{100 * unc['flag_fraction']:.0f} % of the value[/]")
    flagged = (d.get("identifiability") or {}).get("flagged_pairs") or []
    for a, b, c in flagged:
        console.print(f"[yellow]poorly separable:[/] {a} and {b} (corr {c:+.3f})")
    sens = (d.get("identifiability") or {}).get("sensitivity") or {}
    _print_sensitivity(sens, [f"{n} ({100 * min(x for x in sens['change'][n] if x is not None):+.2f} %)"
                              for n in sens.get("not_determined") or []],
                       "the in-sample MAE", "a longer --budget")
    s = d["_summary"]
    console.print(f"training replay: MAE {_mrad(s['position_mae'], unit)}, RMSE {_mrad(s['position_rmse'], unit)}, "
                  f"relative {100 * s['position_relative_error']:.2f}%")
    for w in s.get("regime_warnings") or []:
        console.print(f"[yellow]warning (training replay):[/] {w}", soft_wrap=True)
    diag = d.get("diagnosis")
    if diag:  # one line: a warning when the fit stays far above the sensor floor or its error is structured
        console.print(f"[yellow]warning:[/] {escape(diag['message'])}" if diag["fired"]
                      else f"[dim]diagnosis: {escape(diag['message'])}[/]",
                      soft_wrap=True)
    ts = d.get("timestep_sensitivity") or {}
    parts = []
    for k, v in ts.items():
        mv = v.get("max_abs_relative_change")
        parts.append(f"{k}: MAE {_mrad(v['position_mae'], unit)}" + ("" if mv is None else f", params move <= {100 * mv:.0f}%"))
    if parts:
        console.print("timestep sensitivity: " + "; ".join(parts))
    console.print(f"wrote {out / 'model.json'}, {out / 'report.html'} (plotly.js beside it), "
                  f"{out / 'identifiability.json'}")



def _print_fit_robot(r) -> None:
    """``fit --robot``: the whole-robot fit's tables."""
    d, robot, out = r.record, r.robot, r.out
    if d["selection"]:
        t = Table(title=f"Nested models on {robot}: fitted on part of the logs, judged on the rest "
                        f"({d['selection']['val_horizon']}-step rollouts)")
        for c in ("model", "free", "train MAE", "validation MAE", "gain vs parent", "earns place"):
            t.add_column(c)
        for r in d["selection"]["table"]:
            g = r["gain_vs_parent"]
            t.add_row(("* " if r["selected"] else "  ") + r["model"], str(r["n_free"]), _mrad(r["train_mae"], "rad"),
                      _mrad(r["validation_mae"], "rad"), "-" if g is None else f"{100 * g:+.1f} %",
                      "measured" if r.get("measured") else "yes" if r["earns_place"] else "no")
        console.print(t)
        if d["selection"].get("rule") == "drive-measured":
            console.print(f"selected {d['model']} per joint: the drive-rate logs measure every value of it (nothing "
                          f"searched); the replay alone would select {d['selection']['replay_selected']} "
                          "(--config {\"selection\": \"replay\"}); docs/robots.md", soft_wrap=True)
    _print_per_joint(d["metrics"]["train"])
    drv = d.get("drive_identification")
    if drv:  # the drive-rate logs' regression: what the model kept (medians over the joints)
        per = drv["per_joint"].values()
        med = ", ".join(f"{k} {np.median([v[k] for v in per if v.get(k) is not None]):.3g}"
                        for k in drv["taken"]) or "none of its parameters"
        console.print(f"drive-side identification ({len(drv['logs'])} drive-rate logs, {len(drv['per_joint'])} joints): "
                      f"{d['model']} keeps {med} (median over the joints)", soft_wrap=True)
    unc = d.get("uncertainty")
    if unc:  # one line: the median over joints (or sets) of each parameter's natural-space standard error
        med = ", ".join(f"{n} {np.median(list(v.values())):.3g}{'' if unc['space'][n] == 'log' else ' ' + PARAMS[n].unit}"
                        for n, v in unc["stderr_natural"].items())
        console.print(f"jackknife: {unc['method']}, {unc['cpu_s']:.0f} s CPU; median stderr (log space for "
                      f"positive parameters): {med}", soft_wrap=True)
    sens = (d.get("identifiability") or {}).get("sensitivity") or {}
    _print_sensitivity(sens, sens.get("not_determined") or [], "the RMS error of its joints",
                       "a larger max_evals in fit --config")
    console.print(f"{d['model']}: train MAE {d['fit']['train_mae']:.4g} rad (nominal parameters "
                  f"{d['fit']['train_mae_nominal']:.4g}); wrote {out / 'arm_model.json'}")


def _print_sensitivity(sens: dict, low: list[str], error: str, longer: str) -> None:
    """The fit's sensitivity pass (identifiability.sensitivity), two lines at most: the values these logs do
    not determine (``low``, as shown) and those along which the search stopped short."""
    if low:
        console.print(f"[yellow]not determined by these logs:[/] {', '.join(low)}: each, moved alone by "
                      f"-+{100 * sens['step']:g} % of its value, changes {error} by less than "
                      f"{100 * sens['min_change']:g} % on a side", soft_wrap=True)
    if sens.get("improvable"):
        console.print(f"[yellow]the search stopped short along:[/] {', '.join(sens['improvable'])}: moved alone by "
                      f"-+{100 * sens['step']:g} %, each lowers {error} by more than {100 * sens['min_change']:g} % "
                      f"({longer} may find a better fit)", soft_wrap=True)


def _print_selection(sel: dict, unit: str) -> None:
    """The family selection's table: held-out MAE per condition group of every model."""
    if sel.get("note"):
        console.print(f"[yellow]{sel['note']}[/]")
    cal = sel.get("calibration")
    if sel.get("calibration_judged"):
        console.print(describe_judgement(sel["calibration_judged"]))
    if cal:
        console.print(describe(cal))
    if sel.get("boxes_widened"):
        console.print(describe_widening(sel["boxes_widened"]), soft_wrap=True)
    groups = sel.get("groups") or []
    t = Table(title="Nested models: fitted without each condition group, judged on it (held-out MAE)")
    keys = {g["group"].split("=", 1)[0] for g in groups}
    t.caption = f"held-out groups: {', '.join(sorted(keys))}" if groups else None
    for c in ["model", "free", "train MAE"] + [g["group"].split("=", 1)[-1] for g in groups] + [
            "mean", "gain vs ref", "W/L", "earns place"]:
        t.add_column(c)
    for r in sel["table"]:
        g = r["gain_vs_parent"]
        t.add_row(("* " if r["selected"] else "  ") + r["model"], str(r["n_free"]), _mrad(r["train_mae"], unit),
                  *[_mrad(x[r["model"]], unit) for x in groups], _mrad(r["validation_mae"], unit),
                  "-" if g is None else f"{100 * g:+.1f}% vs {r['parent']}",
                  "-" if r.get("wins") is None else f"{r['wins']}/{r['losses']}",
                  "yes" if r["earns_place"] else "no")
    console.print(t)
    console.print(f"[dim]rule: {sel['rule']}[/]")


@app.command()
@_json_command
@documents(CompareJob)
def compare(ctx: typer.Context, data: Optional[List[Path]] = typer.Argument(None, help="training logs"),
            holdout: Optional[List[Path]] = typer.Option(None, "--holdout", help="held-out logs (repeat the option)"),
            models: Optional[str] = typer.Option(None, "--models", help="comma-separated (default: the nested ladder)"),
            seed: int = typer.Option(0, "--seed"), budget: str = typer.Option("default", "--budget"),
            as_json: bool = typer.Option(False, "--json"), config: Config = None):
    """Fit nested models on DATA and compare them on held-out logs."""

    job = job_of(ctx, CompareJob, config, {"models": models.split(",")} if models else None, data="data",
                 holdout="holdout", seed="seed", budget="budget")
    with _progress() as p:
        bars = _Bars(p)
        r = identify_jobs.run_compare_job(job, progress=bars).to_json()
        bars.done()
    if as_json:
        _emit_json(r, default=float)
        return
    unit = r["unit"]
    t = Table(title=f"Held-out comparison ({len(r['heldout_logs'])} logs never fitted on)")
    for c in ("model", "parent", "free", "train MAE", "held-out MAE", "vs parent", "fit s"):
        t.add_column(c)
    for row in r["rows"]:
        g = row.get("heldout_gain_vs_parent")
        mark = "" if g is None else ("[green]improves[/]" if g > 0 else "[red]does not[/]")
        t.add_row(("* " if row["model"] == r["best"] else "  ") + row["model"], row["parent"] or "-",
                  str(row["n_free"]), _mrad(row["train_mae"], unit), _mrad(row["heldout_mae"], unit),
                  "-" if g is None else f"{100 * g:+.1f}% {mark}", f"{row['fit_wall_s']:.1f}")
    console.print(t)


@app.command()
@documents(ExciteJob)
def excite(ctx: typer.Context,
           out: Optional[Path] = typer.Option(None, "--out", "-o", help="folder for the command files and excitation.json"),
           model_file: Optional[Path] = typer.Option(None, "--model-file", help="fitted RUN/model.json (model, "
                                                     "parameters and bench); RUN/arm_model.json with --robot"),
           budget_s: float = typer.Option(10.0, "--budget", help="[s] total duration of the design"),
           robot: Optional[str] = typer.Option(None, "--robot", help="design for a whole robot (bundled name or "
                                               "config file)"),
           config: Config = None):
    """Design an excitation: safe candidates ranked by Fisher information, a D-optimal set within
    the budget, written as replayable CSV command files + excitation.json. One joint on a bench, or
    (--robot) every joint of a robot with the per-joint parameters of its model."""
    job = job_of(ctx, ExciteJob, config, out="out", model_file="model_file", budget_s="budget_s", robot="robot")
    res = identify_jobs.run_excite_job(job)
    r, out = res.record, job.out
    if res.robot is not None:
        _print_excite_robot(r, out)
        return
    t = Table(title=f"Candidates ranked by information for {r['model']} ({', '.join(r['parameters'])}): "
                    "log det F and Cramer-Rao relative stderr")
    for c in ("rank", "candidate", "log det F", *r["parameters"], "peak effort"):
        t.add_column(c)
    for c in r["candidates"][:12]:
        t.add_row(str(c["rank"]), c["name"], f"{c['logdet']:.1f}",
                  *[f"{100 * c['crlb_relative_stderr'][n]:.2g}%" for n in r["parameters"]], f"{c['peak_effort']:.3g}")
    console.print(t)
    d = r["design"]
    console.print(f"design ({d['duration_s']:.0f} s): {', '.join(r['selected'])}; log det F {d['logdet']:.1f}; CRLB "
                  + ", ".join(f"{n} {100 * v:.2g}%" for n, v in d["crlb_relative_stderr"].items()))
    for x in r["rejected"]:
        console.print(f"[yellow]over the effort limit:[/] {x['name']} ({x['peak_effort']:.3g} > {x['limit']:g} N.m)")
    console.print(f"wrote {out / 'excitation.json'} and the command files")



def _print_excite_robot(r: dict, out: Path) -> None:
    """``excite --robot``: the design's table."""
    t = Table(title=f"{r['robot']}: candidates ranked by information for {r['model']} per joint "
                    f"({len(r['parameters'])} parameters): log det F, largest Cramer-Rao relative stderr")
    for c in ("rank", "candidate", "family", "log det F", "worst CRLB", "peak effort / limit"):
        t.add_column(c)
    for c in r["candidates"][:15]:
        worst = max(c["crlb_relative_stderr"].items(), key=lambda kv: kv[1])
        t.add_row(str(c["rank"]), c["name"], c["tags"].get("family", ""), f"{c['logdet']:.1f}",
                  f"{worst[0]} {100 * worst[1]:.2g}%", f"{max(c['peak_effort'].values()):.3g}")
    console.print(t)
    d = r["design"]
    console.print(f"design ({d['duration_s']:.0f} s): {', '.join(r['selected'])}; log det F {d['logdet']:.1f}; "
                  "CRLB " + ", ".join(f"{n} {100 * v:.2g}%" for n, v in d["crlb_relative_stderr"].items()))
    for x in r["rejected"]:
        console.print(f"[yellow]dropped:[/] {x['name']} (over the effort limit: {', '.join(x['over_effort']) or '-'}; "
                      f"out of range: {', '.join(x['out_of_range']) or '-'})")
    if r["skipped_parameters"]:
        console.print(f"not designed for (zero value, no log scale): {', '.join(r['skipped_parameters'])}")
    for c in r.get("truth_check") or []:   # a floating-base robot: the design run on the virtual hardware's truth
        if c["broken"]:
            amp = "none found" if c["safe_amplitude"] is None else f"{c['safe_amplitude']:g} of the amplitude"
            console.print(f"[red]unsafe on the truth:[/] {c['segment']} ({'; '.join(c['broken'])}); safe at {amp}")
    if "truth_safe" in r:
        console.print(f"{r['protocol']}; on the truth: {'every segment safe' if r['truth_safe'] else 'see above'}")
    console.print(f"wrote {out / 'excitation.json'} and the command files ({r['wall_s']:.0f} s)")


@app.command()
def models():
    """List the registered models, extensions and control laws."""

    t = Table(title="Nested models (combine extensions with '+', e.g. m4+delay)")
    t.add_column("name")
    t.add_column("free parameters")
    t.add_column("what")
    for name, (free, desc) in BASE_MODELS.items():
        t.add_row(name, ", ".join(free), desc)
    for name, (free, _, desc) in EXTENSIONS.items():
        t.add_row("+" + name, ", ".join(free), desc)
    console.print(t)
    for name, law in CONTROL_LAWS.items():
        console.print(f"control law [bold]{name}[/] ({law.drive} drive): {law.description}")


@app.command("fit-fleet")
@documents(FleetJob)
def fit_fleet_(ctx: typer.Context, units: Optional[List[Path]] = typer.Argument(None, help="one folder (or log file) per unit"),
               out: Optional[Path] = typer.Option(None, "--out", "-o", help="run folder: OUT/UNIT/model.json (OUT/UNIT/MODEL/model.json in a sweep)"),
               model: Optional[List[str]] = typer.Option(None, "--model", "-m", help="model(s) to fit (several = "
                                                         "a sweep); default: nested selection"),
               budget: str = typer.Option("default", "--budget", help="quick | default | thorough"),
               config: Config = None):
    """Fit one model per unit (a fleet of servos), serially or on Ray; then `randomize OUT/*/model.json`."""

    job = job_of(ctx, FleetJob, config, units="units", out="out", models="model", budget="budget")
    rows = identify_jobs.run_fleet_job(job, progress=lambda i, n, r: console.print(f"[{i}/{n}] {r['unit']}: {r['model']}")).record
    t = Table(title=f"fleet of {len(job.units)} units ({job.backend})")
    for c in ("unit", "model", "train MAE", "model file"):
        t.add_column(c)
    for r in rows:
        t.add_row(r["unit"], r["model"], f"{r['position_mae']:.4g}", r["model_file"])
    console.print(t)