"""``actuatorlab`` command line: a thin layer over :mod:`actuatorlab.app.jobs`.

Every error the library raises for bad input (:class:`~actuatorlab.errors.ActuatorlabError`) is
printed as one line naming the file and the problem, with exit code 2 and no traceback.
"""

from __future__ import annotations

import contextlib
import functools
import json
import sys
from pathlib import Path
from typing import List, Optional

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from .. import __version__
from ..errors import ActuatorlabError, ModelError
from .jobs import run_audit, run_compare, run_evaluate, run_evaluate_arm, run_excite, run_fit, run_fit_arm, run_import, run_infer, split_arm_data
from ..evaluate import format_table
from . import jobs as pipeline
from ..files import read_json
from ..models.actuator_model import check_robot, load
from ..models.modelfile import load_model, model_from_bam, save_model
from ..excite.robot import excite_robot, RobotLimits
from ..logs import render_audit
from ..export.targets import export_targets
from ..synth import run_synth
from ..models.control import CONTROL_LAWS
from ..models.registry import BASE_MODELS, EXTENSIONS
from .estimate_jobs import ConditionOptions, run_condition_files, run_estimate_force, run_heads_report
from ..learned.arm import ArmTrainConfig, load_arm_model
from ..learned.heads import HeadsConfig, train_heads
from ..sim.randomization import load_spec, save_spec
from ..sim.randomization_proposal import propose_spec
from ..evaluate.suite import create_suite, run_suite
from .fleet import fit_fleet, units_from_folders
from ..estimate.condition_windows import METHODS
from ..policy.schedule import make_schedule
from ..policy.train import evaluate_policy, train_policy
from ..precision import physics_precision
from ..identify.calibrate import describe
from ..identify.select import CALIBRATION, GROUP_KEYS, FamilyOptions

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Identify, trust and use actuator models from real joint logs.")
console = Console()
err_console = Console(stderr=True)


def _progress():
    """Progress bars on stderr, only on a terminal: redirected to a file they would leave one frozen
    row per task (stages that report no fraction stay at 0 %)."""
    return Progress(TextColumn("[bold]{task.description:<28}"), BarColumn(), TextColumn("{task.percentage:>5.1f}%"),
                    TimeElapsedColumn(), console=err_console, transient=False, disable=not err_console.is_terminal)


class _Bars:
    """Adapter from the library's progress(name, stage, fraction) callback to rich bars."""

    def __init__(self, progress: Progress):
        self.p, self.tasks = progress, {}

    def __call__(self, name: str, stage: str, frac: float) -> None:
        if name not in self.tasks:
            # a new task starts when the ones before it are done (the library reports them in turn)
            for t in self.tasks.values():
                self.p.update(t, completed=1.0)
            self.tasks[name] = self.p.add_task(name, total=1.0)
        self.p.update(self.tasks[name], completed=max(0.0, min(1.0, frac)),
                      description=f"{name} {escape('[' + stage + ']')}")

    def done(self) -> None:
        """The run finished: every task is complete (a stage that reported only its start stays at 0 %)."""
        for t in self.tasks.values():
            self.p.update(t, completed=1.0)


def _plain_output() -> None:
    """When stdout is not a terminal (``actuatorlab fit > fit.log``), tables are written at their
    full width: rich would otherwise cut every cell to fit 80 columns."""
    if not console.is_terminal:
        console.width = 100_000


#: the real stdout of the --json command that runs (see :func:`_json_command`)
_JSON_STDOUT: list = []


def _json_command(fn):
    """Decorator of the commands with ``--json``: with it, stdout carries exactly one JSON document
    (:func:`_emit_json`); whatever else is written to stdout meanwhile (third-party messages such
    as MJX's "Failed to import warp" printed when it is first imported) goes to stderr."""
    @functools.wraps(fn)
    def run(*args, **kwargs):
        if not kwargs.get("as_json"):
            return fn(*args, **kwargs)
        _JSON_STDOUT.append(sys.stdout)
        try:
            with contextlib.redirect_stdout(sys.stderr):
                return fn(*args, **kwargs)
        finally:
            _JSON_STDOUT.pop()
    return run


def _emit_json(obj, **kw) -> None:
    """Write the one JSON document of a ``--json`` command to the real stdout."""
    out = _JSON_STDOUT[-1] if _JSON_STDOUT else sys.stdout
    out.write(json.dumps(obj, **kw) + "\n")
    out.flush()


def _check_range(option: str, value, *, low=0.0, low_ok: bool = False, high=None) -> None:
    """Refuse a numeric option outside its range before any work: one line naming the option.
    Default: ``value > 0`` (``low_ok``: ``>= low``; ``high``: ``<= high``); None passes."""
    if value is None:
        return
    bad = value < low if low_ok else value <= low
    if bad or (high is not None and value > high) or value != value:
        lo = f">= {low:g}" if low_ok else f"> {low:g}"
        raise ActuatorlabError(f"{option} must be {lo}" + ("" if high is None else f" and <= {high:g}")
                               + f", got {value:g}")


def _check_resume(out: Path, resume: bool) -> None:
    """``--resume`` continues a run: a folder without one (no config.json) is an error, not a fresh run."""
    if resume and not (Path(out) / "config.json").is_file():
        raise ActuatorlabError(f"{out}: nothing to resume (--resume needs a run folder with a config.json; "
                               "leave out --resume to start a new run)")


def _mrad(x, unit):
    if x is None:
        return "-"
    return f"{x * 1e3:.2f} m{unit}" if unit == "rad" else f"{x * 1e3:.4f} mm"


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
        d = run_fit(data, out, model=model, options=options, mapping=mapping, progress=bars,
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
    d = run_fit_arm(robot, data, out, model=model, max_evals=max_evals, seed=seed, per_joint=per_joint,
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


def _print_per_joint(s: dict) -> None:
    t = Table(title=f"rollout MAE per joint from measured states [{s.get('unit', 'rad')}]")
    t.add_column("joint")
    horizons = sorted({h for v in s["per_joint"].values() for h in v}, key=int)
    for h in horizons:
        t.add_column(f"{h} steps")
    for j, v in s["per_joint"].items():
        t.add_row(j, *[("-" if v.get(h) is None else f"{v[h]:.4g}") for h in horizons])
    console.print(t)


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
        s = run_evaluate_arm(robot, model_json, data)
        if as_json:
            _emit_json(s, default=float)
        else:
            _print_per_joint(s)
        for w in s.get("warnings") or []:
            err_console.print(f"[yellow]warning:[/] {escape(w)}", soft_wrap=True)
        return

    if robot is None and report is None and standalone:
        raise ActuatorlabError("--standalone needs --report")
    s = run_evaluate(model_json, data, dt=dt, report=report, standalone=standalone)
    if as_json:
        _emit_json(s, default=float)
    else:
        console.print(format_table(s))
        _print_envelope(s)
    for w in (s.get("envelope_warnings") or []) + (s.get("regime_warnings") or []):
        err_console.print(f"[yellow]warning:[/] {w}", soft_wrap=True)
    if report is not None and not as_json:
        console.print(f"wrote {report}")


def _robot_of_model(model_json: Path, robot: Optional[str]) -> Optional[str]:
    """The robot of a command's model file: a whole-robot model's (the file's when --robot is
    absent; an explicit --robot must agree with it), None for a one-joint model (after the same
    check: its robot is its bench, e.g. bench:revolute). The word "nominal" needs --robot."""
    if str(model_json) == "nominal":
        if robot is None:
            raise ActuatorlabError("nominal: the nominal parameters of a robot: give --robot ROBOT")
        return robot
    m = load(model_json)
    name = check_robot(m, robot)
    return None if m.one_joint else name


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
def train(data: List[Path] = typer.Argument(..., help="log files or folders to train on"),
          arch: str = typer.Option("transformer", "--arch", help="transformer | mlp | gru | lstm | actuator_net | actuator_lstm "
                                  "(one joint: the Isaac Lab / mjlab actuator-net inputs, docs/export.md)"),
          residual: Optional[Path] = typer.Option(None, "--residual", help="fitted analytic RUN/model.json (RUN/arm_model.json with --robot): learn "
                                                  "a correction of it instead of the whole actuator"),
          steps: Optional[int] = typer.Option(None, "--steps", help="optimizer steps (default: the default budget)"),
          out: Path = typer.Option(Path("run"), "--out", "-o", help="run folder"),
          seed: int = typer.Option(0, "--seed"),
          resume: bool = typer.Option(False, "--resume", help="continue RUN/checkpoint.ckpt exactly"),
          validation: str = typer.Option("time", "--validation", help="one joint: time (last 25 % of every log) | "
                                         "logs (whole logs held back)"),
          robot: Optional[str] = typer.Option(None, "--robot", help="multi-joint logs of this robot: whole-robot "
                                              "training through MJX (writes RUN/arm_model.json)")):
    """Train a learned actuator (or a residual over a fitted analytic one) through the simulator;
    write RUN/model.json (RUN/arm_model.json with --robot), loadable by `actuatorlab evaluate`."""

    _check_range("--steps", steps)
    _check_resume(out, resume)
    if residual is not None:
        robot = _robot_of_model(residual, robot)
    if robot is not None:
        d = pipeline.run_train_arm(robot, data, out, ArmTrainConfig(arch=arch, residual=residual, steps=steps, seed=seed),
                                   resume=resume)
        tr = d["training"]
        console.print(f"{d['kind']} {d['arch']} ({d['params_count']:,} parameters): best validation MAE "
                      f"{tr['best_val_mae']:.4g} rad at step {tr['best_step']} of {tr['steps']} "
                      f"({tr['wall_s']:.0f} s, compile {tr['compile_s']:.0f} s)")
        console.print(f"wrote {out / 'arm_model.json'}, {out / d['weights']}, {out / 'metrics.jsonl'}")
        return
    d = pipeline.run_train(data, out, pipeline.JointTrainOptions(arch=arch, residual=residual, steps=steps, seed=seed,
                                                                validation=validation), resume=resume)
    s, tr = d["_summary"], d["fit"]
    unit = s["unit"]
    console.print(f"{d['model']}: best validation MAE {_mrad(tr['validation_mae'], unit)} at step "
                  f"{tr['best_step']} of {tr['steps']} ({tr['wall_s']:.0f} s, "
                  f"{tr['s_per_1k_steps'] or float('nan'):.0f} s per 1,000 steps)")
    console.print(f"replay of the given logs: MAE {_mrad(s['position_mae'], unit)}, "
                  f"RMSE {_mrad(s['position_rmse'], unit)}")
    console.print(f"wrote {out / 'model.json'}, {out / d['weights']}, {out / 'metrics.jsonl'}")


@app.command()
def infer(model_json: Path = typer.Argument(..., help="RUN/arm_model.json of a learned or residual whole-robot model"),
          data: List[Path] = typer.Argument(..., help="multi-joint log files or folders"),
          out: Path = typer.Option(..., "--out", "-o", help="CSV file to write"),
          robot: Optional[str] = typer.Option(None, "--robot", help="check the model was trained for this robot")):
    """Causal online inference, one telemetry frame at a time (never a future sample): the
    network's effort per channel, the end-effector force, the contact probability and the
    condition scores, written as CSV."""

    d = run_infer(model_json, data, out, robot=robot)
    console.print(f"{d['frames']} frames of {d['logs']} logs, {d['mean_step_ms']:.3f} ms per frame; wrote {d['out']}")


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
        r = run_compare(data, holdout, models=models.split(",") if models else None, seed=seed, budget=budget,
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


@app.command("import")
def import_(data: List[Path] = typer.Argument(...), out: Path = typer.Option(..., "--out", "-o"),
            mapping: Optional[Path] = typer.Option(None, "--mapping", help="CSV column mapping, MCAP topic "
                                                    "mapping or LeRobot units mapping (docs/format.md)")):
    """Convert logs (BAM JSON, EMPS .mat, CSV + mapping, ROS 2 MCAP bags, LeRobot dataset folders) to
    the native Parquet + JSON format (one pair per log or LeRobot episode)."""

    for p in run_import(data, out, mapping=mapping):
        console.print(f"wrote {p}")


@app.command("import-bam")
def import_bam(params: Path = typer.Argument(..., help="BAM parameter file (bam.fit's output, e.g. params/xl330/m5.json of the BAM repository)"),
               out: Path = typer.Option(..., "--out", "-o", help="model.json to write")):
    """Convert a BAM (Better Actuator Models) parameter file to an actuatorlab model.json, so that
    `evaluate`, `export` and the simulators use the BAM-identified actuator (docs/models.md)."""

    d = model_from_bam(read_json(params, ModelError, "no such BAM parameter file"), source=str(params))
    save_model(d, out)
    console.print(f"wrote {out} ({d['model']}, from {params})")


def _floats(text: Optional[str], what: str) -> Optional[list]:
    if text is None:
        return None
    try:
        return [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise ActuatorlabError(f"{what} must be comma-separated numbers, got {text!r}") from None


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
    r = run_excite(out, model_file=model_file, model=model or "m1", params=values, actuator=joint,
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
@_json_command
def audit(data: List[Path] = typer.Argument(...), as_json: bool = typer.Option(False, "--json"),
          mapping: Optional[Path] = typer.Option(None, "--mapping")):
    """Audit logs: rate, jitter, gaps, timestamps, NaN, saturation, derived channels, causality."""

    reports = run_audit(data, mapping=mapping)
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


@app.command()
def version():
    """Print the package version."""
    console.print(__version__)


@app.command("estimate-force")
@_json_command
def estimate_force(model_json: str = typer.Argument(..., help="RUN/arm_model.json of a learned model, or - for none"),
                   data: List[Path] = typer.Argument(..., help="labelled multi-joint logs or folders to evaluate"),
                   robot: str = typer.Option(..., "--robot", help="robot name"),
                   calibrate: Optional[List[Path]] = typer.Option(None, "--calibrate", help="training logs or folder: "
                                                                  "the classical baselines are fitted on their free-motion logs"),
                   methods: Optional[str] = typer.Option(None, "--methods", help="comma-separated (default: all)"),
                   ee_body: Optional[str] = typer.Option(None, "--ee-body", help="end-effector body (default: the robot's)"),
                   as_json: bool = typer.Option(False, "--json"),
                   report: Optional[Path] = typer.Option(None, "--report", help="self-contained HTML report to write"),
                   out: Optional[Path] = typer.Option(None, "--out", "-o", help="CSV of the per-frame estimates")):
    """Sensorless end-effector force: the learned force head x gate and three classical baselines
    (inverse-dynamics residual, + friction/backlash, momentum observer), run causally per frame."""

    r = run_estimate_force(model_json, data, robot=robot, calibrate=calibrate or [],
                           methods=methods.split(",") if methods else None, ee_body=ee_body, report=report, out=out)
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


@app.command("train-heads")
def train_heads_cmd(data: List[Path] = typer.Argument(..., help="labelled multi-joint logs or a synth folder (train/ val/)"),
                    robot: str = typer.Option(..., "--robot", help="robot name"),
                    out: Path = typer.Option(Path("run_heads"), "--out", "-o", help="run folder"),
                    init: Optional[Path] = typer.Option(None, "--init", help="RUN/arm_model.json to start from (only "
                                                        "its force/gate/condition heads are trained)"),
                    arch: str = typer.Option("transformer", "--arch", help="transformer | mlp | gru | lstm (without --init)"),
                    sizes: Optional[str] = typer.Option(None, "--sizes", help='network sizes as JSON, e.g. \'{"d": 64}\''),
                    steps: Optional[int] = typer.Option(None, "--steps"), seed: int = typer.Option(0, "--seed"),
                    eval_every: Optional[int] = typer.Option(None, "--eval-every", help="validate (and checkpoint) "
                                                             "every N steps, the best kept (default 250; with few "
                                                             "logs the optimum comes early: bench/README.md)"),
                    augment_yaw: bool = typer.Option(False, "--augment-yaw", help="rotate every training sample "
                                                     "about the robot's vertical first joint by a random angle (the "
                                                     "force label with it): the dynamics do not depend on that angle"),
                    augment_mirror: bool = typer.Option(False, "--augment-mirror", help="reflect half of the training "
                                                        "samples in the arm's vertical mirror plane (yaw joint and the "
                                                        "force's normal component negated); refused for an arm that is "
                                                        "not mirror-symmetric"),
                    residual_input: Optional[str] = typer.Option(None, "--residual-input", help="id_linear | "
                                                                 "id_friction | momentum_observer: one more input per "
                                                                 "joint, this classical method's estimated external "
                                                                 "joint torque (calibrated on the free-motion training "
                                                                 "logs; from scratch only)"),
                    resume: bool = typer.Option(False, "--resume")):
    """Train the force, contact-gate and condition heads on measured frames (teacher forcing, no
    simulator: minutes on a CPU); writes RUN/arm_model.json for `estimate-force` / `infer`."""

    _check_range("--steps", steps)
    _check_range("--eval-every", eval_every)
    _check_resume(out, resume)

    try:
        sz = json.loads(sizes) if sizes else None
    except json.JSONDecodeError:
        raise ActuatorlabError(f"--sizes must be a JSON object, got {sizes!r}") from None
    tr, va = split_arm_data(data)
    m = load_arm_model(init, robot)[1] if init is not None else None
    cfg = HeadsConfig(arch=arch, sizes=sz, seed=seed, augment_yaw=augment_yaw, augment_mirror=augment_mirror,
                      residual_input=residual_input, **({"steps": steps} if steps is not None else {}),
                      **({"eval_every": eval_every} if eval_every else {}))
    d = train_heads(robot, tr, va, cfg, out=out, init=m, resume=resume)
    t = d["training"]
    console.print(f"{d['arch']} ({d['params_count']:,} parameters): validation force MAE {t['best_val_force_mae']:.3f} N "
                  f"at step {t['best_step']} of {t['steps']} ({t['wall_s']:.0f} s); torque head {t['torque_head']}")
    console.print(f"wrote {out / 'arm_model.json'}")


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
        m = create_suite(args[0], args[1], args[2:], margin=margin, dt=dt, robot=robot, horizon=horizon,
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
    r = run_suite(args[0], args[1] if len(args) > 1 else None, dt=dt, gains=gains or None)
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
@app.command()
@_json_command
def condition(model_json: Path = typer.Argument(..., help="RUN/arm_model.json of a learned or residual whole-robot model"),
              data: List[Path] = typer.Argument(..., help="multi-joint logs to evaluate (files or folders)"),
              robot: str = typer.Option(..., "--robot", help="robot name"),
              train: Optional[List[Path]] = typer.Option(None, "--train", help="training logs: fit the baselines "
                                                         "(threshold, SVM, random forest) on them"),
              as_json: bool = typer.Option(False, "--json", help="print one JSON object"),
              report: Optional[Path] = typer.Option(None, "--report", help="HTML report (ROC curves, tables, scores)"),
              frames: Optional[Path] = typer.Option(None, "--frames", help="CSV of the per-frame scores"),
              verdict_s: float = typer.Option(5.0, "--verdict-s", help="per-log verdict from the last N seconds"),
              fit_head: Optional[Path] = typer.Option(None, "--fit-head", help="first train the condition head on "
                                                      "--train (teacher forcing) and write the model to this folder"),
              calibrate: Optional[List[Path]] = typer.Option(None, "--calibrate", help="validation logs: choose the "
                                                             "score smoothing and thresholds on them"),
              no_calibration: bool = typer.Option(False, "--no-calibration", help="ignore the model file's "
                                                  "calibration (no smoothing, thresholds 0.5)"),
              min_recall: Optional[float] = typer.Option(None, "--min-recall", help="with --calibrate: window "
                                                         "threshold with the fewest false alarms among those "
                                                         "reaching this recall on the validation logs"),
              alarm_hold: float = typer.Option(0.0, "--alarm-hold", help="per-frame alarm's on-delay [s]: raised "
                                               "only after the smoothed score stays below the threshold this "
                                               "long (fewer false onsets, later first alarms; default 0)"),
              seed: int = typer.Option(0, "--seed")):
    """Motor-condition detection: per-frame condition scores (1 = normal) of the learned head,
    a per-log verdict, and window metrics against threshold / SVM / random-forest baselines."""

    _check_range("--verdict-s", verdict_s)
    _check_range("--min-recall", min_recall, low_ok=True, high=1.0)

    d = run_condition_files(model_json, data, robot, ConditionOptions(
        train=tuple(train or ()), verdict_s=verdict_s, seed=seed, report=report, frames_csv=frames, fit_head=fit_head,
        calibrate=tuple(calibrate or ()), use_calibration=not no_calibration, min_recall=min_recall,
        alarm_hold_s=alarm_hold))
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
def report_heads(model_json: Path = typer.Argument(..., help="RUN/arm_model.json of a learned whole-robot model"),
                 data: List[Path] = typer.Argument(..., help="labelled multi-joint logs or folders to evaluate"),
                 robot: str = typer.Option(..., "--robot", help="robot name"),
                 train: List[Path] = typer.Option(..., "--train", help="training logs: calibrate / fit the baselines"),
                 out: Path = typer.Option(Path("heads_report.html"), "--out", "-o", help="HTML report to write"),
                 verdict_s: float = typer.Option(5.0, "--verdict-s", help="condition verdict from the last N seconds"),
                 as_json: bool = typer.Option(False, "--json", help="print one JSON object {report, force, condition}"),
                 seed: int = typer.Option(0, "--seed")):
    """One self-contained HTML run report: force traces (estimate vs label, gate), the force
    baseline table, condition metrics and ROC curves (estimate-force and condition together)."""

    _check_range("--verdict-s", verdict_s)

    d = run_heads_report(model_json, data, robot=robot, train=train, out=out, verdict_s=verdict_s, seed=seed)
    if as_json:
        _emit_json(d, default=float)
        return
    f = lambda x: "-" if x is None else f"{x:.3f}"  # noqa: E731
    console.print("force MAE [N]: " + ", ".join(f"{m} {f(v)}" for m, v in d["force"]["force_mae"].items()))
    console.print("condition AUC: " + ", ".join(f"{m} {f(d['condition'][m]['auc'])}" for m in
                                                 ("learned", "current_threshold", "svm", "random_forest")
                                                 if m in d["condition"]))
    console.print(f"wrote {d['report']}")


def _key_values(items: Optional[List[str]], what: str) -> dict:
    """KEY=VALUE options; VALUE read as JSON when it parses (numbers, true, "text"), else text."""
    out = {}
    for it in items or []:
        k, sep, v = it.partition("=")
        if not sep or not k:
            raise ActuatorlabError(f"{what} {it!r}: expected KEY=VALUE")
        try:
            out[k] = json.loads(v)
        except json.JSONDecodeError:
            out[k] = v
    return out


@app.command("train-policy")
@_json_command
def train_policy_cmd(robot: str = typer.Option("anymal_c", "--robot", help="robot of the policy environment (toy: the toy tasks)"),
                     task: str = typer.Option("trot", "--task", help="task (anymal_c: trot; toy: point_mass | pendulum)"),
                     schedule: str = typer.Option("homotopy", "--schedule", help="homotopy | homotopy-adaptive | scratch | direct"),
                     steps: int = typer.Option(4_000_000, "--steps", help="environment steps (rounded up to whole chunks; 4 M: "
                                              "a trot policy that walks, 15-20 min on 2 cores)"),
                     envs: Optional[int] = typer.Option(None, "--envs", help="parallel environments (default per robot)"),
                     seed: int = typer.Option(0, "--seed"),
                     out: Path = typer.Option(Path("runs/policy"), "--out", "-o", help="run folder"),
                     resume: bool = typer.Option(False, "--resume", help="continue RUN/ckpt/latest.npz exactly"),
                     points: int = typer.Option(50, "--points", help="learning-curve points (chunks) in the run"),
                     env: Optional[List[str]] = typer.Option(None, "--env", help="environment option KEY=VALUE (JSON value), "
                                                             "e.g. --env physics_dt=0.004 --env actuator=\"sea\""),
                     ppo: Optional[List[str]] = typer.Option(None, "--ppo", help="PPO option KEY=VALUE (JSON value) over "
                                                             "the robot's defaults, e.g. --ppo lr_schedule=\"adaptive\""),
                     schedule_opt: Optional[List[str]] = typer.Option(None, "--schedule-opt", help="schedule option "
                                                                      "KEY=VALUE (JSON value), e.g. --schedule-opt pretrain=0.1 "
                                                                      "(docs/policy.md lists each schedule's)"),
                     as_json: bool = typer.Option(False, "--json", help="print the run summary as one JSON line")):
    """Train a policy with PPO under an alpha schedule of the model homotopy; write RUN/policy.npz,
    RUN/curve.json, RUN/stages.json, RUN/metrics.jsonl, RUN/report.html and checkpoints (docs/policy.md)."""

    _check_range("--steps", steps)
    _check_range("--envs", envs)
    _check_range("--points", points)
    _check_resume(out, resume)

    sched_opts = _key_values(schedule_opt, "--schedule-opt")
    make_schedule(schedule, **sched_opts)  # a bad name or option fails before the progress bar
    with _progress() as p:
        bar = p.add_task(f"{schedule}", total=1.0)

        def progress(frac, pt):
            r = "-" if pt["return"] is None else f"{pt['return']:.3g}"
            p.update(bar, completed=frac, description=f"{schedule} a={pt['alpha']:.2f} R={r}")

        d = train_policy(robot, task, schedule, steps=steps, envs=envs, seed=seed, out=out, resume=resume,
                         points=points, progress=progress, env_options=_key_values(env, "--env"),
                         ppo=_key_values(ppo, "--ppo") or None, schedule_options=sched_opts or None)
    if as_json:
        _emit_json(d)
        return
    fr = "-" if d["final_return"] is None else f"{d['final_return']:.4g}"
    console.print(f"{d['env_steps']:,} env steps, {d['stages']} stage(s), final alpha {d['final_alpha']:.2f}, "
                  f"final return {fr} ({d['steps_per_s_this_call']:,.0f} env steps/s)")
    console.print(f"wrote {out / 'policy.npz'}, {out / 'curve.json'}, {out / 'stages.json'}, {out / 'report.html'}")


@app.command("eval-policy")
@_json_command
def eval_policy_cmd(run: Path = typer.Argument(..., help="train-policy run folder"),
                    actuator: Optional[str] = typer.Option(None, "--actuator", "--model", help="actuators of the "
                                                           "evaluation env, e.g. builtin (MuJoCo's own; default: the run's)"),
                    alpha: float = typer.Option(1.0, "--alpha", help="homotopy parameter of the evaluation model"),
                    envs: Optional[int] = typer.Option(None, "--envs", help="evaluation environments (with a velocity "
                                                       "command: a multiple of the fixed command set)"),
                    steps: Optional[int] = typer.Option(None, "--steps", help="steps per environment"),
                    seed: int = typer.Option(0, "--seed"),
                    as_json: bool = typer.Option(False, "--json", help="print one JSON object")):
    """Evaluate a trained policy deterministically: return and tracking RMSEs (docs/policy.md)."""

    _check_range("--envs", envs)
    _check_range("--steps", steps)

    d = evaluate_policy(run, env_options=None if actuator is None else {"actuator": actuator}, alpha=alpha, n_envs=envs,
                        steps=steps, seed=seed)
    if as_json:
        _emit_json(d)
        return
    console.print(", ".join(f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}" for k, v in d.items()
                            if k not in ("commands", "per_command")))
    if d.get("per_command"):
        from rich.table import Table

        rmse = sorted({k for c in d["per_command"] for k in c if k.endswith("_rmse")})
        t = Table("command", "return", "steps", "fell", *rmse, title="per command")
        for c in d["per_command"]:
            t.add_row(", ".join(f"{x:+.2f}" for x in c["command"]), f"{c['return']:.3g}", f"{c['episode_length']:.0f}",
                      "yes" if c["fell"] > 0.5 else ("no" if c["fell"] == 0 else f"{c['fell']:.2f}"),
                      *[f"{c.get(k, float('nan')):.3f}" for k in rmse])
        console.print(t)


def main(argv: list[str] | None = None) -> int:
    """Entry point; bad input gives one line on stderr and exit code 2. Every command runs under
    :func:`~actuatorlab.precision.physics_precision` (float64 physics; learned networks stay float32)."""

    _plain_output()
    try:
        with physics_precision():
            # standalone_mode=False: click returns a command's typer.Exit(code) instead of raising it
            rc = app(args=argv, standalone_mode=False)
    except ActuatorlabError as e:
        # escaped: a message such as "pip install 'actuatorlab[export]'" is text, not rich markup
        err_console.print(f"[red]error:[/] {escape(str(e))}", highlight=False, soft_wrap=True)
        return 2
    except (FileNotFoundError, PermissionError, IsADirectoryError) as e:
        err_console.print(f"[red]error:[/] {escape(f'{e.filename}: {e.strerror}')}", highlight=False, soft_wrap=True)
        return 2
    except typer.Exit as e:
        return e.exit_code
    except SystemExit as e:
        return int(e.code or 0)
    except KeyboardInterrupt:
        err_console.print("interrupted")
        return 130
    except Exception as e:  # usage errors (typer bundles its own click; plain click as fallback)
        if hasattr(e, "show") and isinstance(getattr(e, "exit_code", None), int):
            e.show()
            return e.exit_code
        if type(e).__name__ == "Abort":
            return 1
        raise
    return rc if isinstance(rc, int) and not isinstance(rc, bool) else 0


if __name__ == "__main__":
    sys.exit(main())
