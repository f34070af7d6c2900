"""Options of bench/condition.py that were measured and not adopted as defaults (bench/journal/condition.md):
``--calibrate-oof K`` calibrates the detector on out-of-fold scores of the training logs;
``--motion-weighting`` also tries the motion-weighted score smoothing in the calibration."""

from __future__ import annotations

import dataclasses

import numpy as np

from actuatorlab.errors import DataError
from actuatorlab.estimate.condition_calibrate import position_spread
from actuatorlab.estimate.condition_windows import WINDOW, condition_log
from actuatorlab.estimate.condition_train import ConditionTrainConfig, learned_frame_scores_batched, train_condition_head


def out_of_fold_frame_scores(robot, model, trajs, cfg=None, *, folds: int = 5, seed: int = 0,
                             val_trajs=None) -> tuple[list[np.ndarray], list[int]]:
    """Cross-fitted per-frame normal scores (T, C) of the TRAINING logs ``trajs``, to calibrate the
    detector on many more logs than the validation split holds (for :func:`calibrate_condition`).

    The logs are grouped (a restricted / normal twin pair of ``synth --restricted-pairs``, i.e. the
    same ``pair`` condition, is one group; any other log is its own group), the groups are shuffled
    with ``seed`` and dealt into ``folds`` folds. For each fold, ``model`` as given (untrained:
    its initial weights and normalizer) is trained by :func:`train_condition_head` with
    ``cfg`` (its seed replaced per fold) and ``val_trajs`` for its early stopping (never test logs) on the logs of the other folds, then scores the fold's logs one
    frame window at a time (:func:`learned_frame_scores_batched`). Every log is thus scored by a
    detector that saw neither it nor its twin, trained like the final one on 1 - 1/folds of the
    data. This is cross-validated threshold selection (e.g. Hastie, Tibshirani & Friedman, The
    Elements of Statistical Learning, 2nd ed., section 7.10). Returns (scores per log, fold per log)."""
    if int(folds) < 2:
        raise ValueError(f"out-of-fold scores need at least 2 folds, got {folds}")
    trajs = list(trajs)
    pairs = [str(t.conditions.get("pair", "none")) for t in trajs]
    groups = [p if p != "none" else f"log:{t.name}" for p, t in zip(pairs, trajs)]
    uniq = sorted(set(groups))
    if len(uniq) < folds:
        raise DataError(None, f"out-of-fold scores: {len(uniq)} log groups for {folds} folds")
    order = np.random.default_rng([int(seed), 11]).permutation(len(uniq))
    fold_of = {uniq[g]: k % int(folds) for k, g in enumerate(order)}
    fold = [fold_of[g] for g in groups]
    ch = model.layout.channels
    scores: list[np.ndarray | None] = [None] * len(trajs)
    for f in range(int(folds)):
        tr = [t for t, k in zip(trajs, fold) if k != f]
        m, _ = train_condition_head(robot, model, tr, dataclasses.replace(cfg or ConditionTrainConfig(),
                                                                         seed=int(seed) * 1000 + f + 1),
                                    val_trajs=val_trajs)
        for i, (t, k) in enumerate(zip(trajs, fold)):
            if k == f:
                scores[i] = learned_frame_scores_batched(robot, m, condition_log(robot, t, ch))
    return scores, fold


#: the motion floor of :func:`motion_weighting`: this fraction of the median position spread of
#: the calibration logs, per channel
MOTION_FLOOR_FRACTION = 0.1


def motion_weighting(positions) -> dict:
    """``calibrate_condition(weightings=...)`` for the motion-weighted smoothing: per log the weights
    position spread + floor (:func:`~actuatorlab.estimate.condition_calibrate.motion_weights`, the
    floor ``MOTION_FLOOR_FRACTION`` x the median position spread of these logs per channel), stored
    as ``smooth_weight`` "motion" with ``motion_floor`` and ``motion_frames`` when chosen.
    ``positions``: per calibration log the joint positions (T, C)."""
    spreads = [position_spread(q) for q in positions]
    floor = np.maximum(MOTION_FLOOR_FRACTION * np.median(np.concatenate(spreads), axis=0), 1e-9)
    return {"motion": ({"motion_floor": [float(x) for x in floor], "motion_frames": WINDOW},
                       [sp + floor for sp in spreads])}
