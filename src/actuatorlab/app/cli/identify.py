"""Commands that identify actuator models: fit, compare, fit-fleet, excite, models."""


from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer
from rich.table import Table

from ...errors import ActuatorlabError
from .. import jobs
from ...excite.robot import excite_robot, RobotLimits
from ...models.control import CONTROL_LAWS
from ...models.registry import BASE_MODELS, EXTENSIONS
from ..fleet import fit_fleet, units_from_folders
from ...identify.calibrate import describe
from ...identify.select import CALIBRATION, GROUP_KEYS, FamilyOptions
from ._common import app, console, _progress, _Bars, _json_command, _emit_json, _check_range, _mrad, _print_per_joint, _robot_of_model, _floats


@app.command()
def fit(data: Optional[List[Path]] = typer.Argument(None, help="log files or folders (default: bundled XL330 example)"),
        model: Optional[str] = typer.Option(None, "--model", "-m", help="fit one model (e.g. m4+delay); default: the nested family, selected by leave-one-group-out over condition tags"),
        out: Path = typer.Option(Path("run"), "--out", "-o", help="run folder for model.json and report.html"),
        seed: int = typer.Option(0, "--seed"),
        budget: str = typer.Option("default", "--budget", help="quick | default | thorough"),
        dt: Optional[float] = typer.Option(None, "--dt", help="control period [s] (default: median sample period)"),
        mapping: Optional[Path] = typer.Option(None, "--mapping", help="column mapping for CSV logs"),
        robot: Optional[str] = typer.Option(None, "--robot", help="multi-joint logs of this robot (e.g. open_manipulator_x)"),
        max_evals: int = typer.Option(300, "--max-evals", help="with --robot: CMA-ES evaluations per model"),
        per_joint: bool = typer.Option(False, "--per-joint", help="with --robot: one parameter set per joint"),
        method: str = typer.Option("cma", "--method", help="with --robot: cma (CMA-ES, native MuJoCo) | grad "
                                                           "(Adam through MJX, window curriculum)"),
        group_by: Optional[List[str]] = typer.Option(None, "--group-by", help="condition tag(s) that define the "
                                                     "held-out groups of the selection (default: excitation; "
                                                     "log: leave-one-log-out)"),
        extensions: Optional[List[str]] = typer.Option(None, "--extensions", help="extensions the selection tries "
                                                       "on the best base models (repeat the option; default: "
                                                       "offset, delay, climit, sag; e.g. add thermal)"),
        jackknife: Optional[str] = typer.Option(None, "--jackknife", help="after writing the result: log | group "
                                                "(refits leaving out one log / condition group; parameter spread)"),
        timestep_sensitivity: bool = typer.Option(False, "--timestep-sensitivity", help="after writing the result: "
                                                  "replay and refit at dt/2 and 2 dt"),
        workers: Optional[int] = typer.Option(None, "--workers", min=1, help="threads each CMA-ES population is "
                                              "scored on (default: the CPU cores; same result up "
                                              "to rounding)"),
        calibration: Optional[str] = typer.Option(None, "--calibration", help="what the family fit calibrates "
                                                  "first: free_swing (default: armature and encoder offset "
                                                  "from the torque-off runs, when the logs have any) | none")):
    """Fit actuator models to logs; write RUN/model.json, RUN/report.html, RUN/identifiability.json
    (with --robot: RUN/arm_model.json from multi-joint logs)."""

    _check_range("--dt", dt)
    _check_range("--max-evals", max_evals)
    if robot is not None:
        _fit_robot(robot, data, out, model, max_evals, seed, per_joint, method)
        return

    if model is not None and calibration not in (None, "none"):
        raise ActuatorlabError("--calibration applies to the family fit (without --model)")
    options = FamilyOptions(seed=seed, budget=budget, dt=dt, workers=workers,
                            extensions=tuple(extensions) if extensions else None,
                            group_by=tuple(group_by) if group_by else GROUP_KEYS,
                            calibration=calibration or CALIBRATION)
    with _progress() as p:
        bars = _Bars(p)
        d = jobs.run_fit(data, out, model=model, options=options, mapping=mapping, progress=bars,
                    jackknife=jackknife, timestep_sensitivity=timestep_sensitivity)
        bars.done()
    unit = d["_summary"]["unit"]
    if d.get("selection"):
        _print_selection(d["selection"], unit)
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
    s = d["_summary"]
    console.print(f"training replay: MAE {_mrad(s['position_mae'], unit)}, RMSE {_mrad(s['position_rmse'], unit)}, "
                  f"relative {100 * s['position_relative_error']:.2f}%")
    for w in s.get("regime_warnings") or []:
        console.print(f"[yellow]warning (training replay):[/] {w}", soft_wrap=True)
    ts = d.get("timestep_sensitivity") or {}
    parts = []
    for k, v in ts.items():
        mv = v.get("max_abs_relative_change")
        parts.append(f"{k}: MAE {_mrad(v['position_mae'], unit)}" + ("" if mv is None else f", params move <= {100 * mv:.0f}%"))
    if parts:
        console.print("timestep sensitivity: " + "; ".join(parts))
    console.print(f"wrote {out / 'model.json'}, {out / 'report.html'} (plotly.js beside it), "
                  f"{out / 'identifiability.json'}")


def _fit_robot(robot, data, out, model, max_evals, seed, per_joint, method) -> None:
    """``fit --robot``: the whole-robot fit and its tables."""
    if not data:
        raise ActuatorlabError("--robot needs DATA (multi-joint logs, e.g. from `actuatorlab synth`)")
    d = jobs.run_fit_arm(robot, data, out, model=model, max_evals=max_evals, seed=seed, per_joint=per_joint,
                    method=method,
                    progress=lambda m, i, n: console.print(f"[{i + 1}/{n + 1}] fitting {m}"))
    if d["selection"]:
        t = Table(title=f"Nested models on {robot}: fitted on part of the logs, judged on the rest "
                        f"({d['selection']['val_horizon']}-step rollouts)")
        for c in ("model", "free", "train MAE", "validation MAE", "gain vs parent", "earns place"):
            t.add_column(c)
        for r in d["selection"]["table"]:
            g = r["gain_vs_parent"]
            t.add_row(("* " if r["selected"] else "  ") + r["model"], str(r["n_free"]), _mrad(r["train_mae"], "rad"),
                      _mrad(r["validation_mae"], "rad"), "-" if g is None else f"{100 * g:+.1f} %",
                      "yes" if r["earns_place"] else "no")
        console.print(t)
    _print_per_joint(d["metrics"]["train"])
    console.print(f"{d['model']}: train MAE {d['fit']['train_mae']:.4g} rad (nominal parameters "
                  f"{d['fit']['train_mae_nominal']:.4g}); wrote {out / 'arm_model.json'}")


def _print_selection(sel: dict, unit: str) -> None:
    """The family selection's table: held-out MAE per condition group of every model."""
    if sel.get("note"):
        console.print(f"[yellow]{sel['note']}[/]")
    cal = sel.get("calibration")
    if cal:
        console.print(describe(cal))
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
def compare(data: List[Path] = typer.Argument(..., help="training logs"),
            holdout: List[Path] = typer.Option(..., "--holdout", help="held-out logs (repeat the option)"),
            models: Optional[str] = typer.Option(None, "--models", help="comma-separated (default: the nested ladder)"),
            seed: int = typer.Option(0, "--seed"), budget: str = typer.Option("default", "--budget"),
            as_json: bool = typer.Option(False, "--json")):
    """Fit nested models on DATA and compare them on held-out logs."""

    with _progress() as p:
        bars = _Bars(p)
        r = jobs.run_compare(data, holdout, models=models.split(",") if models else None, seed=seed, budget=budget,
                        progress=bars)
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
def excite(out: Path = typer.Option(..., "--out", "-o", help="folder for the command files and excitation.json"),
           model_file: Optional[Path] = typer.Option(None, "--model-file", help="fitted RUN/model.json (model, "
                                                     "parameters and bench); RUN/arm_model.json with --robot"),
           model: Optional[str] = typer.Option(None, "--model", help="model when no --model-file (default m1; "
                                                "with --robot the config's)"),
           param: Optional[List[str]] = typer.Option(None, "--param", help="NAME=VALUE (repeat), overrides"),
           joint: str = typer.Option("xl330", "--joint", help="actuator name when no --model-file"),
           kp: Optional[str] = typer.Option(None, "--kp", help="firmware gains to design over, e.g. 400,800"),
           mass: Optional[str] = typer.Option(None, "--mass", help="bench loads [kg], e.g. 0.2,0.49"),
           q_range: Optional[str] = typer.Option(None, "--range", help="joint range [rad] min,max (default -1.5,1.5)"),
           margin: float = typer.Option(0.1, "--margin", help="[rad] kept free at both ends"),
           v_max: float = typer.Option(3.0, "--v-max", help="[rad/s] target speed limit"),
           duty: float = typer.Option(0.8, "--duty", help="largest share of each segment in motion"),
           effort_max: Optional[float] = typer.Option(None, "--effort-max", help="[N.m] predicted effort limit"),
           budget_s: float = typer.Option(10.0, "--budget", help="[s] total duration of the design"),
           segment_s: Optional[float] = typer.Option(None, "--segment", help="[s] length of one segment (default 2; "
                                                     "3 with --robot)"),
           dt: float = typer.Option(0.01, "--dt", help="[s] command period (one joint; a robot uses its control_dt)"),
           write_all: bool = typer.Option(False, "--all", help="write every candidate, not only the design"),
           robot: Optional[str] = typer.Option(None, "--robot", help="design for a whole robot (bundled name or "
                                               "config file)"),
           joints: Optional[str] = typer.Option(None, "--joints", help="with --robot: joints to excite, e.g. "
                                                "shoulder_lift,elbow_flex (default all)"),
           joint_range: Optional[List[str]] = typer.Option(None, "--joint-range", help="with --robot: JOINT=MIN,MAX "
                                                           "[rad | m] replacing the MJCF range (repeat)"),
           effort_share: float = typer.Option(0.8, "--effort-share", help="with --robot: largest predicted effort "
                                              "as a share of each joint's effort limit"),
           lerobot: bool = typer.Option(False, "--lerobot", help="with --robot: also NAME.lerobot.csv (<joint>.pos "
                                        "in degrees)")):
    """Design an excitation: safe candidates ranked by Fisher information, a D-optimal set within
    the budget, written as replayable CSV command files + excitation.json. One joint on a bench, or
    (--robot) every joint of a robot with the per-joint parameters of its model."""
    _check_range("--budget", budget_s)
    _check_range("--segment", segment_s)
    _check_range("--dt", dt)
    _check_range("--v-max", v_max)
    _check_range("--margin", margin, low_ok=True)
    _check_range("--duty", duty, high=1.0)
    _check_range("--effort-max", effort_max)
    _check_range("--effort-share", effort_share)
    values = {}
    for p in param or []:
        k, sep, v = p.partition("=")
        try:
            values[k.strip()] = float(v)
        except ValueError:
            sep = ""
        if not sep:
            raise ActuatorlabError(f"--param must be NAME=VALUE, got {p!r}")
    if model_file is not None:
        robot = _robot_of_model(model_file, robot)
    if robot is not None:
        _excite_robot(out, robot, model_file, model, values, joints, joint_range, q_range, margin, v_max, duty,
                      effort_share, effort_max, budget_s, segment_s or 3.0, write_all, lerobot)
        return

    rng = _floats(q_range or "-1.5,1.5", "--range")
    if rng is None or len(rng) != 2:
        raise ActuatorlabError("--range must be two numbers: min,max [rad]")
    r = jobs.run_excite(out, model_file=model_file, model=model or "m1", params=values, actuator=joint,
                   kp=_floats(kp, "--kp"), mass=_floats(mass, "--mass"), q_range=(rng[0], rng[1]), margin=margin,
                   v_max=v_max, duty=duty, effort_max=effort_max, dt=dt, segment_s=segment_s or 2.0,
                   budget_s=budget_s, write_all=write_all)
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


def _excite_robot(out, robot, model_file, model, values, joints, joint_range, q_range, margin, v_max, duty,
                  effort_share, effort_max, budget_s, segment_s, write_all, lerobot) -> None:
    """``excite --robot``: :func:`actuatorlab.excite.robot.excite_robot` and its table."""

    if q_range is not None or effort_max is not None:
        raise ActuatorlabError("with --robot, give ranges per joint (--joint-range JOINT=MIN,MAX) and the effort "
                               "limit as --effort-share of each joint's configured limit")
    ranges = []
    for item in joint_range or []:
        name, sep, rest = item.partition("=")
        vals = _floats(rest, "--joint-range") if sep else None
        if vals is None or len(vals) != 2:
            raise ActuatorlabError(f"--joint-range must be JOINT=MIN,MAX, got {item!r}")
        ranges.append((name.strip(), vals[0], vals[1]))
    lim = RobotLimits(margin=margin, v_max=v_max, effort_share=effort_share, duty=duty, ranges=tuple(ranges))
    r = excite_robot(out, robot, model_file=model_file, model=model, params=values,
                     joints=[j.strip() for j in joints.split(",")] if joints else None, limits=lim,
                     segment_s=segment_s, budget_s=budget_s, write_all=write_all, lerobot=lerobot)
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
def fit_fleet_(units: List[Path] = typer.Argument(..., help="one folder (or log file) per unit"),
               out: Path = typer.Option(..., "--out", "-o", help="run folder: OUT/UNIT[/MODEL]/model.json"),
               model: Optional[List[str]] = typer.Option(None, "--model", "-m", help="model(s) to fit (several = "
                                                         "a sweep); default: nested selection"),
               backend: str = typer.Option("local", "--backend", help="local | ray"),
               budget: str = typer.Option("default", "--budget", help="quick | default | thorough"),
               seed: int = typer.Option(0, "--seed"),
               ray_address: Optional[str] = typer.Option(None, "--ray-address", help="running Ray cluster")):
    """Fit one model per unit (a fleet of servos), serially or on Ray; then `randomize OUT/*/model.json`."""

    rows = fit_fleet(units_from_folders(units), out, models=list(model or [None]), backend=backend, budget=budget,
                     seed=seed, ray_address=ray_address,
                     progress=lambda i, n, r: console.print(f"[{i}/{n}] {r['unit']}: {r['model']}"))
    t = Table(title=f"fleet of {len(units)} units ({backend})")
    for c in ("unit", "model", "train MAE", "model file"):
        t.add_column(c)
    for r in rows:
        t.add_row(r["unit"], r["model"], f"{r['position_mae']:.4g}", r["model_file"])
    console.print(t)

