"""Motor-condition detection: the learned condition head against classical window classifiers.

A joint is *restricted* when something mechanical resists it (on the virtual hardware, an elastic
band on joint 3: ``synth``'s ``restricted = restricted_joint3``). Every method below scores each
(window, channel) pair; labels: **restricted = positive** (1), normal = 0.

Windows
    ``WINDOW`` = 64 control steps with 50 % overlap (``STRIDE`` = 32): starts 0, 32, 64, ... while
    ``start + 64 <= T`` (:func:`window_starts`); the samples after the last full window are not
    scored. A log shorter than 64 steps gives no window.

Learned head (``learned``)
    :class:`~actuatorlab.sim.arm_learned.OnlineEstimator` runs causally over the log, one frame at
    a time (measured positions, logged commands and telemetry up to the present frame), and gives
    per frame and channel a condition score s_k in [0, 1] (1 = normal, 0 = restricted). A window's
    restricted score is ``1 - mean_k s_k`` over its 64 frames (each s_k uses frames up to k only);
    it is called restricted when that mean normal score is below 0.5. Per-log verdict
    (:func:`log_verdicts`): a channel is restricted when its mean score over the last
    ``verdict_s`` seconds (default 5 s; the whole log when shorter) is below 0.5.
    Calibration (:func:`calibrate_condition`, chosen on validation logs only, stored in the model
    file as ``condition_calibration``): the per-frame scores are first smoothed causally over
    ``smooth_s`` seconds (:func:`smooth_scores`), and the two 0.5 thresholds become
    ``window_threshold`` and ``verdict_threshold``.

The classical baselines (threshold, SVM, random forest, one per channel, fitted on the training
logs' windows only), the metrics and the twenty window features are described, with their
equations, in :mod:`actuatorlab.estimate.condition_windows`.
"""

from __future__ import annotations

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from ..errors import DataError, ModelError
from ..sim.arm_learned import OnlineEstimator
from .condition_windows import (METHODS, STRIDE, WINDOW, ConditionLog, classification_metrics, excitation_of,
                                fit_baselines, stack_windows)
from .condition_calibrate import alarm_timing, calibrated_scores, hold_frames, learned_window_scores, log_verdicts
from .condition_train import learned_frame_scores

__all__ = ["run_condition", "public"]


# ----------------------------------------------------------------------------------------------
# Whole evaluation
# ----------------------------------------------------------------------------------------------

def _roc(y, s) -> dict[str, list] | None:
    from sklearn.metrics import roc_curve

    y, s = np.asarray(y).reshape(-1), np.asarray(s).reshape(-1)
    if len(np.unique(y)) < 2:
        return None
    fpr, tpr, _ = roc_curve(y, s)
    return {"fpr": fpr.tolist(), "tpr": tpr.tolist()}


def run_condition(robot, logs: Sequence[ConditionLog], *, model=None, train_logs: Sequence[ConditionLog] = (),
                  seed: int = 0, verdict_s: float = 5.0, progress: Callable[[str], None] | None = None,
                  calibration: dict | None = None, alarm_hold_s: float = 0.0) -> dict[str, Any]:
    """Evaluate the learned head (``model``: a :class:`~actuatorlab.sim.arm_learned.LearnedArm`,
    or None) and, when ``train_logs`` are given, the baselines fitted on them, on ``logs``.

    ``calibration`` (:func:`calibrate_condition`'s dict, chosen on validation logs; None: no
    smoothing, thresholds 0.5): the learned per-frame scores are smoothed causally over
    ``smooth_s`` seconds, a window is restricted when its mean score is below
    ``window_threshold``, a log's channel when the mean of its last ``verdict_s`` seconds is below
    ``verdict_threshold``; the per-frame scores reported are the smoothed ones.

    Returns {method: {"accuracy", "precision", "recall", "auc", "n_windows", "n_restricted",
    "by_channel": {channel: {...}}, "by_excitation": {family: {...}} (the rows of the logs of each
    excitation family, on the channels restricted in some evaluated log: ``restricted_channels``)},
    "logs": [per-log verdicts], "roc": {method: {"fpr", "tpr"}}; the learned head's entry also holds
    "alarms" (:func:`alarm_timing`: first alarm on restricted channels, false alarms per hour on
    normal ones, of the per-frame alarm at ``window_threshold``, raised after ``alarm_hold_s``
    seconds below it: :func:`persistent_alarm`),
    "window": {...}, "channels"}. A log both in ``train_logs`` and ``logs`` (same source and the
    same current and position samples) is a :class:`DataError`."""
    if not logs:
        raise DataError(None, "no logs to evaluate")
    chans = logs[0].channels
    for lg in list(logs) + list(train_logs):
        if lg.channels != chans:
            raise DataError(lg.source, f"records joints {list(lg.channels)}, the first log {list(chans)}")
    # the same log: same source AND the same samples (synthetic logs of two units share their names)
    by_src: dict[str, list[ConditionLog]] = {}
    for lg in train_logs:
        by_src.setdefault(lg.source, []).append(lg)
    overlap = sorted(lg.source for lg in logs if any(
        t.current.shape == lg.current.shape and np.array_equal(t.current, lg.current) and np.array_equal(t.q, lg.q)
        for t in by_src.get(lg.source, ())))
    if overlap:
        raise DataError(overlap[0], "is both a training and an evaluated log; baselines never see test logs")
    X, y, where = stack_windows(list(logs))
    res: dict[str, Any] = {"channels": list(chans), "window": {"length": WINDOW, "stride": STRIDE,
                                                               "overlap": 1 - STRIDE / WINDOW},
                           "roc": {}, "logs": []}
    scores: dict[str, np.ndarray] = {}
    preds: dict[str, np.ndarray] = {}
    alarms = None
    if model is not None:
        alarms = _learned(robot, model, logs, where, calibration, verdict_s, alarm_hold_s, progress, res, scores,
                          preds)
    if train_logs:
        _baselines(train_logs, X, seed, progress, res, scores, preds)
    # rows by the logs' excitation family, on the channels restricted in some evaluated log
    row_log = np.concatenate([np.full(len(st), k) for k, st in where]) if where else np.zeros(0, int)
    fam = np.array([excitation_of(lg) for lg in logs])[row_log] if len(row_log) else np.zeros(0, str)
    rcols = [i for i, _ in enumerate(chans) if any(lg.restricted[i] for lg in logs)]
    for name in METHODS:
        if name not in scores:
            continue
        m = classification_metrics(y, scores[name], preds[name])
        m["by_channel"] = {c: classification_metrics(y[:, i], scores[name][:, i], preds[name][:, i])
                           for i, c in enumerate(chans)}
        if rcols:
            m["by_excitation"] = {}
            for f in sorted(set(fam.tolist())):
                b = classification_metrics(y[fam == f][:, rcols], scores[name][fam == f][:, rcols],
                                           preds[name][fam == f][:, rcols])
                if b["n_restricted"] == 0:  # all normal: no recall (sklearn would say 0)
                    b["recall"] = None
                m["by_excitation"][f] = b
        if name == "learned":
            m["alarms"] = alarms
        res[name] = m
        res["roc"][name] = _roc(y, scores[name])
    res["restricted_channels"] = [chans[i] for i in rcols]
    res["n_logs"] = len(logs)
    return res


def _learned(robot, model, logs, where, calibration, verdict_s, alarm_hold_s, progress, res, scores, preds):
    """The learned head's part of :func:`run_condition`: per-log verdicts into ``res["logs"]``, the
    calibration used into ``res["calibration"]``, window scores and predictions into ``scores`` /
    ``preds``; returns the alarm summary."""
    chans = logs[0].channels
    if tuple(model.layout.channels) != tuple(chans):
        raise ModelError(f"the model's channels {list(model.layout.channels)} differ from the logs' {list(chans)}")

    cal = dict(calibration or {})
    smooth_s = float(cal.get("smooth_s", 0.0))
    thr_w, thr_v = float(cal.get("window_threshold", 0.5)), float(cal.get("verdict_threshold", 0.5))
    verdict_s = float(cal.get("verdict_s", verdict_s))
    est = OnlineEstimator(model)
    ws = []
    for (k, s), lg in zip(where, logs):
        if progress:
            progress(f"learned head: {lg.name}")
        fs = calibrated_scores(learned_frame_scores(robot, model, lg, est), cal, lg.dt, lg.q)
        ws.append(learned_window_scores(fs, s))
        mean, verdict = log_verdicts(fs, lg.dt, verdict_s, thr_v)
        res["logs"].append({"log": lg.name, "source": lg.source, "dt": lg.dt,
                            "label": {c: bool(r) for c, r in zip(chans, lg.restricted)},
                            "score_last": {c: float(v) for c, v in zip(chans, mean)},
                            "verdict": {c: "restricted" if v else "normal" for c, v in zip(chans, verdict)},
                            "frame_scores": fs})
    normal = np.concatenate(ws) if ws else np.zeros((0, len(chans)))
    scores["learned"], preds["learned"] = 1.0 - normal, (normal < thr_w).astype(int)
    alarms = alarm_timing([d["frame_scores"] for d in res["logs"]], [lg.restricted for lg in logs],
                          logs[0].dt, thr_w, warmup_frames=model.layout.history + 1,
                          hold_frames=hold_frames(alarm_hold_s, logs[0].dt))
    res["calibration"] = {**cal, "smooth_s": smooth_s, "window_threshold": thr_w, "verdict_threshold": thr_v,
                          "verdict_s": verdict_s, "source": cal.get("source", "none (defaults)" if not cal
                                                                    else "given")}
    return alarms


def _baselines(train_logs, X, seed, progress, res, scores, preds):
    """The baselines' part of :func:`run_condition`: fitted on the windows of ``train_logs``, scored
    on ``X``."""
    Xt, yt, _ = stack_windows(list(train_logs))
    if progress:
        progress(f"baselines: fitting on {Xt.shape[0]} training windows")
    fitted = fit_baselines(Xt, yt, seed)
    for name, cm in fitted.items():
        scores[name] = cm.scores(X)
        preds[name] = (scores[name] >= 0).astype(int)
    res["training"] = {"n_logs": len(train_logs), "n_windows": int(Xt.shape[0]),
                       "n_restricted": int(yt.sum()),
                       "current_threshold": [None if m is None else {
                           "threshold_A": m.sign_ * m.threshold_, "direction": "above" if m.sign_ > 0 else "below",
                           "youden_j": m.youden_} for m in fitted["current_threshold"].models]}


def public(res: dict[str, Any]) -> dict[str, Any]:
    """The JSON-ready result (per-frame scores left out)."""
    out = dict(res)
    out["logs"] = [{k: v for k, v in d.items() if k != "frame_scores"} for d in res.get("logs", [])]
    return out
