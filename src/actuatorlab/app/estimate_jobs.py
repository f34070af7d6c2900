"""The jobs behind estimate-force, condition and report-heads: load the logs and the model, run the
estimators of actuatorlab.estimate, write the JSON/CSV results and the HTML reports."""

from __future__ import annotations

import dataclasses
import warnings
from pathlib import Path
from typing import Any, Sequence
import numpy as np
from ..errors import DataError
from ..sim.force import CLASSICAL, DEFAULT_K_O
from typing import Callable
from ..estimate.force_eval import ALL_METHODS, evaluate_force, load_tagged
from ..estimate.condition_calibrate import calibrate_condition, hold_frames
from ..estimate.condition_windows import condition_log
from ..estimate.condition_train import (ConditionTrainConfig, DetectorConfig, fit_condition_detector,
                                        learned_frame_scores_batched, train_condition_head)
from ..estimate.condition import public, run_condition
from ..report.condition import write_condition_report
from ..report.force import write_force_report
from ..report.heads import write_heads_report
from ..files import atomic_write
from ..errors import ActuatorlabError, UnknownNameError
from ..learned.arm import load_arm_model, save_arm_model
from ..logs import load_logs
from ..precision import physics_precision
from ..robots.loader import load_robot


def _write_csv(path: str | Path, res: dict[str, Any]) -> Path:
    import io


    methods = res["methods"]
    buf = io.StringIO()
    buf.write(",".join(["log", "time"] + [f"{m}/{c}" for m in methods for c in ("force_x", "force_y", "force_z",
                                                                             "contact")]) + "\n")
    for i, lg in enumerate(res["_logs"]):
        cols = [np.column_stack([res["_outputs"][m][i]["force"], res["_outputs"][m][i]["contact"]]) for m in methods]
        block = np.concatenate(cols, axis=1)
        for k in range(lg.n):
            buf.write(f"{lg.name},{lg.time[k]:.6g}," + ",".join(f"{v:.6g}" for v in block[k]) + "\n")
    atomic_write(Path(path), buf.getvalue())
    return Path(path)


def run_estimate_force(model_path, data: Sequence, *, robot: str, calibrate: Sequence = (),
                       methods: Sequence[str] | None = None, ee_body: str | None = None, k_o: float = DEFAULT_K_O,
                       report: str | Path | None = None, out: str | Path | None = None) -> dict[str, Any]:
    """``actuatorlab estimate-force``: load MODEL (a learned RUN/arm_model.json; ``None`` or
    ``"-"``: no learned method) and the logs DATA, calibrate the classical methods on the
    free-motion logs of ``calibrate`` (training logs: a folder or files; never the evaluated logs),
    evaluate (:func:`evaluate_force`), optionally write the HTML report and ``out``: a CSV of the
    per-frame estimates (log, time, then ``<method>/force_x|y|z`` [N] and ``<method>/contact``
    per method), written atomically. Logs without force labels are estimated, not scored. The
    learned force is 0 on frames its gate calls free (:func:`evaluate_force`)."""

    learned = model_path is not None and str(model_path) != "-"
    methods = list(methods or [m for m in ALL_METHODS if learned or m != "learned"])
    for m in methods:
        if m not in ALL_METHODS:
            raise UnknownNameError("force estimation method", m, list(ALL_METHODS))
    if "learned" in methods and not learned:
        raise ActuatorlabError("estimate-force: method 'learned' needs MODEL (a RUN/arm_model.json)")
    if any(m in CLASSICAL for m in methods) and not calibrate:
        raise ActuatorlabError("estimate-force: the classical methods need --calibrate TRAIN (free-motion training "
                               "logs, e.g. DIR/train of a synth dataset); or choose --methods learned")
    with physics_precision():
        r = load_robot(robot)
        model = load_arm_model(model_path, robot)[1] if learned else None
        trajs, splits = load_tagged(data)
        cal = load_logs(list(calibrate)) if calibrate else []
        res = evaluate_force(r, trajs, cal, model=model, methods=methods, ee_body=ee_body, k_o=k_o, splits=splits,
                             keep_outputs=report is not None or out is not None)
    res["model"] = str(model_path) if learned else None
    if report is not None:
        res["report"] = str(write_force_report(report, res))
    if out is not None:
        res["out"] = str(_write_csv(out, res))
    return {k: v for k, v in res.items() if not k.startswith("_")}


def _same_samples(a, b) -> bool:
    """Two loaded logs hold the same samples (time stamps and every data column)."""
    if a.time.shape != b.time.shape or not np.array_equal(a.time, b.time) or set(a.data) != set(b.data):
        return False
    return all(np.array_equal(np.asarray(a.data[k]), np.asarray(b.data[k]), equal_nan=True) for k in a.data)


@dataclasses.dataclass(frozen=True)
class ConditionOptions:
    """Options of ``actuatorlab condition`` (:func:`run_condition_files`): ``train`` training logs
    (the baselines; never the evaluated files), ``verdict_s`` [s], ``seed``, ``report`` (HTML),
    ``frames_csv``, ``fit_head`` (a run folder) with ``head_steps``, ``calibrate`` validation logs,
    ``use_calibration``, ``min_recall``, ``alarm_hold_s`` [s]."""

    train: Sequence = ()
    verdict_s: float = 5.0
    seed: int = 0
    report: Any = None
    frames_csv: Any = None
    fit_head: Any = None
    head_steps: int = 300
    calibrate: Sequence = ()
    use_calibration: bool = True
    min_recall: float | None = None
    alarm_hold_s: float = 0.0
    detector: DetectorConfig = DetectorConfig()


def _validation_beside(train: Sequence) -> list[Path]:
    """The validation folders of a dataset laid out as synth writes it: DIR/val beside each
    training folder DIR/train (bench/condition.py's split), those that exist."""
    out = []
    for p in map(Path, train):
        v = p.parent / "val"
        if p.is_dir() and p.name == "train" and v.is_dir() and v not in out:
            out.append(v)
    return out


def _refuse_overlap(trajs, used_trajs, why: str) -> None:
    """A log of ``trajs`` that is also one of ``used_trajs`` (the same source AND the same samples:
    synthetic logs of two units share their names) is a :class:`DataError` saying ``why``."""
    used: dict[str, list] = {}
    for t in used_trajs:
        used.setdefault(str(t.source_file or t.name), []).append(t)
    clash = sorted(str(v.source_file or v.name) for v in trajs if any(
        _same_samples(u, v) for u in used.get(str(v.source_file or v.name), ())))
    if clash:
        raise DataError(clash[0], why)


def _adopted_detector(robot, ttrajs, vtrajs, opts: ConditionOptions):
    """``actuatorlab condition``'s default when the model file holds no calibrated condition
    detector: :func:`fit_condition_detector` on the training logs, selected and calibrated on the
    validation logs. Returns (model or None, calibration, the JSON record "detector"); None (and
    a warning) when the logs cannot support a learned detector."""
    model, info = fit_condition_detector(robot, ttrajs, vtrajs, opts.detector, verdict_s=opts.verdict_s)
    if model is None:
        msg = f"condition: no learned detector trained: {info['unsupported']}; the classical detectors only"
        warnings.warn(msg, stacklevel=2)
        return None, {}, {"trained": False, "reason": info["unsupported"], "message": msg}
    cal = info.pop("calibration")
    return model, cal, {"trained": True, **info, "calibration": cal["source"]}


def run_condition_files(model_path, paths, robot_name: str, opts: ConditionOptions = ConditionOptions(), *,
                        progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """``actuatorlab condition``: load the learned arm model ``model_path`` (RUN/arm_model.json),
    the evaluated logs ``paths`` and the training logs ``train`` (for the baselines; never the same
    files), evaluate (:func:`run_condition`), optionally first train the condition head on the
    training logs (``fit_head`` = a run folder: :func:`train_condition_head` with scope "head",
    ``head_steps`` steps, written there as arm_model.json), write the report and the per-frame
    scores (CSV: log, time, condition/<channel>; 1 = normal). Returns :func:`public`'s dict.

    Calibration (smoothing window and thresholds, :func:`calibrate_condition`): ``calibrate`` =
    validation logs (never the evaluated or training ones) to choose it on (stored in the
    ``fit_head`` model when given; ``min_recall``: the window threshold's operating point, see
    :func:`calibrate_condition`); otherwise the model file's ``condition_calibration`` when
    ``use_calibration``; otherwise none (no smoothing, thresholds 0.5, ``--verdict-s``).
    ``alarm_hold_s``: the per-frame alarm's on-delay in the ``alarms`` summary (:func:`run_condition`).
    ``opts``: :class:`ConditionOptions`.

    The default detector: when the model file holds no calibrated condition detector (no
    ``condition_calibration``; ``train-heads`` writes none) and neither ``fit_head`` nor
    ``use_calibration=False`` nor ``calibrate`` asks for the model's own head, and training logs are
    given, the detector bench/condition.py adopted (``opts.detector``, :class:`DetectorConfig`) is
    trained on them, selected and calibrated on the validation logs (the val folder beside the
    training folder, DIR/val of a synth dataset, as the bench splits; never the evaluated logs) and
    evaluated as ``learned``; the JSON's "detector" says what was trained on what and how it was
    calibrated. When the logs cannot support it (too few restricted training windows, no validation log restricted
    on that joint: :class:`DetectorConfig`), "detector" says why (also a warning) and only the
    classical detectors are reported."""
    import io


    train, verdict_s, seed, report, frames_csv = opts.train, opts.verdict_s, opts.seed, opts.report, opts.frames_csv
    fit_head, head_steps, calibrate, use_calibration = opts.fit_head, opts.head_steps, opts.calibrate, opts.use_calibration
    min_recall, alarm_hold_s = opts.min_recall, opts.alarm_hold_s
    hold_frames(alarm_hold_s, 1.0)  # a bad hold fails before any loading

    with physics_precision():
        robot, model, d = load_arm_model(model_path, robot_name)
        trajs = load_logs(list(paths))
        ttrajs = load_logs(list(train)) if train else []
        vtrajs = load_logs(list(calibrate)) if calibrate else []
        cal = dict(d.get("condition_calibration") or {}) if use_calibration else {}
        ch = model.layout.channels
        adopt = fit_head is None and use_calibration and not cal and not vtrajs and bool(ttrajs)
        if adopt:
            vtrajs = load_logs(_validation_beside(train))
        _refuse_overlap(vtrajs, list(trajs) + list(ttrajs), "is both a calibration log and an evaluated or training "
                                                           "log; calibrate on validation logs only")
        _refuse_overlap(trajs, ttrajs, "is both a training and an evaluated log; baselines never see test logs")
        detector = {"trained": False, "reason": "the model's own condition head"}
        if adopt:
            model, cal, detector = _adopted_detector(robot, ttrajs, vtrajs, opts)
            vtrajs = []  # the detector's validation logs; its calibration is chosen
        elif fit_head is not None:
            if not ttrajs:
                raise DataError(None, "--fit-head needs training logs (--train)")
            model, info = train_condition_head(robot, model, ttrajs, ConditionTrainConfig(steps=head_steps, seed=seed,
                                                                                        scope="head"))
            cal = {}
        ch = model.layout.channels if model is not None else ch
        if vtrajs:
            vlogs = [condition_log(robot, t, ch) for t in vtrajs]
            cal = calibrate_condition([learned_frame_scores_batched(robot, model, lg) for lg in vlogs],
                                      [lg.restricted for lg in vlogs], float(robot.control_dt), verdict_s=verdict_s,
                                      min_recall=min_recall)
            cal["channels_used"] = [ch[c] for c in cal["channels_used"]]
            cal["source"] = f"{len(vlogs)} calibration logs: " + ", ".join(lg.name for lg in vlogs)
        if fit_head is not None:
            save_arm_model(fit_head, robot_name, model, d.get("base"), extra={
                k: v for k, v in d.items() if k in ("training", "data")} | {"condition_head": {
                    k: v for k, v in info.items() if k != "loss"} | {"final_loss": info["loss"][-1]}}
                | ({"condition_calibration": cal} if cal else {}))
            model_path = Path(fit_head) / "arm_model.json"
        logs = [condition_log(robot, t, ch) for t in trajs]
        tlogs = [condition_log(robot, t, ch) for t in ttrajs]
        res = run_condition(robot, logs, model=model, train_logs=tlogs, seed=seed, verdict_s=verdict_s,
                            progress=progress, calibration=cal or None, alarm_hold_s=alarm_hold_s)
    res["model"] = str(model_path)
    res["detector"] = detector
    res["robot"] = robot_name
    res["verdict_s"] = res.get("calibration", {}).get("verdict_s", verdict_s)
    if report is not None:
        write_condition_report(report, res, model_name=str(model_path))
    if frames_csv is not None:
        buf = io.StringIO()
        buf.write(",".join(["log", "time"] + [f"condition/{c}" for c in res["channels"]]) + "\n")
        for dd in res["logs"]:
            for k, row in enumerate(dd["frame_scores"]):
                buf.write(f"{dd['log']},{k * dd['dt']:.6g}," + ",".join(f"{v:.6g}" for v in row) + "\n")
        atomic_write(frames_csv, buf.getvalue())
    out = public(res)
    out.pop("roc", None)
    return out


def run_heads_report(model_path, data: Sequence, *, robot: str, train: Sequence, out: str | Path,
                     verdict_s: float = 5.0, seed: int = 0) -> dict[str, Any]:
    """``actuatorlab report-heads``: load the learned model (RUN/arm_model.json), the evaluated logs
    ``data`` and the training logs ``train`` (baseline calibration and fitting only; an overlap
    with ``data`` is refused by both evaluations), evaluate force and condition, write the page
    ``out``. Returns {"report", "force": force JSON (``estimate-force --json``'s keys),
    "condition": condition JSON (``condition --json``'s keys, without ROC points)}."""
    if not train:
        raise DataError(None, "report-heads needs training logs (--train) for the baselines")
    with physics_precision():
        r, model, md = load_arm_model(model_path, robot)
        trajs, splits = load_tagged(data)
        ttrajs = load_logs(list(train))
        fres = evaluate_force(r, trajs, ttrajs, model=model, splits=splits, keep_outputs=True)
        ch = model.layout.channels
        cres = run_condition(r, [condition_log(r, t, ch) for t in trajs], model=model,
                             train_logs=[condition_log(r, t, ch) for t in ttrajs], seed=seed, verdict_s=verdict_s,
                             calibration=md.get("condition_calibration"))
    path = write_heads_report(out, fres, cres, model_name=str(model_path))
    cond = public(cres)
    cond.pop("roc", None)
    return {"report": str(path), "force": {k: v for k, v in fres.items() if not k.startswith("_")},
            "condition": cond}
