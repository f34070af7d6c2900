"""The work behind the CLI, as library functions: fit, evaluate, compare, import, audit
(train and infer: :mod:`.train_work`, re-exported here).

Each takes paths and options, returns plain data (dicts, lists) and writes outputs atomically; the
CLI (:mod:`actuatorlab.app.cli`) only parses arguments, draws progress and prints tables.
"""

from __future__ import annotations

import html
import json
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any, Callable

import jax.numpy as jnp
import numpy as np

from ..precision import in_this_precision, on_fixed_blas_threads, physics
from ..errors import DataError
from ..logs import Trajectory, load_logs, save_trajectory, audit_log
from ..models.actuator_model import FORMAT, FORMAT_VERSION, LEARNED_KINDS, check_robot, from_document, load, save
from ..identify.boxes import refit_widened
from ..identify.fit import fit_model, substeps_for
from ..identify.identifiability import identifiability, sensitivity
from ..sim.rollout import default_dt, make_batches, rollout_batch
from ..evaluate import summarize
from ..evaluate.replay import replay, replay_batches, robot_regimes, timestep_sensitivity as ts
from ..evaluate.envelope import check_trajectories, compute_envelope, robot_envelope
from ..evaluate.envelope_summary import robot_outside, summarize_envelope
from ..evaluate.diagnose import DiagnoseConfig, diagnose
from ..identify.folds import GROUP_KEYS, JACKKNIFE_SEARCH, resampled_uncertainty, split_validation
from ..identify.select import BUDGETS, CALIBRATIONS, FamilyOptions, fit_family, ladder_for
from ..models.registry import contains, EXTENSIONS, get_model
from ..report.fit import write_report
from ..models.modelfile import load_model, model_to_dict, save_model
from ..identify.arm_fit import evaluate_logs, fit_arm, select_arm
from ..identify.arm_jackknife import arm_jackknife
from ..identify.arm_space import log_groups
from ..identify.drive import CUTOFF_HZ, MEASURED_MEMBER, drive_logs, identify_drives, measured_values, set_values
from ..robots.loader import Robot, load_robot
from ..sim.arm_data import _param_sets, robot_with_model
from ..files import atomic_write, git_revision
from ..errors import ActuatorlabError, ModelError, UnknownNameError
from ..learned.arm import evaluate_learned_arm, load_arm_model
from ..identify.arm_grad import fit_arm_grad
from ..identify.images import ImageOptions, load_image_supervision
from .. import __version__
from .data_files import _setup_summary, example_data_dir, load_data
from .fit_report import param_rows, write_fit_report
from .train_work import GATE_MODES, JointTrainOptions, TRAIN_BUDGET, TrainImages, run_infer, run_train, run_train_arm, split_arm_data

__all__ = ["example_data_dir", "load_data", "run_fit", "run_evaluate", "run_compare", "run_import", "run_audit",
           "identifiability_for", "run_train", "TRAIN_BUDGET", "JointTrainOptions", "GATE_MODES", "TrainImages",
           "run_infer", "run_train_arm", "split_arm_data", "RobotFitOptions", "run_evaluate_arm"]

Progress = Callable[[str, str, float], None]


@physics
def identifiability_for(fit, batches) -> dict | None:
    """Standard errors and correlations of the free parameters at the optimum (rollout residuals), and
    ``sensitivity``: what these logs determine at all (:func:`~actuatorlab.identify.identifiability.sensitivity`)."""
    space = fit.space
    if space.n == 0:
        return None
    items = [(b.step_config(fit.spec.compliant, substeps_for(fit.spec), fit.spec.thermal), b.arrays(), np.asarray(b.mask))
             for b in batches]

    def residuals(theta):
        # concrete values only: the summary then takes central differences through the already
        # compiled rollout (2p replays, well under a second) instead of compiling a forward-mode
        # Jacobian of the whole scan (tens of seconds)
        theta = np.asarray(theta, dtype=np.float64)
        p = space.params(jnp.asarray(theta))
        rs = [(rollout_batch(cfg, p, arr).q - arr["q_meas"])[mask] for cfg, arr, mask in items]
        return jnp.concatenate(rs)

    theta, names = np.asarray(fit.theta, float), list(space.names)
    # 2p replays each, independent: the sensitivity's on a second thread beside the Jacobian's
    with ThreadPoolExecutor(1, thread_name_prefix="actuatorlab-sensitivity") as pool:
        moved = pool.submit(in_this_precision(sensitivity), residuals, theta, names)
        return identifiability(residuals, theta, names) | {"sensitivity": moved.result()}


def _check_fit(model: str | None, options: FamilyOptions, jackknife: str | None) -> None:
    """Reject bad names and options that do not apply, before any log is read."""
    if not isinstance(options.budget, str) or options.budget not in BUDGETS:
        raise UnknownNameError("budget", str(options.budget), list(BUDGETS))
    if jackknife not in (None, "log", "group"):
        raise UnknownNameError("jackknife unit", jackknife, ("log", "group"))
    for e in options.extensions or ():
        if e not in EXTENSIONS:
            raise UnknownNameError("model extension", e, list(EXTENSIONS))
    if options.calibration not in CALIBRATIONS:
        raise UnknownNameError("calibration", options.calibration, CALIBRATIONS)
    if model is not None:
        get_model(model)  # fail before loading data
        if options.extensions is not None:
            raise ActuatorlabError("--extensions applies to the family fit (without --model); with --model, "
                                   "name the extensions in the model (e.g. m5+sag+thermal)")


def _selection_record(sel, group_by: tuple[str, ...]) -> dict:
    """model.json's ``selection`` from a :class:`~actuatorlab.identify.select.SelectionResult`."""
    selection = {"scheme": sel.scheme, "group_by": list(group_by), "table": sel.table,
                 "selected": sel.selected, "groups": sel.groups,
                 "folds": [{"label": f.label, "heldout_logs": [r for r in g["heldout_logs"]]}
                           for f, g in zip(sel.folds, sel.groups)],
                 "fit_logs": sel.fit_names, "validation_logs": sel.val_names, "rule": sel.rule,
                 "timing": sel.extras.get("timing"), "starts": sel.extras.get("starts"),
                 "calibration": sel.extras.get("calibration"),
                 "calibration_judged": sel.extras.get("calibration_judged"),
                 "boxes_widened": sel.extras.get("boxes_widened")}
    if sel.scheme != "logo":
        selection["note"] = (f"fewer than 2 condition groups for {', '.join(group_by)}: selected on a single "
                             "validation split instead of leave-one-group-out")
    return selection


def fit_logs(trajs: list[Trajectory], model: str | None, options: FamilyOptions,
             progress: Progress | None = None) -> tuple:
    """(fit, selection record or None, group jackknife or None): the family selection
    (:func:`~actuatorlab.identify.select.fit_family`) without ``model``, else one model fitted
    with the budget's :data:`~actuatorlab.identify.select.BUDGETS` entry."""
    if model is None:
        sel = fit_family(trajs, options=options, progress=progress)
        return sel.final, _selection_record(sel, options.group_by), sel.uncertainty
    assert isinstance(options.budget, str)  # _check_fit refused anything but a budget name
    evals, starts, grad = BUDGETS[options.budget]
    one = partial(fit_model, trajs, model, seed=options.seed, max_evals=evals, n_starts=starts, grad_steps=grad,
                  dt=options.dt, progress=(lambda s, d, t: progress(model, s, d / t)) if progress else None,
                  workers=options.workers)  # refitted in widened boxes where it ends on a profile box's edge (R49)
    return refit_widened(one(), lambda bounds, init: one(bounds=bounds, init=init)), None, None


@dataclass(frozen=True)
class RobotFitOptions:
    """Settings of a whole-robot fit (multi-joint logs, :func:`run_fit`)."""

    robot: str | None = None  #: bundled robot name; None: the robot the logs name (one-joint logs: none)
    max_evals: int = 300  #: CMA-ES evaluations per model
    per_joint: bool = False  #: one parameter set per joint instead of one per actuator group
    horizon: int = 100  #: fit window length [control steps]
    max_windows: int | None = 64  #: at most this many fit windows per model (None: all)
    method: str = "cma"  #: "cma" (native MuJoCo, fast on CPUs) or "grad" (Adam through MJX, minutes on a CPU)
    #: an arm_model.json of this robot whose parameters start the CMA-ES fit of ``model`` (e.g. the fit by joint
    #: type before a fit per joint: each joint starts at its type's values); None: the config's nominal values
    init: str | Path | None = None
    #: camera masks (docs/format.md section 6) whose silhouettes join the grad fit's loss
    #: (:mod:`actuatorlab.identify.images`); camera: their camera_calibration.json (None: the camera file's poses)
    masks: str | Path | None = None
    camera: str | Path | None = None
    image_weight: float = 1e-2  #: lambda [rad^2] of the image term
    refine_camera: bool = False  #: fit each camera's pose too (joint camera refinement, identify.images)
    image_loss: str = "soft_iou"  #: the per-frame image loss (identify.images.LOSSES)
    state_std: float = 0.0  #: [rad] prior std of per-frame state corrections (identify.images; 0: none)
    #: without ``model``: "auto" selects the member the drive-rate logs measure in full
    #: (:data:`~actuatorlab.identify.drive.MEASURED_MEMBER`, per joint) where they do, else the nested ladder judged
    #: on the validation logs' replay; "replay": the ladder always
    selection: str = "auto"


def _images_record(ro: RobotFitOptions, r: dict) -> dict[str, Any]:
    """The image supervision's entries of arm_model.json's "fit" (none without masks)."""
    if ro.masks is None:
        return {}
    return {"masks": str(ro.masks), "camera": None if ro.camera is None else str(ro.camera),
            "image_weight": ro.image_weight, "refine_camera": ro.refine_camera, "image_loss": ro.image_loss,
            "state_std": ro.state_std,
            **{k: r[k] for k in ("image_term", "image_soft_iou", "image_edge_rms", "camera_refinement",
                                 "state_corrections") if k in r}}


@physics
@on_fixed_blas_threads  # the Jacobian standard errors too, not only the fit
def run_fit(paths=None, out: str | Path = "run", *, model: str | None = None,
            options: FamilyOptions = FamilyOptions(), mapping: str | Path | None = None,
            progress: Progress | None = None, jackknife: str | None = None, timestep_sensitivity: bool = False,
            robot: RobotFitOptions = RobotFitOptions()) -> dict:
    """Fit (one ``model``, or the nested family selected on data it was not fitted on) and write RUN/.

    One joint (a bench): writes RUN/model.json, RUN/report.html and RUN/identifiability.json;
    returns the model dict. A robot (``robot.robot``, or the robot multi-joint logs name): the
    whole-robot fit of :func:`_fit_robot` (``robot``'s settings, ``options.seed``), RUN/arm_model.json;
    returns its document; ``jackknife`` there adds the refits' ``uncertainty`` (groups of
    ``options.group_by[0]``, or logs).
    ``options`` (:class:`~actuatorlab.identify.select.FamilyOptions`): seed, budget, dt and workers
    apply to both; extensions, group_by and calibration to the family fit. Order: the fit, the
    Jacobian standard errors (``identifiability``, about a second) and, after a family fit, the
    delete-a-group jackknife from the selection's leave-one-group-out refits (free) go into the
    first model.json and report. The passes on request then run and rewrite both:
    ``jackknife="log"`` (leave-one-log-out refits, replaces the group jackknife) or ``"group"``,
    and ``timestep_sensitivity`` (replays and refits at dt/2 and 2 dt).
    """
    _check_fit(model, options, jackknife)
    trajs = load_data(paths, mapping)
    out = Path(out)
    name = robot.robot or _robot_of(trajs)
    if name is not None and not name.startswith("bench:"):
        return _fit_robot(name, trajs, out, model, options.seed, robot, progress, (jackknife, options.group_by))
    fit, selection, uncertainty = fit_logs(trajs, model, options, progress)
    batches = make_batches(trajs, fit.dt)
    if progress:
        progress("identifiability", "jacobian", 0.0)
    # the Jacobian standard errors (one core, about half a second on the 11 XL330 logs) beside the
    # replay and the diagnosis: independent computations, the same results
    with ThreadPoolExecutor(1, thread_name_prefix="actuatorlab-identifiability") as pool:
        pending = pool.submit(in_this_precision(identifiability_for), fit, batches)
        results = replay_batches(fit.model, fit.params, batches)
        summary = summarize(results)
        diagnosis = diagnose(trajs, results, fit.model, DiagnoseConfig(seed=options.seed))
        ident = pending.result()
    data = {"logs": [{"name": t.name, "file": t.source_file, "conditions": t.conditions} for t in trajs],
            "n_samples": int(sum(b.n_samples for b in batches)), "dt": fit.dt}
    envelope = compute_envelope(trajs, fit.dt)

    def write(d):
        save_model(d, out / "model.json")
        atomic_write(out / "identifiability.json", json.dumps(ident, indent=2) + "\n")
        write_fit_report(out, d, fit, results, summary, ident, selection)

    def build(unc):
        return model_to_dict(fit, setup=_setup_summary(trajs), data=data,
                             metrics={"train": {k: summary[k] for k in ("position_mae", "position_rmse",
                                                                         "position_relative_error")}},
                             identifiability=ident, selection=selection, uncertainty=unc) | {
            "envelope": envelope,  # the region the training data covered
            "diagnosis": diagnosis}  # the in-sample error against the sensor floor, the residual's structure

    d = build(uncertainty)
    write(d)  # the result is on disk before any optional pass starts
    if jackknife is not None and fit.space.n:
        if progress:
            progress("jackknife", "refits", 0.0)
        unc = resampled_uncertainty(trajs, fit.model, fit.params, by=jackknife, group_by=options.group_by,
                                    search=replace(JACKKNIFE_SEARCH, seed=options.seed), dt=fit.dt,
                                    progress=progress,  # the refits search the fit's own boxes
                                    bounds=dict(zip(fit.space.names, zip(fit.space.lower, fit.space.upper))))
        if unc is not None:
            d = build(unc)
    if timestep_sensitivity:
        if progress:
            progress("timestep sensitivity", "replay", 0.0)
        d["timestep_sensitivity"] = ts(d, trajs)
    if jackknife is not None or timestep_sensitivity:
        write(d)
    d["_summary"] = summary
    return d


@physics
def run_evaluate(model_path, paths, *, dt: float | None = None, mapping: str | Path | None = None,
                 report: str | Path | None = None, standalone: bool = False) -> dict:
    """Replay logs with a fitted model (never refitting); returns the metrics summary.

    Every log is also checked against the model's operating envelope
    (:mod:`actuatorlab.evaluate.envelope`): the summary gains ``envelope_available``,
    ``envelope_outside_fraction`` (share of all samples outside the envelope in at least one
    dimension, None without an envelope), ``envelope_outside_dimensions`` ({dimension: share}),
    ``envelope_warnings`` (unseen conditions, logs mostly outside, error that comes from outside),
    and each ``per_log`` entry ``envelope_outside_fraction``, ``envelope_outside_dimensions`` and
    ``envelope`` (details, :func:`~actuatorlab.evaluate.envelope_summary.summarize_envelope`). A model file
    written before envelopes were recorded still evaluates, with ``envelope_available`` false.

    ``report``: also write an HTML report there (the fit report's layout, parameters from the
    model file, an envelope coverage section); plotly.js goes once into a sibling file of the
    folder unless ``standalone`` (inlined: one larger self-contained page).
    """
    d = load_model(model_path)
    trajs = load_data(paths, mapping)
    joint = d.get("joint_type")
    for t in trajs:
        if joint and t.setup.joint_type != joint:
            raise DataError(t.source_file or t.name, f"unit mismatch: log is {t.setup.joint_type} but the "
                                                     f"model was fitted on {joint} joints")
    rdt = float(dt if dt is not None else d.get("fit", {}).get("dt") or 0) or default_dt(trajs)
    results = replay(d, trajs, rdt)
    s = summarize(results)
    s["model"] = d["model"]
    env = d.get("envelope")
    checks = None
    if env is None:
        s.update(envelope_available=False, envelope_outside_fraction=None, envelope_outside_dimensions=None,
                 envelope_warnings=[], envelope_unavailable_reason=(
                     f"{model_path}: the model file records no operating envelope (written before envelopes "
                     "were recorded); refit to get one"))
        for row in s["per_log"]:
            row.update(envelope_outside_fraction=None, envelope_outside_dimensions=None, envelope=None)
    else:
        checks = check_trajectories(env, trajs, rdt)
        by_name = {r.name: r for r in results}
        errs = [np.abs(by_name[c.log].q_sim - by_name[c.log].q_meas) for c in checks]
        e = summarize_envelope(checks, errs, s["unit"])
        s.update(envelope_available=True, envelope_outside_fraction=e["outside_fraction"],
                 envelope_outside_dimensions=e["outside_dimensions"], envelope_warnings=e["warnings"])
        for row in s["per_log"]:
            pl = e["per_log"][row["log"]]
            row.update(envelope_outside_fraction=pl["outside_fraction"],
                       envelope_outside_dimensions=pl["outside_dimensions"], envelope=pl)
    if report is not None:
        fitted = {x.get("name") for x in (d.get("data") or {}).get("logs", [])}
        overlap = [t.name for t in trajs if t.name in fitted]
        note = (f"<p>Model file: {html.escape(str(model_path))} ({html.escape(str(d.get('model')))}, fitted on "
                f"{len(fitted)} logs: {html.escape(', '.join(sorted(fitted)) or 'unknown')}).</p>")
        if overlap:
            note += ('<p class="warn">These evaluated logs were also used for fitting, so their errors are '
                     f"training errors: {html.escape(', '.join(overlap))}.</p>")
        else:
            note += "<p>None of the evaluated logs was used for fitting.</p>"
        write_report(report, results, title=f"actuatorlab evaluate: {d['model']}", model_name=d["model"],
                     parameters=param_rows(d), identifiability=d.get("identifiability"), summary=s,
                     extra_sections={"Evaluation": note}, envelope=env, envelope_checks=checks,
                     plotly_js="inline" if standalone else "sibling")
        s["report"] = str(report)
    return s


@physics
def run_compare(paths, holdout, *, models: list[str] | None = None, seed: int = 0, budget: str = "default",
                dt: float | None = None, progress: Progress | None = None) -> dict:
    """Fit several nested models on ``paths`` and score them on ``holdout`` logs (never fitted on).

    Each model starts from its parent's optimum; the table marks which extensions lower held-out
    error relative to their parent.
    """

    train = load_data(paths)
    test = load_logs(list(holdout))
    train_names = {t.source_file for t in train}
    overlap = [t.source_file for t in test if t.source_file in train_names]
    if overlap:
        raise DataError(overlap[0], "held-out log is also in the training data")
    models = list(models or ladder_for(train))
    for m in models:
        get_model(m)
    evals, starts, grad = BUDGETS[budget]
    tb = make_batches(train, dt)
    hb = make_batches(test, tb[0].dt)
    rows: list[dict[str, Any]] = []
    fits: dict[str, Any] = {}
    for i, m in enumerate(models):
        inner = [x for x in fits if contains(m, x)]
        parent = max(inner, key=lambda x: len(fits[x].space.names)) if inner else None
        cb = (lambda s, d, t, _m=m: progress(_m, s, d / t)) if progress else None
        r = fit_model(tb, m, seed=seed + i, max_evals=evals, n_starts=starts, grad_steps=grad,
                      init=[fits[x].params for x in inner], progress=cb)
        fits[m] = r
        s = summarize(replay_batches(m, r.params, hb))
        row = {"model": m, "parent": parent, "n_free": len(r.space.names), "train_mae": r.train_mae,
               "heldout_mae": s["position_mae"], "heldout_rmse": s["position_rmse"], "fit_wall_s": r.wall_s}
        if parent:
            prow = next(x for x in rows if x["model"] == parent)
            row["heldout_gain_vs_parent"] = 1.0 - row["heldout_mae"] / prow["heldout_mae"]
            row["improves_heldout"] = row["heldout_gain_vs_parent"] > 0.0
        rows.append(row)
    best = min(rows, key=lambda r: r["heldout_mae"])
    return {"rows": rows, "best": best["model"], "unit": tb[0].unit,
            "train_logs": [t.name for t in train], "heldout_logs": [t.name for t in test]}


def run_import(paths, out_dir, *, mapping: str | Path | None = None) -> list[Path]:
    """Convert logs of any supported format to the native format in ``out_dir``."""
    trajs = load_logs(list(paths), mapping=mapping)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    sources = {Path(t.source_file).resolve() for t in trajs if t.source_file}
    for t in trajs:  # check every target before writing anything
        for target in (out / f"{t.name}.parquet", out / f"{t.name}.json"):
            if target.resolve() in sources:
                raise DataError(target, "refusing to overwrite a raw input file; choose another --out folder")
    return [save_trajectory(t, out / f"{t.name}.parquet") for t in trajs]


def run_audit(paths, *, mapping: str | Path | None = None) -> list[dict]:
    """Audit every log (loaded leniently so that the problems can be reported, not raised)."""
    if not paths:
        raise DataError(None, "no supported log files found")
    return [audit_log(t) for t in load_logs(list(paths), mapping=mapping, strict=False)]




def _robot_of(trajs: list[Trajectory]) -> str | None:
    """The robot multi-joint logs name (``Setup.extra["robot"]``, one for all of them); None for
    one-joint logs (no robot, or a bench: "bench:revolute")."""
    names = {(t.setup.extra or {}).get("robot") for t in trajs}
    if len(names) > 1:
        raise DataError(None, f"the logs name different robots ({', '.join(sorted(map(str, names)))}); "
                              "fit one robot at a time")
    name = next(iter(names), None)
    return None if name is None or str(name).startswith("bench:") else str(name)


def _fit_robot(robot: str, trajs: list[Trajectory], out: Path, model: str | None, seed: int,
               ro: RobotFitOptions, progress: Progress | None,
               jackknife: tuple[str | None, tuple[str, ...]] = (None, ())) -> dict:
    """The whole-robot branch of :func:`run_fit`: window rollouts through the native MuJoCo path
    (CMA-ES) or MJX (Adam); writes RUN/arm_model.json with the model, the fitted and nominal
    parameters, the per-joint replay MAE at 100/300/600 steps and the per-joint operating envelope
    of the logs (:func:`~actuatorlab.evaluate.envelope.robot_envelope`).

    With ``model`` (e.g. "m3"), that model is fitted on all logs. Without, the nested ladder
    :data:`~actuatorlab.identify.arm_fit.ARM_LADDER` is fitted on part of the logs and judged on
    the rest (:func:`~actuatorlab.identify.select.split_validation`: every 4th log by excitation,
    or a 70/30 time split of fewer than 3 logs), and the selected model is refitted on all of them
    (:func:`~actuatorlab.identify.arm_fit.select_arm`). With drive-rate logs that measure every value of
    :data:`~actuatorlab.identify.drive.MEASURED_MEMBER` for every joint and ``ro.selection`` "auto" (the default),
    that member is selected instead, per joint, nothing searched (:func:`_measured_member`); the ladder's table
    stays in ``selection`` with the member's row, ``rule`` "drive-measured" and ``replay_selected``.

    ``jackknife`` = (unit, group_by): with unit "group" or "log" (CMA-ES fits only), after the fit is written,
    the delete-a-group jackknife of :func:`~actuatorlab.identify.arm_jackknife.arm_jackknife` (refits without
    each group of ``group_by[0]``, or each log) rewrites it with ``uncertainty``. Without, the file is the
    fit alone."""
    selection = None
    if jackknife[0] is not None and ro.method != "cma":
        raise ActuatorlabError(f"--robot {robot}: the jackknife refits the CMA-ES fit (method cma, not {ro.method})")
    if ro.init is not None and (model is None or ro.method != "cma"):
        raise ActuatorlabError(f"init {ro.init}: starts the CMA-ES fit of one model; give --model (and method cma)")
    if ro.masks is not None and (model is None or ro.method != "grad"):
        raise ActuatorlabError(f"masks {ro.masks}: the image loss joins the gradient fit of one model; give --model "
                               "and method grad")
    if ro.refine_camera and ro.masks is None:
        raise ActuatorlabError(f"--robot {robot}: refine_camera refines the cameras of the masks; give masks")
    if ro.state_std and ro.masks is None:
        raise ActuatorlabError(f"--robot {robot}: state_std corrects the states drawn for the masks' frames; give masks")
    fast, trajs = drive_logs(trajs, load_robot(robot).joint_names)
    if fast and not trajs:
        raise DataError(None, f"--robot {robot}: only drive-rate logs ({len(fast)}); the model is fitted on logs at "
                              "the control rate, with the drive-rate logs beside them")
    groups = log_groups(robot, trajs)  # in-air logs: base welded, their gains and loads, sets by joint type
    if ro.method == "grad" and len(groups) > 1:
        raise ActuatorlabError(f"--robot {robot}: the logs were recorded at {len(groups)} gain / load settings; "
                               "the grad method fits one (use method cma)")
    rb = groups[0][0]
    if ro.method not in ("cma", "grad"):
        raise UnknownNameError("fit method", ro.method, ("cma", "grad"))
    drive = _drive_side(robot, fast, rb, ro) if fast else None
    if model is not None and ro.method == "grad":
        images = None if ro.masks is None else load_image_supervision(rb, trajs, ro.masks, ro.camera,
                                                                     ImageOptions(weight=ro.image_weight, loss=ro.image_loss,
                                                                                  refine_camera=ro.refine_camera,
                                                                                  state_std=ro.state_std))
        r = fit_arm_grad(rb, trajs, model=model, seed=seed, per_joint=ro.per_joint, images=images)
    elif model is not None:
        r = fit_arm(robot, trajs, model=model, max_evals=ro.max_evals, seed=seed, per_joint=ro.per_joint,
                    horizon=ro.horizon, max_windows=ro.max_windows,
                    init=[] if ro.init is None else [_init_sets(rb, model, ro.init, ro.per_joint)], sensitivity=True,
                    given=None if drive is None else drive["values"])
    else:
        fit_part, val_part = split_validation(trajs)
        cb = (lambda m, i, n: progress(m, f"{i + 1}/{n + 1}", 0.0)) if progress else None
        res = select_arm(robot, fit_part, val_part, per_joint=ro.per_joint, max_evals=ro.max_evals, seed=seed,
                         horizon=ro.horizon, max_windows=ro.max_windows, method=ro.method, progress=cb,
                         given=None if drive is None else drive["values"])
        r, table, rule = res["final"], res["table"], "replay"
        if drive is not None and ro.selection == "auto" and drive["measured"] is not None:
            r, row = _measured_member(robot, trajs, fit_part, val_part, res["val_horizon"], drive["measured"], seed, ro)
            table, rule = [{**t, "selected": False} for t in table] + [row], "drive-measured"
        selection = {"rule": rule, "replay_selected": res["selected"], "table": table, "fit": res["fit_names"],
                     "validation": res["val_names"], "val_horizon": res["val_horizon"]}
    ev = evaluate_logs(robot, r["params"], trajs, model=r["model"])

    per_joint = ro.per_joint or (selection or {}).get("rule") == "drive-measured"
    d = {"format": FORMAT, "format_version": FORMAT_VERSION, "robot": robot, "kind": "analytic", "model": r["model"],
         "per_joint": per_joint, "params": r["params"], "nominal": r["nominal"],
         "envelope": robot_envelope(rb, trajs),
         "fit": {"method": ro.method, **{k: r[k] for k in ("train_mae", "train_mae_nominal", "evaluations", "wall_s",
                                                            "horizon")},
                 **({"init": str(ro.init)} if ro.init is not None else {}),
                 **_images_record(ro, r)},
         "selection": selection, "metrics": {"train": ev}, "data": [t.source_file for t in trajs + fast],
         "package_version": __version__, "git_revision": git_revision()}
    if r.get("sensitivity"):  # which fitted values these logs do not determine (CMA-ES fits)
        d["identifiability"] = {"sensitivity": r["sensitivity"]}
    if drive is not None:  # what the drive-rate logs measured, and which of it the model took
        d["drive_identification"] = {**{k: v for k, v in drive.items() if k not in ("values", "measured")},
                                     "taken": list(r.get("given") or [])}
    save(from_document(d, validate=False), out / "arm_model.json")
    if r.get("camera_refinement"):  # the refined cameras, in the file `train --camera` and `fit --config camera` read
        atomic_write(out / "camera_calibration.json", json.dumps(
            {"robot": robot, "refined_from": None if ro.camera is None else str(ro.camera),
             "cameras": [{"camera": c["camera"], "camera_from_base": c["camera_from_base"],
                          "moved_mm": c["centre_moved_mm"], "rotation_deg": c["rotation_deg"]}
                         for c in r["camera_refinement"]]}, indent=2) + "\n")
    if jackknife[0] is not None:  # the fit is on disk before the refits start
        if progress:
            progress("jackknife", "refits", 0.0)
        d["uncertainty"] = arm_jackknife(robot, trajs, r, by=jackknife[0], group_by=jackknife[1] or GROUP_KEYS,
                                         max_evals=ro.max_evals, seed=seed, horizon=ro.horizon,
                                         max_windows=ro.max_windows)
        save(from_document(d, validate=False), out / "arm_model.json")
    return d


def _drive_side(robot: str, fast: list[Trajectory], rb: Robot, ro: RobotFitOptions) -> dict[str, Any]:
    """The drive-side identification of the drive-rate logs ``fast`` (:mod:`actuatorlab.identify.drive`):
    {"logs", "per_joint": {joint: DriveFit as a dict}, "values": {parameter: [value per parameter set of
    ``rb``, the window fit's robot]}, "cutoff_hz"}; the window fit keeps ``values`` (every parameter of its
    model it has)."""
    if ro.method != "cma":
        raise ActuatorlabError(f"--robot {robot}: the drive-rate logs' values join the CMA-ES fit (method cma, "
                               f"not {ro.method})")
    fits = identify_drives(log_groups(robot, fast))
    return {"logs": [t.source_file for t in fast], "cutoff_hz": CUTOFF_HZ,
            "per_joint": {j: f.to_dict() for j, f in fits.items()},
            "values": set_values(rb, fits, per_joint=ro.per_joint), "measured": measured_values(rb, fits)}


def _measured_member(robot: str, trajs: list[Trajectory], fit_part: list[Trajectory], val_part: list[Trajectory],
                     val_horizon: int, measured: dict[str, list[float]], seed: int,
                     ro: RobotFitOptions) -> tuple[dict, dict]:
    """``selection="auto"`` where the drive-rate logs measure every value of :data:`~actuatorlab.identify.drive.
    MEASURED_MEMBER` for every joint: that member per joint with the ``measured`` values (nothing searched), its
    table row scored on the ladder's fit and validation logs; returns (the fit_arm result on all logs, the row).
    Why not the ladder's pick: on the legged suite the 50 Hz in-air replay ranks the rigid members first, and
    policies trained on them transfer worse to the hardware than on this member (journal/legged.md, 2026-12-07:
    two fleets, 3 seeds each)."""
    kw: dict[str, Any] = dict(model=MEASURED_MEMBER, per_joint=True, max_evals=ro.max_evals, seed=seed,
                              horizon=ro.horizon, max_windows=ro.max_windows, given=measured)
    part = fit_arm(robot, fit_part, **kw)
    v = evaluate_logs(robot, part["params"], val_part, horizons=(val_horizon,), model=MEASURED_MEMBER)["position_mae"]
    row = {"model": part["model"], "parent": None, "n_free": 0, "train_mae": part["train_mae"],
           "validation_mae": float("inf") if v is None else float(v), "gain_vs_parent": None, "earns_place": None,
           "wall_s": part["wall_s"], "selected": True, "measured": True}
    return fit_arm(robot, trajs, sensitivity=True, **kw), row


def _init_sets(rb: Robot, model: str, path: str | Path, per_joint: bool) -> dict[str, list[float]]:
    """The parameter sets (name -> value per set of the fitted robot ``rb`` with ``model``; per joint with
    ``per_joint``) of the arm_model.json ``path``: its parameters on ``rb`` (sets by joint type, per joint or by
    actuator type), the nominal values where it has none."""
    m = load(path)
    if m.one_joint or m.kind != "analytic" or m.robot != rb.name:
        raise ModelError(f"{path}: init needs an analytic arm_model.json of robot {rb.name!r} "
                         f"(got a {m.kind} model of {m.robot!r})")
    r, p = _param_sets(robot_with_model(rb, model), m.document.get("params") or {})
    if per_joint and len(r.groups) != rb.n_joints:  # each joint starts at its set's values
        gidx = [j.group for j in r.joints]
        p = {k: np.asarray(v)[gidx] for k, v in p.items()}
    return {k: [float(x) for x in np.asarray(v)] for k, v in p.items()}


@physics
def run_evaluate_arm(robot: str, model_path, paths) -> dict:
    """Per-joint replay MAE at 100/300/600 steps of multi-joint logs; ``model_path`` is an
    arm_model.json from :func:`run_fit` (a robot) or :func:`run_train_arm` (kind "learned" /
    "residual") or the word "nominal" (the robot config's values). With a model file that records
    an envelope, ``envelope_outside_fraction`` {log: share of samples outside it (any joint, any
    dimension)}, ``envelope_outside_per_joint`` {log: {joint: share}}, ``envelope_outside_dimensions``
    {log: {joint: {dimension: share}}} and ``envelope_warnings`` are added
    (:func:`~actuatorlab.evaluate.envelope_summary.robot_outside`, the one-joint check per joint).
    An analytic model also gets the one-joint evaluation's regime breakdown per joint at the longest
    horizon (:func:`~actuatorlab.evaluate.replay.robot_regimes`: ``per_joint_regimes``,
    ``regime_horizon``, ``regime_warnings``)."""
    params, model = None, None
    if str(model_path) != "nominal":
        p = Path(model_path)
        am = load(p)
        if am.one_joint:
            raise ModelError(f"{p}: a one-joint model (robot {am.robot!r}); --robot {robot} takes a whole-robot "
                             "arm_model.json (fit it with `actuatorlab fit --robot`)")
        check_robot(am, robot)
        if am.kind in LEARNED_KINDS:
            r, m, _ = load_arm_model(p, robot)
            trajs = load_logs(list(paths))
            return _note_skipped_horizons(evaluate_learned_arm(r, m, trajs), trajs)
        d = am.document
        params = am.parameters
        model = am.model
    trajs = load_logs(list(paths))
    groups = log_groups(robot, trajs)  # in-air logs: base welded, their gains and loads, sets by joint type
    rb = groups[0][0]
    res = evaluate_logs(robot, None if params is None else dict(params), trajs, model=model)
    if res["horizon"] is not None and len(groups) == 1:  # errors by regime, defined once (evaluate.metrics)
        res.update(robot_regimes(rb, None if params is None else dict(params), trajs, res["horizon"], model))
    env = d.get("envelope") if params is not None else None
    if env:  # each log's share of samples outside the fit's per-joint envelope
        o = robot_outside(rb, env, trajs)
        res.update(envelope_outside_fraction=o["outside_fraction"], envelope_outside_per_joint=o["per_joint"],
                   envelope_outside_dimensions=o["outside_dimensions"], envelope_warnings=o["warnings"])
    return _note_skipped_horizons(res, trajs)


def _note_skipped_horizons(res: dict, trajs, horizons=(100, 300, 600)) -> dict:
    """A horizon longer than every log has no windows and no column: say so rather than drop it.
    Adds ``skipped_horizons`` ({str(h): reason}) and ``warnings`` (one line each)."""
    done = set((res.get("n_windows") or {}).keys())
    longest = max((t.n for t in trajs), default=0)
    skipped = {str(h): f"longer than every log (the longest has {longest} samples)"
               for h in horizons if str(h) not in done}
    res["skipped_horizons"] = skipped
    if skipped:
        res.setdefault("warnings", []).append(
            f"no {', '.join(skipped)}-step column: {'that horizon is' if len(skipped) == 1 else 'those horizons are'} "
            f"longer than every log (the longest has {longest} samples); give longer logs to score it")
    return res
