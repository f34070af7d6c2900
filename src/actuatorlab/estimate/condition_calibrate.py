"""Motor-condition detection, the decision side: the learned detector's per-frame scores turned into
window scores, per-log verdicts and alarms, and the calibration that chooses their smoothing and
thresholds on validation logs (docs/condition.md).

A window's restricted score is ``1 - mean_k s_k`` over its 64 frames of per-frame normal scores
s_k (:func:`learned_window_scores`); a log's channel is restricted when its mean score over the last
``verdict_s`` seconds is below the verdict threshold (:func:`log_verdicts`). Calibration
(:func:`calibrate_condition`, chosen on validation logs only, stored in the model file as
``condition_calibration``): the per-frame scores are first smoothed causally over ``smooth_s``
seconds (:func:`smooth_scores`, :func:`smooth_log_odds`), and the two 0.5 thresholds become
``window_threshold`` and ``verdict_threshold``. The per-frame alarm (:func:`alarm_timing`) is the
smoothed score below the window threshold.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ..errors import ActuatorlabError, DataError
from .condition_windows import WINDOW, window_starts

__all__ = ["learned_window_scores", "log_verdicts", "SMOOTH_GRID_S", "calibrate_condition",
           "leave_one_log_out_windows", "smooth_scores", "LOGIT_CLIP", "clipped_log_odds", "smooth_log_odds",
           "position_spread", "motion_weights", "calibrated_scores", "persistent_alarm",
           "hold_frames", "alarm_timing"]

def learned_window_scores(frame_scores: np.ndarray, starts: np.ndarray, length: int = WINDOW) -> np.ndarray:
    """Window normal scores (W, C): the mean per-frame score over each window's frames."""
    if len(starts) == 0:
        return np.zeros((0, frame_scores.shape[1]))
    idx = np.asarray(starts)[:, None] + np.arange(length)[None]
    return frame_scores[idx].mean(axis=1)


def log_verdicts(frame_scores: np.ndarray, dt: float, verdict_s: float = 5.0, threshold: float = 0.5
                 ) -> tuple[np.ndarray, np.ndarray]:
    """(mean normal score over the last ``verdict_s`` seconds (C,), restricted (C,) bool: score < ``threshold``)."""
    n = max(1, min(frame_scores.shape[0], int(round(verdict_s / dt))))
    m = frame_scores[-n:].mean(axis=0)
    return m, m < threshold


#: smoothing windows [s] tried by :func:`calibrate_condition` (0: none, the raw per-frame scores)
SMOOTH_GRID_S: tuple[float, ...] = (0.0, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0)


def _smooth_n(smooth_s: float, dt: float) -> int:
    return max(1, int(round(float(smooth_s) / float(dt))) if smooth_s > 0 else 1)


def _best_threshold(score: np.ndarray, restricted: np.ndarray, balanced: bool,
                    min_recall: float | None = None) -> tuple[float, float]:
    """(threshold, value) on normal scores (restricted iff score < threshold) maximising accuracy
    (``balanced``: (TPR + TNR) / 2, i.e. Youden's J + 1 over 2); candidates: midpoints between
    consecutive distinct scores; ties broken by the widest gap, then by the one nearest 0.5.
    ``min_recall`` (with ``balanced``): an operating point instead, the threshold of the highest
    TNR (fewest false alarms) among those whose recall (TPR) is at least ``min_recall``, the value
    returned still the balanced accuracy; when no threshold reaches it, the highest-recall one."""
    s = np.asarray(score, float).ravel()
    y = np.asarray(restricted, bool).ravel()
    u = np.unique(s)
    cand = np.r_[u[0] - 1e-6, 0.5 * (u[1:] + u[:-1]), u[-1] + 1e-6] if u.size else np.array([0.5])
    gap = np.r_[0.0, np.diff(u), 0.0] if u.size else np.array([0.0])
    p = s[None, :] < cand[:, None]                                           # (K, N) called restricted
    if balanced:
        tpr = (p & y).sum(1) / max(int(y.sum()), 1)
        tnr = (~p & ~y).sum(1) / max(int((~y).sum()), 1)
        val = 0.5 * (tpr + tnr)
        if min_recall is not None:
            ok = tpr >= float(min_recall) - 1e-12
            key = np.where(ok, tnr, -2.0 + tpr)  # feasible: fewest false alarms; else: most recall
            k = np.lexsort((np.abs(cand - 0.5), -gap, -key))[0]
            return float(cand[k]), float(val[k])
    else:
        val = (p == y).mean(1)
    k = np.lexsort((np.abs(cand - 0.5), -gap, -val))[0]
    return float(cand[k]), float(val[k])


def calibrate_condition(frame_scores: Sequence[np.ndarray], labels: Sequence[np.ndarray], dt: float, *,
                        smooth_grid_s: Sequence[float] = SMOOTH_GRID_S, verdict_s: float = 5.0,
                        min_recall: float | None = None, log_odds: bool = True,
                        weightings: dict[str, tuple[dict, Sequence[np.ndarray]]] | None = None) -> dict[str, Any]:
    """Choose the learned detector's smoothing window and thresholds on VALIDATION logs (never
    test logs): per log the raw per-frame normal scores (T, C) and the labels (C,) (True =
    restricted). Only channels restricted in some validation log count (the others have one class).

    1. ``smooth_s``: the causal moving mean (:func:`smooth_scores`) from ``smooth_grid_s`` with the
       highest window ROC AUC (64-step windows, window score = mean smoothed score); ties: shorter;
       with ``weightings`` ({name: (calibration keys, per log the weights (T, C) > 0)}) the
       weighted mean of every span is a candidate too (``smooth_weight`` = name plus those keys,
       which :func:`calibrated_scores` must apply: "motion" with ``motion_floor`` and
       ``motion_frames``, :func:`motion_weights`, built by bench/condition_recipes.py; measured
       and not adopted); ties: the plain mean; with ``log_odds`` (the
       default since 2026-12-03, docs/condition.md) every span (and weighting) is also tried as a
       mean of clipped log-odds (:func:`smooth_log_odds`, ``smooth_space`` "log_odds"); ties: the
       mean of the scores; ``log_odds=False``: the plain means only;
    2. ``window_threshold``: on those window scores, the threshold of the highest balanced
       accuracy (restricted iff score < threshold); with ``min_recall`` (an operating point the
       user states, e.g. 0.95: missing a degraded joint costs more than a false alarm) the
       threshold with the fewest false alarms among those that reach that recall on validation;
    3. ``verdict_threshold``: on the per-log mean scores of the last ``verdict_s`` seconds (of the
       smoothed scores), the threshold of the most right per-log verdicts.
    4. (a check, nothing is chosen by it) the window recall and precision the threshold rule gives
       on logs it has not seen, by leave-one-log-out (:func:`leave_one_log_out_windows`):
       ``window_recall_loo``, ``window_precision_loo``, beside the in-sample ``window_recall``.
    Returns {"smooth_s", "window_threshold", "verdict_threshold", "verdict_s", "channels_used",
    "val": {"window_auc" per smoothing, "window_balanced_accuracy", "window_recall",
    "window_recall_loo", "window_precision_loo", "loo_folds", "log_accuracy", "n_logs"}}."""
    from sklearn.metrics import roc_auc_score

    labs = np.stack([np.asarray(x, bool) for x in labels]) if len(labels) else np.zeros((0, 0), bool)
    if labs.size == 0:
        raise DataError(None, "condition calibration: no validation logs")
    cols = [c for c in range(labs.shape[1]) if 0 < labs[:, c].sum() < labs.shape[0]]
    if not cols:
        raise DataError(None, "condition calibration needs validation logs of both conditions on some channel "
                              "(restricted and normal)")
    weightings = dict(weightings or {})
    for name, (_, wts) in weightings.items():
        if len(wts) != len(frame_scores):
            raise DataError(None, f"condition calibration: the {name} weighting needs the weights of every log")
    modes = [None, *weightings]
    aucs = {}
    best: tuple | None = None
    spaces = [None, "log_odds"] if log_odds else [None]
    for sm in smooth_grid_s:
        for mode in modes:
            for space in spaces:
                if (mode is not None or space is not None) and _smooth_n(sm, dt) == 1:
                    continue
                c: dict[str, Any] = {"smooth_s": float(sm), "smooth_weight": mode, "smooth_space": space}
                ws, ys, scs = [], [], []
                n = _smooth_n(sm, dt)
                for i, (fs, lab) in enumerate(zip(frame_scores, labs)):
                    st = window_starts(len(fs))
                    wi = weightings[mode][1][i] if mode is not None else None
                    scs.append(smooth_log_odds(fs, n, wi) if space == "log_odds" else smooth_scores(fs, n, wi))
                    ws.append(learned_window_scores(scs[-1], st)[:, cols])
                    ys.append(np.tile(lab[cols], (len(st), 1)))
                w, y = np.concatenate(ws), np.concatenate(ys)
                auc = float(roc_auc_score(y.ravel(), -w.ravel())) if len(np.unique(y)) == 2 else float("nan")
                aucs[f"{float(sm):g}" + (f" {mode}" if mode else "") + (f" {space}" if space else "")] = auc
                if best is None or auc > best[0] + 1e-12:
                    best = (auc, c, w, y, ws, ys, scs)
    if best is None:
        raise DataError(None, "condition calibration: no smoothing setting could be scored")
    auc, chosen, w, y, ws, ys, scs = best
    sm = chosen["smooth_s"]
    if min_recall is not None and not 0.0 < float(min_recall) <= 1.0:
        raise DataError(None, f"condition calibration: min_recall must be in (0, 1], got {min_recall}")
    thr_w, bacc = _best_threshold(w, y, balanced=True, min_recall=min_recall)
    rec = float(((w < thr_w) & y).sum() / max(int(y.sum()), 1))
    loo = leave_one_log_out_windows(ws, ys, min_recall=min_recall)
    last = np.stack([log_verdicts(sc, dt, verdict_s)[0][cols] for sc in scs])
    thr_v, acc = _best_threshold(last, labs[:, cols], balanced=False)
    mode = chosen["smooth_weight"]
    weighting = {"smooth_weight": mode, **weightings[mode][0]} if mode is not None else {}
    if chosen["smooth_space"] == "log_odds":
        weighting["smooth_space"] = "log_odds"
    return {"smooth_s": sm, **weighting, "window_threshold": thr_w, "verdict_threshold": thr_v,
            "verdict_s": float(verdict_s),
            "channels_used": cols, "min_recall": None if min_recall is None else float(min_recall),
            "val": {"window_auc": aucs, "window_balanced_accuracy": bacc, "window_recall": rec,
                    "window_recall_loo": loo["recall"], "window_precision_loo": loo["precision"],
                    "loo_folds": loo["folds"], "log_accuracy": acc, "n_logs": int(labs.shape[0])}}


def leave_one_log_out_windows(ws: Sequence[np.ndarray], ys: Sequence[np.ndarray], *,
                              min_recall: float | None = None) -> dict[str, Any]:
    """What the window threshold rule of :func:`calibrate_condition` gives on a log it has not seen:
    for every calibration log k, the threshold is chosen on the other logs' windows (the same rule,
    ``min_recall`` included; the smoothing stays the one chosen on all logs) and applied to log k's
    windows. ws[k] (N_k, C) window scores, ys[k] (N_k, C) True = restricted. Logs whose removal
    leaves one class only are not scored (``folds`` counts the scored ones).

    Why: the in-sample recall of the threshold is optimistic by construction (the threshold sits at
    the edge of the calibration logs' windows, and a log's windows are strongly correlated). The
    pooled out-of-log predictions estimate the recall and precision on new logs of the same kind.
    Returns {"recall", "precision", "folds"} (recall / precision None when no fold was scored or no
    window was restricted / called restricted)."""
    pred, lab, folds = [], [], 0
    for k in range(len(ws)):
        rest_w = [w for j, w in enumerate(ws) if j != k]
        rest_y = [y for j, y in enumerate(ys) if j != k]
        if not rest_w or ws[k].size == 0:
            continue
        w, y = np.concatenate(rest_w), np.concatenate(rest_y)
        if y.all() or not y.any():
            continue
        t, _ = _best_threshold(w, y, balanced=True, min_recall=min_recall)
        pred.append((ws[k] < t).ravel())
        lab.append(np.asarray(ys[k], bool).ravel())
        folds += 1
    if not folds:
        return {"recall": None, "precision": None, "folds": 0}
    p, y = np.concatenate(pred), np.concatenate(lab)
    return {"recall": float((p & y).sum() / y.sum()) if y.any() else None,
            "precision": float((p & y).sum() / p.sum()) if p.any() else None, "folds": folds}


def smooth_scores(frame_scores: np.ndarray, n: int, weights: np.ndarray | None = None) -> np.ndarray:
    """Causal moving mean (T, C) of per-frame scores over the last ``n`` frames (fewer at the
    start of a log): ``out_k = mean(s_{max(0, k - n + 1)} .. s_k)``; ``n`` = 1 returns the scores.
    With ``weights`` (T, C), > 0: the weighted mean ``sum w_j s_j / sum w_j`` over the same frames
    (:func:`motion_weights`: frames where the joint moved count more)."""
    s = np.asarray(frame_scores, float)
    n = int(n)
    if n < 1:
        raise ValueError(f"smoothing window must be >= 1 frame, got {n}")
    if n == 1 or s.shape[0] == 0:
        return s
    k = np.arange(1, s.shape[0] + 1)
    lo = np.maximum(0, k - n)
    zero = np.zeros((1,) + s.shape[1:])
    if weights is None:
        cs = np.concatenate([zero, np.cumsum(s, axis=0)])
        return (cs[k] - cs[lo]) / (k - lo).reshape((-1,) + (1,) * (s.ndim - 1))
    w = np.asarray(weights, float)
    if w.shape != s.shape or not np.all(w > 0):
        raise ValueError(f"smoothing weights must be positive with the scores' shape {s.shape}, got {w.shape}")
    cw = np.concatenate([zero, np.cumsum(w, axis=0)])
    cs = np.concatenate([zero, np.cumsum(w * s, axis=0)])
    return (cs[k] - cs[lo]) / (cw[k] - cw[lo])


#: |log-odds| bound of :func:`smooth_log_odds` (a score of 4.5e-5 or 1 - 4.5e-5)
LOGIT_CLIP = 10.0


def clipped_log_odds(scores: np.ndarray) -> np.ndarray:
    """``clip(log(s / (1 - s)), -LOGIT_CLIP, LOGIT_CLIP)`` of normal scores s in [0, 1]."""
    p = np.clip(np.asarray(scores, float), 1e-12, 1.0 - 1e-12)
    return np.clip(np.log(p) - np.log1p(-p), -LOGIT_CLIP, LOGIT_CLIP)


def smooth_log_odds(frame_scores: np.ndarray, n: int, weights: np.ndarray | None = None) -> np.ndarray:
    """The causal moving mean of :func:`smooth_scores` taken in log-odds and mapped back::

        m_k = sigmoid( mean_{j=k-n+1..k} clip(logit(s_j), -10, 10) )      (weighted with ``weights``)

    A frame's log-odds is the evidence it carries (for a calibrated classifier, the log likelihood
    ratio plus the prior's log-odds), and a mean of log-odds is a geometric mean of the odds: a
    short stretch of strong evidence (a score of 1e-4 while the joint moves against the
    restriction) is not averaged away by many ambiguous frames near 0.5, as it is by the mean of
    the scores; the clip bounds what one frame can contribute. (Summing log-likelihood ratios over
    time is the sequential test of Wald, "Sequential tests of statistical hypotheses", Ann. Math.
    Statist. 1945; the mean over a sliding window is its fixed-length, forgetting form.)"""
    z = smooth_scores(clipped_log_odds(frame_scores), n, weights)
    return 1.0 / (1.0 + np.exp(-z))


def position_spread(q: np.ndarray, n: int = WINDOW) -> np.ndarray:
    """(T, C) causal standard deviation of each channel's position over its last ``n`` frames
    (fewer at the start) [rad | m]: how far the joint moved within what the detector looked at."""
    q = np.asarray(q, float)
    zero = np.zeros((1,) + q.shape[1:])
    c1 = np.concatenate([zero, np.cumsum(q, axis=0)])
    c2 = np.concatenate([zero, np.cumsum(q * q, axis=0)])
    k = np.arange(1, q.shape[0] + 1)
    lo = np.maximum(0, k - int(n))
    m = (k - lo).reshape((-1,) + (1,) * (q.ndim - 1))
    mu = (c1[k] - c1[lo]) / m
    return np.sqrt(np.maximum((c2[k] - c2[lo]) / m - mu * mu, 0.0))


def motion_weights(q: np.ndarray, floor: np.ndarray | float, n: int = WINDOW) -> np.ndarray:
    """Weights (T, C) of the motion-weighted smoothing: :func:`position_spread` over ``n`` frames
    plus ``floor`` (per channel, > 0). A restriction that resists motion shows only while the
    joint moves; frames where it stood still carry little evidence either way, so the smoothed
    score keeps what the last motion said instead of drifting back to "normal"."""
    f = np.asarray(floor, float)
    if not np.all(f > 0):
        raise ValueError(f"motion weight floor must be > 0, got {floor}")
    return position_spread(q, n) + f


def calibrated_scores(frame_scores: np.ndarray, calibration: dict | None, dt: float,
                      q: np.ndarray | None = None) -> np.ndarray:
    """The per-frame scores (T, C) smoothed as ``calibration`` says (:func:`calibrate_condition`'s
    dict; None or {}: unchanged). A motion-weighted calibration needs the positions ``q`` (T, C)."""
    cal = calibration or {}
    n = _smooth_n(float(cal.get("smooth_s", 0.0)), dt)
    space = cal.get("smooth_space")
    if space not in (None, "log_odds"):
        raise DataError(None, f"condition calibration: unknown smooth_space {space!r} (known: 'log_odds' or none)")
    smooth = smooth_log_odds if space == "log_odds" and n > 1 else smooth_scores
    if cal.get("smooth_weight") == "motion" and n > 1:
        if q is None:
            raise DataError(None, "a motion-weighted condition calibration needs the joint positions")
        return smooth(frame_scores, n, motion_weights(q, np.asarray(cal["motion_floor"], float),
                                                      int(cal.get("motion_frames", WINDOW))))
    return smooth(frame_scores, n)


def persistent_alarm(below: np.ndarray, hold_frames: int) -> np.ndarray:
    """An alarm that needs ``hold_frames`` consecutive flagged frames (an on-delay, as alarm
    systems debounce a noisy condition): a_k = b_{k-h+1} and ... and b_k for h = hold_frames >= 2;
    h <= 1 returns ``below`` unchanged. Causal; ``below`` (T, ...) bool, time first. Implemented
    with the run length r_k = r_{k-1} + 1 if b_k else 0, a_k = r_k >= h."""
    b = np.asarray(below, bool)
    h = int(hold_frames)
    if h <= 1 or b.shape[0] == 0:
        return b.copy()
    cs = np.cumsum(b, axis=0)
    run = cs - np.maximum.accumulate(np.where(b, 0, cs), axis=0)
    return run >= h


def hold_frames(hold_s: float, dt: float) -> int:
    """Frames of an alarm's on-delay of ``hold_s`` seconds (0 for none); a negative hold is an error."""
    if not np.isfinite(hold_s) or hold_s < 0:
        raise ActuatorlabError(f"the alarm hold must be a time >= 0 s, got {hold_s!r}")
    return int(round(float(hold_s) / float(dt)))


def alarm_timing(frame_scores: Sequence[np.ndarray], labels: Sequence[np.ndarray], dt: float,
                 threshold: float, warmup_frames: int = 0, hold_frames: int = 0) -> dict[str, Any]:
    """What the detector's per-frame alarm (:class:`~actuatorlab.estimate.monitor.ConditionMonitor`'s
    ``alarm``: the calibrated, smoothed normal score (T, C) below ``threshold``, never in a log's
    first ``warmup_frames`` frames, and with ``hold_frames`` >= 2 only once it has been below for
    that many consecutive frames after the warm-up, :func:`persistent_alarm`) does over time, per
    (log, channel):

    * restricted channels: ``detected`` (an alarm at some frame), ``first_alarm_s`` (time of the
      first alarmed frame from the log's start [s]: median, max and per channel; undetected ones
      are left out of the median and max and counted in ``missed``), ``alarm_time_fraction``;
    * normal channels: ``with_alarm`` (how many ever alarm), ``alarm_time_fraction`` (alarmed
      frames / frames after the warm-up), ``false_alarms_per_hour`` (alarm onsets, i.e. an alarmed
      frame after a clear one, per hour of normal-channel time after the warm-up).

    Times are from the log's first frame (a first alarm is never earlier than the warm-up).

    ``labels`` (C,) bool per log (True = restricted)."""
    first, det_frames, det_total = [], 0, 0
    n_norm = n_norm_alarm = norm_frames = norm_alarmed = onsets = 0
    missed = 0
    w0 = max(0, int(warmup_frames))
    for fs, lab in zip(frame_scores, labels):
        a = np.asarray(fs, float) < float(threshold)
        a[:w0] = False
        a = persistent_alarm(a, hold_frames)
        for c, r in enumerate(np.asarray(lab, bool)):
            ac = a[:, c]
            live = max(0, ac.size - w0)
            if r:
                det_total += live
                det_frames += int(ac.sum())
                if ac.any():
                    first.append(float(np.argmax(ac)) * float(dt))
                else:
                    missed += 1
            else:
                n_norm += 1
                n_norm_alarm += int(ac.any())
                norm_frames += live
                norm_alarmed += int(ac.sum())
                onsets += int(ac[:1].sum() + np.sum(ac[1:] & ~ac[:-1]))
    hours = norm_frames * float(dt) / 3600.0
    return {"threshold": float(threshold), "warmup_s": w0 * float(dt),
            "hold_s": int(hold_frames) * float(dt) if int(hold_frames) >= 2 else 0.0,
            "restricted": {"n": len(first) + missed, "detected": len(first), "missed": missed,
                           "first_alarm_s": {"median": float(np.median(first)) if first else None,
                                             "max": float(np.max(first)) if first else None,
                                             "values": [round(v, 3) for v in first]},
                           "alarm_time_fraction": det_frames / det_total if det_total else None},
            "normal": {"n": n_norm, "with_alarm": n_norm_alarm,
                       "alarm_time_fraction": norm_alarmed / norm_frames if norm_frames else None,
                       "false_alarms_per_hour": onsets / hours if hours > 0 else None}}
