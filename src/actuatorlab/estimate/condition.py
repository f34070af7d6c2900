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

Baselines, one classifier per channel, fitted on the training logs' windows only
    * ``current_threshold``: one threshold on the mean absolute current of the window
      (feature 2 below) and its direction, chosen on the training windows to maximise Youden's
      J = TPR - FPR (:class:`CurrentThreshold`);
    * ``svm``: ``StandardScaler -> SVC(kernel="rbf", C=1, gamma="scale", class_weight="balanced")``;
    * ``random_forest``: ``StandardScaler -> RandomForestClassifier(200 trees, max_depth 15,
      class_weight="balanced")``;
    the scaler sits inside an sklearn ``Pipeline``, so its mean and scale come from the training
    windows by construction. A channel whose training windows hold one class only (no restricted
    example) gets a constant prediction of that class (score -1e9 for "normal"), for every
    baseline. Window scores: SVM ``decision_function``, forest ``P(restricted) - 0.5``, threshold
    ``sign (x - threshold)``; positive means restricted.

Metrics (:func:`classification_metrics`): accuracy, precision, recall of the restricted class and
ROC AUC (``sklearn.metrics.roc_auc_score``) over every scored (window, channel) pair; also per
channel where both classes occur.

The twenty features of a window and channel (:data:`FEATURE_NAMES`, :func:`window_features`),
with i the measured current [A], e = q* - q the tracking error [rad], q the position [rad],
v the measured velocity [rad/s], N = 64 samples, t_n = n dt, dt the control period [s]; mean,
std (population), cov, var over the window; LS slope of y on x is cov(x, y) / (var(x) + eps)::

     current statistics
      1 i_mean        mean(i)                                     [A]
      2 i_absmean     mean(|i|)                                   [A]
      3 i_std         std(i)                                      [A]
      4 i_rms         sqrt(mean(i^2))                             [A]
      5 i_p2p         max(i) - min(i)                             [A]
     tracking-error statistics
      6 e_mean        mean(e)                                     [rad]
      7 e_absmean     mean(|e|)                                   [rad]
      8 e_std         std(e)                                      [rad]
      9 e_absmax      max(|e|)                                    [rad]
     temporal
     10 i_trend       LS slope of i on t                          [A/s]
     11 e_trend       LS slope of e on t                          [rad/s]
     12 i_crossings   share of n in 1..N-1 with (i_n - mean i)(i_{n-1} - mean i) < 0   [-]
     13 q_range       max(q) - min(q)                             [rad]
     14 v_absmean     mean(|v|)                                   [rad/s]
     spectral (P_k = |rfft(i - mean i)|^2, k = 1..N/2, f_k = k / (N dt))
     15 i_centroid    sum f_k P_k / sum P_k                       [Hz]
     16 i_lowband     sum_{f_k <= 5 Hz} P_k / sum P_k             [-]
     17 i_entropy     -sum p_k ln p_k / ln(N/2),  p_k = P_k / sum P_k   [-]
     physics-inspired (current ~ stiffness, damping and power of the load)
     18 k_current     LS slope of i on q  (eps = 1e-6 rad^2)      [A/rad]
     19 b_current     LS slope of i on v  (eps = 1e-6 rad^2/s^2)  [A s/rad]
     20 power         mean(i v)                                   [A rad/s]

A flat spectrum (sum P_k = 0, constant current) gives centroid 0, low-band share 1, entropy 0.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Callable, Iterable, Sequence

import numpy as np

from ..errors import ActuatorlabError, DataError, ModelError
from ..sim.arm_data import log_arrays
from ..learned.arm import arm_log, DEFAULT_FEATURES, make_learned_arm, with_residual_inputs
from ..sim.arm_learned import frames_of_log, OnlineEstimator, RESIDUAL_FEATURE, TELEMETRY
from ..models.features import fit_normalizer, Normalizer, sliding_windows
from ..errors import UnknownNameError
from ..sim.force import ForcePrior

__all__ = ["WINDOW", "STRIDE", "METHODS", "FEATURE_NAMES", "ConditionLog", "condition_log", "window_starts",
           "window_features", "log_windows", "CurrentThreshold", "make_baselines", "ChannelModels",
           "fit_baselines", "classification_metrics", "learned_frame_scores", "learned_frame_scores_batched",
           "learned_window_scores", "log_verdicts", "smooth_scores", "position_spread", "motion_weights",
           "calibrated_scores", "calibrate_condition", "leave_one_log_out_windows", "twin_pairs", "alarm_timing",
           "persistent_alarm", "hold_frames",
           "smooth_log_odds", "clipped_log_odds", "LOGIT_CLIP",
           "make_condition_model", "train_condition_head", "run_condition"]

WINDOW = 64       # [control steps] window length
STRIDE = 32       # [control steps] 50 % overlap
METHODS = ("learned", "current_threshold", "svm", "random_forest")
FEATURE_NAMES: tuple[str, ...] = (
    "i_mean", "i_absmean", "i_std", "i_rms", "i_p2p",
    "e_mean", "e_absmean", "e_std", "e_absmax",
    "i_trend", "e_trend", "i_crossings", "q_range", "v_absmean",
    "i_centroid", "i_lowband", "i_entropy",
    "k_current", "b_current", "power",
)
LOW_BAND_HZ = 5.0
_NORMAL_SCORE = -1e9  # score of a constant "normal" prediction (ranks below every fitted score)


# ----------------------------------------------------------------------------------------------
# Logs and windows
# ----------------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class ConditionLog:
    """One multi-joint log for condition detection, on the control grid.

    name: log name; source: its file (or name); channels: C joint names (the joints the log records);
    dt: control period [s]; q_target, q: (T, C) [rad | m]; dq: (T, C) [rad/s | m/s];
    current: (T, C) [A]; restricted: (C,) bool label (True = restricted, the positive class);
    traj: the :class:`~actuatorlab.logs.format.Trajectory` (for the learned head's inputs).
    """

    name: str
    source: str
    channels: tuple[str, ...]
    dt: float
    q_target: np.ndarray
    q: np.ndarray
    dq: np.ndarray
    current: np.ndarray
    restricted: np.ndarray
    traj: Any = None


def condition_log(robot, traj, channels: Sequence[str] | None = None) -> ConditionLog:
    """Read one log (robot ordered, ``channels`` default: the joints the log records); a missing
    ``current/<joint>`` channel or a NaN in it is a one-line :class:`DataError` naming the log."""

    b = log_arrays(robot, traj)
    where = traj.source_file or traj.name
    if channels is None:
        channels = tuple(j for j, s in zip(robot.joint_names, b.scored) if s)
    channels = tuple(channels)
    idx = [robot.index(j) for j in channels]
    cur = np.zeros((b.q_meas.shape[0], len(channels)))
    for c, j in enumerate(channels):
        if not traj.has(f"current/{j}"):
            raise DataError(where, f"no 'current/{j}' channel: condition detection reads the current of every joint")
        cur[:, c] = np.asarray(traj[f"current/{j}"], float)
    if not np.all(np.isfinite(cur)):
        raise DataError(where, "current channels contain NaN or inf")
    r = str(traj.conditions.get("restricted", "none"))
    lab = np.array([r == f"restricted_{j}" for j in channels])
    return ConditionLog(traj.name, str(where), channels, float(robot.control_dt), b.inputs.q_target[:, idx],
                        b.q_meas[:, idx], b.dq_meas[:, idx], cur, lab, traj)


def window_starts(T: int, length: int = WINDOW, stride: int = STRIDE) -> np.ndarray:
    """Start indices of the full windows of ``length`` samples every ``stride`` samples in a log
    of ``T`` samples: 0, stride, 2 stride, ... while start + length <= T."""
    if length < 1 or stride < 1:
        raise ValueError(f"window length and stride must be >= 1, got {length}, {stride}")
    return np.arange(0, max(int(T) - int(length) + 1, 0), int(stride), dtype=int)


def _ls_slope(x: np.ndarray, y: np.ndarray, eps: float) -> np.ndarray:
    xc = x - x.mean(-1, keepdims=True)
    yc = y - y.mean(-1, keepdims=True)
    return (xc * yc).mean(-1) / ((xc * xc).mean(-1) + eps)


def window_features(i, e, q, v, dt: float) -> np.ndarray:
    """The 20 features of the module docstring for windows ``(..., N)`` of current ``i`` [A],
    tracking error ``e`` [rad], position ``q`` [rad] and velocity ``v`` [rad/s] sampled every
    ``dt`` [s]; returns ``(..., 20)`` in :data:`FEATURE_NAMES` order."""
    i, e, q, v = (np.asarray(a, float) for a in (i, e, q, v))
    N = i.shape[-1]
    t = np.arange(N) * float(dt)
    tt = np.broadcast_to(t, i.shape)
    ic = i - i.mean(-1, keepdims=True)
    P = np.abs(np.fft.rfft(ic, axis=-1)) ** 2
    P = P[..., 1:N // 2 + 1]
    f = np.arange(1, N // 2 + 1) / (N * float(dt))
    tot = P.sum(-1)
    safe = np.where(tot > 0, tot, 1.0)
    p = P / safe[..., None]
    with np.errstate(divide="ignore", invalid="ignore"):
        ent = -np.where(p > 0, p * np.log(np.where(p > 0, p, 1.0)), 0.0).sum(-1) / math.log(N // 2)
    cols = [
        i.mean(-1), np.abs(i).mean(-1), i.std(-1), np.sqrt((i * i).mean(-1)), i.max(-1) - i.min(-1),
        e.mean(-1), np.abs(e).mean(-1), e.std(-1), np.abs(e).max(-1),
        _ls_slope(tt, i, 0.0), _ls_slope(tt, e, 0.0),
        (ic[..., 1:] * ic[..., :-1] < 0).mean(-1), q.max(-1) - q.min(-1), np.abs(v).mean(-1),
        np.where(tot > 0, (f * P).sum(-1) / safe, 0.0),
        np.where(tot > 0, P[..., f <= LOW_BAND_HZ].sum(-1) / safe, 1.0),
        np.where(tot > 0, ent, 0.0),
        _ls_slope(q, i, 1e-6), _ls_slope(v, i, 1e-6), (i * v).mean(-1),
    ]
    return np.stack(cols, axis=-1)


def log_windows(lg: ConditionLog, length: int = WINDOW, stride: int = STRIDE
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(features (W, C, 20), labels (W, C) 1 = restricted, starts (W,)) of one log."""
    s = window_starts(lg.q.shape[0], length, stride)
    idx = s[:, None] + np.arange(length)[None]                       # (W, N)
    cut = lambda a: np.moveaxis(a[idx], 1, 2)                        # (W, N, C) -> (W, C, N)  # noqa: E731
    X = window_features(cut(lg.current), cut(lg.q_target - lg.q), cut(lg.q), cut(lg.dq), lg.dt)
    y = np.tile(lg.restricted.astype(int), (len(s), 1))
    return X, y, s


def stack_windows(logs: Iterable[ConditionLog]) -> tuple[np.ndarray, np.ndarray, list[tuple[int, np.ndarray]]]:
    """All windows of ``logs``: X (W, C, 20), y (W, C), and per log (index, starts)."""
    Xs, ys, where = [], [], []
    for k, lg in enumerate(logs):
        X, y, s = log_windows(lg)
        Xs.append(X)
        ys.append(y)
        where.append((k, s))
    C = len(logs[0].channels) if logs else 0
    X = np.concatenate(Xs) if Xs else np.zeros((0, C, len(FEATURE_NAMES)))
    y = np.concatenate(ys) if ys else np.zeros((0, C), int)
    return X, y, where


# ----------------------------------------------------------------------------------------------
# Baselines
# ----------------------------------------------------------------------------------------------

class CurrentThreshold:
    """``restricted iff sign * (x - threshold) >= 0`` on one feature x (default: mean absolute
    current, feature 2), with the threshold and the direction sign in {+1, -1} that maximise
    Youden's J = TPR - FPR on the training windows (candidates: sklearn's ``roc_curve``
    thresholds; the chosen one is placed midway to the next lower training value).
    sklearn-style: ``fit(X, y)``, ``decision_function(X)``, ``predict(X)``."""

    def __init__(self, feature: int = FEATURE_NAMES.index("i_absmean")):
        self.feature = int(feature)

    def fit(self, X, y) -> "CurrentThreshold":
        from sklearn.metrics import roc_curve

        x = np.asarray(X, float)[:, self.feature]
        y = np.asarray(y, int)
        best = (-np.inf, 1.0, 0.0)
        for sign in (1.0, -1.0):
            fpr, tpr, thr = roc_curve(y, sign * x)
            ok = np.isfinite(thr)
            j = (tpr - fpr)[ok]
            k = int(np.argmax(j))
            if j[k] > best[0]:
                t = float(thr[ok][k])
                below = (sign * x)[sign * x < t]  # midway to the next training value below it
                best = (float(j[k]), sign, 0.5 * (t + below.max()) if below.size else t)
        self.youden_, self.sign_, self.threshold_ = best  # threshold on sign * x
        return self

    def decision_function(self, X) -> np.ndarray:
        return self.sign_ * np.asarray(X, float)[:, self.feature] - self.threshold_ + 0.0

    def predict(self, X) -> np.ndarray:
        return (self.decision_function(X) >= 0).astype(int)


def make_baselines(seed: int = 0) -> dict[str, Callable[[], Any]]:
    """method -> a fresh unfitted estimator; the scaler is inside each Pipeline (fitted on the
    training windows only, applied unchanged to test windows)."""
    from sklearn.ensemble import RandomForestClassifier
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler
    from sklearn.svm import SVC

    return {
        "current_threshold": lambda: CurrentThreshold(),
        "svm": lambda: make_pipeline(StandardScaler(), SVC(kernel="rbf", C=1.0, gamma="scale",
                                                           class_weight="balanced")),
        "random_forest": lambda: make_pipeline(StandardScaler(), RandomForestClassifier(
            n_estimators=200, max_depth=15, class_weight="balanced", random_state=int(seed), n_jobs=1)),
    }


@dataclasses.dataclass
class ChannelModels:
    """One fitted estimator per channel (None: a constant prediction of ``constant[c]``)."""

    method: str
    models: list
    constant: list

    def scores(self, X: np.ndarray) -> np.ndarray:
        """Window scores (W, C) for features (W, C, 20); positive = restricted."""
        out = np.zeros(X.shape[:2])
        for c, m in enumerate(self.models):
            if m is None:
                out[:, c] = 1.0 if self.constant[c] else _NORMAL_SCORE
            elif hasattr(m, "predict_proba"):
                out[:, c] = m.predict_proba(X[:, c])[:, list(m.classes_).index(1)] - 0.5
            else:
                out[:, c] = m.decision_function(X[:, c])
        return out


def fit_baselines(X: np.ndarray, y: np.ndarray, seed: int = 0,
                  methods: Sequence[str] = ("current_threshold", "svm", "random_forest")) -> dict[str, ChannelModels]:
    """Fit every baseline per channel on TRAINING windows X (W, C, 20), y (W, C)."""
    if X.shape[0] == 0:
        raise DataError(None, "condition baselines: the training logs give no 64-step window")
    make = make_baselines(seed)
    out = {}
    for name in methods:
        models, const = [], []
        for c in range(X.shape[1]):
            yc = y[:, c]
            if yc.min() == yc.max():
                models.append(None)
                const.append(int(yc[0]))
            else:
                models.append(make[name]().fit(X[:, c], yc))
                const.append(None)
        out[name] = ChannelModels(name, models, const)
    return out


def classification_metrics(y: np.ndarray, score: np.ndarray, pred: np.ndarray) -> dict[str, Any]:
    """accuracy, precision, recall (restricted = positive), ROC AUC (None when one class only),
    counts; arrays of equal shape, flattened."""
    from sklearn.metrics import accuracy_score, precision_score, recall_score, roc_auc_score

    y, s, p = (np.asarray(a).reshape(-1) for a in (y, score, pred))
    two = len(np.unique(y)) == 2
    return {"accuracy": float(accuracy_score(y, p)) if y.size else None,
            "precision": float(precision_score(y, p, zero_division=0)) if y.size else None,
            "recall": float(recall_score(y, p, zero_division=0)) if y.size else None,
            "auc": float(roc_auc_score(y, s)) if two else None,
            "n_windows": int(y.size), "n_restricted": int(y.sum())}


# ----------------------------------------------------------------------------------------------
# Learned head
# ----------------------------------------------------------------------------------------------

def learned_frame_scores(robot, model, lg: ConditionLog, estimator=None) -> np.ndarray:
    """Per-frame condition scores (T, C) (1 = normal) of one log through the causal
    :class:`~actuatorlab.sim.arm_learned.OnlineEstimator` (channels in the model's order)."""

    est = estimator or OnlineEstimator(model)
    est.reset()
    a = arm_log(robot, with_residual_inputs(robot, model, [lg.traj])[0], model.layout.channels,
                model.layout.per_channel)
    b = a.base
    out = np.zeros((b.q_meas.shape[0], model.layout.n_channels))
    for k in range(b.q_meas.shape[0]):
        out[k] = est.step(b.inputs.q_target[k], b.q_meas[k], b.dq_meas[k], b.inputs.v_supply[k], b.inputs.enable[k],
                          a.telemetry[k])["condition"]
    return out


def learned_frame_scores_batched(robot, model, lg: ConditionLog, chunk: int = 2048) -> np.ndarray:
    """The same per-frame scores as :func:`learned_frame_scores` (T, C) (1 = normal), computed at
    once from the log's causal teacher-forced windows (frames before the first are copies of it,
    as :class:`~actuatorlab.sim.arm_learned.OnlineEstimator` starts) in batches of ``chunk``:
    for calibration and validation, where one frame at a time would be slow."""
    import equinox as eqx
    import jax
    import jax.numpy as jnp

    X, _ = _teacher_forced(robot, model, [lg.traj])
    net, norm = model.net, model.normalizer
    f = eqx.filter_jit(lambda x: jax.nn.sigmoid(jax.vmap(lambda w: net(norm.apply(w)).condition_logit)(x)))
    return np.concatenate([np.asarray(f(jnp.asarray(X[a:a + chunk])), float) for a in range(0, X.shape[0], chunk)])


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
                        min_recall: float | None = None, positions: Sequence[np.ndarray] | None = None,
                        motion_weighting: bool = False, log_odds: bool = True) -> dict[str, Any]:
    """Choose the learned detector's smoothing window and thresholds on VALIDATION logs (never
    test logs): per log the raw per-frame normal scores (T, C) and the labels (C,) (True =
    restricted). Only channels restricted in some validation log count (the others have one class).

    1. ``smooth_s``: the causal moving mean (:func:`smooth_scores`) from ``smooth_grid_s`` with the
       highest window ROC AUC (64-step windows, window score = mean smoothed score); ties: shorter;
       with ``motion_weighting`` (needs ``positions``: per log the joint positions (T, C)) the
       motion-weighted mean of every span is a candidate too (``smooth_weight`` "motion",
       :func:`motion_weights` with ``motion_floor`` = ``MOTION_FLOOR_FRACTION`` x the median
       position spread of these logs per channel); ties: the plain mean; with ``log_odds`` (the
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
    base: dict[str, Any] = {}
    modes = [None]
    if motion_weighting:
        if positions is None or len(positions) != len(frame_scores):
            raise DataError(None, "condition calibration: motion weighting needs the positions of every log")
        spreads = [position_spread(q) for q in positions]
        floor = np.maximum(MOTION_FLOOR_FRACTION * np.median(np.concatenate(spreads), axis=0), 1e-9)
        base = {"motion_floor": [float(x) for x in floor], "motion_frames": WINDOW}
        weights = [sp + floor for sp in spreads]  # = motion_weights(q, floor), computed once per log
        modes.append("motion")
    aucs = {}
    best = None
    spaces = [None, "log_odds"] if log_odds else [None]
    for sm in smooth_grid_s:
        for mode in modes:
            for space in spaces:
                if (mode is not None or space is not None) and _smooth_n(sm, dt) == 1:
                    continue
                c = {"smooth_s": float(sm), "smooth_weight": mode, "smooth_space": space, **base}
                ws, ys, scs = [], [], []
                n = _smooth_n(sm, dt)
                for i, (fs, lab) in enumerate(zip(frame_scores, labs)):
                    st = window_starts(len(fs))
                    wi = weights[i] if mode == "motion" else None
                    scs.append(smooth_log_odds(fs, n, wi) if space == "log_odds" else smooth_scores(fs, n, wi))
                    ws.append(learned_window_scores(scs[-1], st)[:, cols])
                    ys.append(np.tile(lab[cols], (len(st), 1)))
                w, y = np.concatenate(ws), np.concatenate(ys)
                auc = float(roc_auc_score(y.ravel(), -w.ravel())) if len(np.unique(y)) == 2 else float("nan")
                aucs[f"{float(sm):g}" + (f" {mode}" if mode else "") + (f" {space}" if space else "")] = auc
                if best is None or auc > best[0] + 1e-12:
                    best = (auc, c, w, y, ws, ys, scs)
    auc, chosen, w, y, ws, ys, scs = best
    sm = chosen["smooth_s"]
    if min_recall is not None and not 0.0 < float(min_recall) <= 1.0:
        raise DataError(None, f"condition calibration: min_recall must be in (0, 1], got {min_recall}")
    thr_w, bacc = _best_threshold(w, y, balanced=True, min_recall=min_recall)
    rec = float(((w < thr_w) & y).sum() / max(int(y.sum()), 1))
    loo = leave_one_log_out_windows(ws, ys, min_recall=min_recall)
    last = np.stack([log_verdicts(sc, dt, verdict_s)[0][cols] for sc in scs])
    thr_v, acc = _best_threshold(last, labs[:, cols], balanced=False)
    weighting = ({"smooth_weight": "motion", **base} if chosen["smooth_weight"] == "motion" else {})
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


def _teacher_forced(robot, model, trajs, *, spans: bool = False):
    """Windows (N, H + 1, F) of measured frames (the causal window of every frame) and condition
    labels (N, C) (1 = normal) of the logs; with ``spans`` also each log's (start, stop) rows."""

    xs, ys, sp, n = [], [], [], 0
    for t in with_residual_inputs(robot, model, trajs):
        a = arm_log(robot, t, model.layout.channels, model.layout.per_channel)
        b = a.base
        fr = frames_of_log(model, b.inputs.q_target, b.q_meas, b.dq_meas, b.inputs.v_supply, b.inputs.enable,
                           a.telemetry)
        xs.append(np.asarray(sliding_windows(fr, model.layout.history)))
        ys.append(np.tile(a.condition, (fr.shape[0], 1)))
        sp.append((n, n + fr.shape[0]))
        n += fr.shape[0]
    X, Y = np.concatenate(xs).astype(np.float32), np.concatenate(ys).astype(np.float32)
    return (X, Y, sp) if spans else (X, Y)


def twin_pairs(trajs, spans: Sequence[tuple[int, int]]) -> np.ndarray:
    """Frame-aligned twin rows (P, 2) = (restricted row, normal row) of the restricted / normal
    twins among ``trajs`` (``synth --restricted-pairs``: a normal log whose ``pair`` condition names
    a restricted log with the same commands); ``spans``: each log's (start, stop) rows. Frame k of
    one twin is paired with frame k of the other (up to the shorter log). (0, 2) when no twins."""
    by_name = {t.name: k for k, t in enumerate(trajs)}
    rows = []
    for k, t in enumerate(trajs):
        r = str(t.conditions.get("restricted", "none"))
        mate = by_name.get(str(t.conditions.get("pair", "none")))
        if r != "none" or mate is None or mate == k or str(trajs[mate].conditions.get("restricted", "none")) == "none":
            continue
        (a0, a1), (b0, b1) = spans[mate], spans[k]
        n = min(a1 - a0, b1 - b0)
        rows.append(np.stack([np.arange(a0, a0 + n), np.arange(b0, b0 + n)], axis=1))
    return np.concatenate(rows) if rows else np.zeros((0, 2), int)


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


#: the motion floor of :func:`calibrate_condition`: this fraction of the median position spread
#: of the calibration logs, per channel
MOTION_FLOOR_FRACTION = 0.1


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


def make_condition_model(robot, trajs, *, arch: str = "transformer", seed: int = 0, history: int = 8,
                         sizes: dict | None = None, per_channel: Sequence[str] | None = None,
                         residual_input=None):
    """A fresh learned whole-robot model (:func:`~actuatorlab.learned.arm.make_learned_arm`, the
    default feature layout of ``train --robot``) whose normalizer is fitted on the measured frames
    of ``trajs`` (training logs only), for :func:`train_condition_head` with ``scope="net"`` when no
    model trained through the simulator is at hand. Its effort head is untrained (effort scale 1):
    use it as a condition detector, not as an actuator. ``per_channel``: the per-channel features
    (default: ``train --robot``'s, those the logs carry). For ``arch="window_stats"`` the window
    means of the absolute positions (``q``, ``q_target``) are left out unless ``sizes`` sets
    ``drop_mean``: the net then sees how the joint moves and loads, not where it is.

    With ``tau_ext`` among ``per_channel`` the model reads the estimated external joint torque of
    ``residual_input`` (a :class:`~actuatorlab.sim.force.ForcePrior`; default: ``id_friction``
    calibrated on the free-motion logs among ``trajs``, which must be training logs), stored with
    the model (docs/condition.md, "The residual input")."""
    import jax

    trajs = list(trajs)
    if not trajs:
        raise DataError(None, "no training logs")
    scored = log_arrays(robot, trajs[0]).scored
    channels = tuple(j for j, s in zip(robot.joint_names, scored) if s)
    feats = tuple(per_channel or [f for f in DEFAULT_FEATURES if f not in TELEMETRY or all(
        trajs[0].has(f"{TELEMETRY[f]}/{j}") for j in channels)])
    F = len(channels) * len(feats)
    if RESIDUAL_FEATURE in feats and residual_input is None:
        residual_input = ForcePrior.fit(robot, "id_friction", trajs)
    sizes = dict(sizes or {})
    if arch == "window_stats" and "drop_mean" not in sizes:
        sizes["drop_mean"] = sum(1 << k for k, f in enumerate(feats) if f in ("q", "q_target"))
    tmp = make_learned_arm(robot, "mlp", channels=channels, per_channel=feats,
                           normalizer=Normalizer(np.zeros(F), np.ones(F)), effort_scale=1.0, history=history,
                           width=4, depth=1, d=4, head_width=4)
    tmp = dataclasses.replace(tmp, residual_input=residual_input)
    trajs = with_residual_inputs(robot, tmp, trajs)  # logs that carry the channels are kept as they are
    frames = []
    for t in trajs:
        a = arm_log(robot, t, channels, feats)
        b = a.base
        frames.append(frames_of_log(tmp, b.inputs.q_target, b.q_meas, b.dq_meas, b.inputs.v_supply, b.inputs.enable,
                                    a.telemetry))
    model = make_learned_arm(robot, arch, channels=channels, per_channel=feats,
                             normalizer=fit_normalizer(np.concatenate(frames)), effort_scale=1.0, history=history,
                             key=jax.random.PRNGKey(int(seed)), **sizes)
    return dataclasses.replace(model, residual_input=residual_input) if residual_input is not None else model


def train_condition_head(robot, model, trajs, *, steps: int = 300, batch: int = 256, lr: float = 1e-3,
                         seed: int = 0, scope: str = "head", weight_decay: float = 1e-4, val_trajs=None,
                         eval_every: int = 50, progress: Callable[[int, int, float], None] | None = None,
                         pairs: float = 0.0, rank_weight: float = 0.0, gain_jitter: float = 0.0, noise: float = 0.0,
                         select: str = "loss"):
    """Supervised training of the condition head on teacher-forced frames (no simulator).

    Every frame k of every training log gives the causal window of MEASURED frames
    ``(frame_{k-H} .. frame_k)`` (as :class:`~actuatorlab.sim.arm_learned.OnlineEstimator` and
    ``infer`` see them on hardware) and the label per channel (1 = normal, 0 = the channel named
    by the log's ``restricted`` condition). Loss: class-balanced BCE on ``condition_logit``
    (each class weighs half, weights from the training labels); AdamW (``lr``, ``weight_decay``)
    on minibatches of ``batch`` windows drawn with ``seed``, ``steps`` steps, gradient clipped at 1.

    Twin pairs (``pairs`` in [0, 1]): that share of every batch is drawn as frame-aligned
    restricted / normal twins (:func:`twin_pairs`: same commands, same frame index, only the
    condition differs), the rest uniformly from all frames; a network that keys on the trajectory
    gets opposite labels for the same motion within one batch. ``rank_weight`` adds, on those
    pairs, a logistic ranking term ``rank_weight * mean softplus(l_r - l_n)`` on the restricted
    channel's logits (l = normal logit; the normal twin must score more normal than its restricted
    twin). Augmentation, per window and channel: the current and PWM features are multiplied by
    ``exp(gain_jitter * N(0, 1))`` (a unit's torque constant and supply differ), and every
    normalized feature gets ``noise * N(0, 1)``.

    ``scope``: "head" trains the condition head only: the trunk and the other heads are unchanged,
    so the effort, force and gate outputs stay bit-identical; "net" trains the whole network
    (for a model used only as a condition detector: its effort changes).
    ``val_trajs`` (validation logs, never test logs): every ``eval_every`` steps the parameters are
    scored on all their teacher-forced frames and the best are returned (early stopping by
    validation); ``select`` "loss": the lowest class-balanced BCE; "auc": the highest frame-level
    ROC AUC over the channels restricted in some validation log (restricted = low score).
    Without ``val_trajs``, the last parameters.
    An ensemble (``window_stats`` with ``members`` > 1) is trained as M independent detectors on the
    same batches: the loss is the mean of the members' own losses, and validation scores the
    ensemble's output (the logit of the members' mean probability).
    Returns (model with the new network, {"loss": [...], "val": [[step, value], ...], "best_step",
    "n_frames", "n_restricted", "n_twin_frames", "wall_s", ...}).
    """
    import time

    import equinox as eqx
    import jax
    import jax.numpy as jnp
    import optax


    if scope not in ("head", "net"):
        raise UnknownNameError("condition training scope", scope, ("head", "net"))
    if select not in ("loss", "auc"):
        raise UnknownNameError("condition model selection", select, ("loss", "auc"))
    if not 0.0 <= float(pairs) <= 1.0:
        raise ValueError(f"pairs is a share of the batch in [0, 1], got {pairs}")
    heads = getattr(model.net, "heads", None)
    if heads is None or not hasattr(heads, "condition"):
        raise ModelError(f"the {model.arch} network has no condition head")

    t0 = time.perf_counter()
    trajs = with_residual_inputs(robot, model, trajs)
    if val_trajs is not None:
        val_trajs = with_residual_inputs(robot, model, val_trajs)
    X, Y, spans = _teacher_forced(robot, model, trajs, spans=True)
    n_pos = float((Y < 0.5).sum())
    n_neg = float(Y.size - n_pos)
    if n_pos == 0 or n_neg == 0:
        raise DataError(None, f"condition training needs normal and restricted channels; got {int(n_pos)} "
                              f"restricted and {int(n_neg)} normal channel frames")
    twins = twin_pairs(trajs, spans) if (pairs > 0 or rank_weight > 0) else np.zeros((0, 2), int)
    if (pairs > 0 or rank_weight > 0) and twins.shape[0] == 0:
        raise DataError(None, "twin-pair training needs restricted / normal twins (synth --restricted-pairs) "
                              "among the training logs; none found")
    w_pos, w_neg = 0.5 * Y.size / n_pos, 0.5 * Y.size / n_neg
    norm = model.normalizer
    spec = jax.tree.map(lambda _: False, model.net)
    if scope == "head":
        spec = eqx.tree_at(lambda n: n.heads.condition, spec,
                           replace=jax.tree.map(eqx.is_inexact_array, model.net.heads.condition))
    else:
        spec = jax.tree.map(eqx.is_inexact_array, model.net)
    diff, static = eqx.partition(model.net, spec)
    opt = optax.chain(optax.clip_by_global_norm(1.0), optax.adamw(lr, weight_decay=weight_decay))
    state = opt.init(diff)
    feats = list(model.layout.per_channel)
    C = model.layout.n_channels
    F = len(feats)
    # columns of the (channel-major) frame that a gain multiplies: current and PWM of every channel
    gain_cols = np.zeros((C, F), bool)
    for f in ("current", "pwm"):
        if f in feats:
            gain_cols[:, feats.index(f)] = True
    B = min(int(batch), X.shape[0])
    n_pair = int(round(float(pairs) * B / 2)) if twins.shape[0] else 0
    n_free = B - 2 * n_pair

    def logits(net, x, members=True):
        # an ensemble (window_stats members > 1) trains every member on its own loss: (B, M, C);
        # validation scores the ensemble's output (members=False): (B, C)
        if members and getattr(net, "members", 1) > 1:
            return jax.vmap(lambda w: net.member_heads(norm.apply(w)).condition_logit)(x)
        return jax.vmap(lambda w: net(norm.apply(w)).condition_logit)(x)

    def bce(logit, y):
        wgt = jnp.where(y < 0.5, w_pos, w_neg)
        return jnp.mean(wgt * optax.sigmoid_binary_cross_entropy(logit, y))

    def loss_fn(d, x, y):
        net = eqx.combine(d, static)
        logit = logits(net, x)
        if logit.ndim == 3:  # ensemble members: the same labels for every member
            y = jnp.broadcast_to(y[:, None, :], logit.shape)
        loss = bce(logit, y)
        if n_pair and rank_weight > 0:
            lr_, ln_, yr = logit[n_free:n_free + n_pair], logit[n_free + n_pair:], y[n_free:n_free + n_pair]
            m = (yr < 0.5).astype(jnp.float32)  # the restricted twin's restricted channel(s)
            loss = loss + rank_weight * jnp.sum(m * jax.nn.softplus(lr_ - ln_)) / jnp.maximum(jnp.sum(m), 1.0)
        return loss

    @eqx.filter_jit
    def step(d, s, x, y):
        loss, g = eqx.filter_value_and_grad(loss_fn)(d, x, y)
        upd, s = opt.update(g, s, d)
        return eqx.apply_updates(d, upd), s, loss

    std = np.asarray(norm.std, np.float32).reshape(C, F)

    def draw(rng):
        sel = rng.choice(X.shape[0], size=n_free, replace=False)
        if n_pair:
            tw = twins[rng.choice(twins.shape[0], size=n_pair, replace=False)]
            sel = np.concatenate([sel, tw[:, 0], tw[:, 1]])
        x = X[sel]
        if gain_jitter > 0 or noise > 0:
            x = x.reshape(x.shape[0], x.shape[1], C, F).copy()
            if gain_jitter > 0:
                g = np.exp(gain_jitter * rng.standard_normal((x.shape[0], 1, C, 1))).astype(np.float32)
                x = np.where(gain_cols, x * g, x)
            if noise > 0:
                x = x + (noise * std * rng.standard_normal(x.shape)).astype(np.float32)
            x = x.reshape(x.shape[0], x.shape[1], C * F)
        return jnp.asarray(x), jnp.asarray(Y[sel])

    val_fn = None
    if val_trajs:
        Xv, Yv = _teacher_forced(robot, model, list(val_trajs))
        ev_loss = eqx.filter_jit(lambda d, x, y: bce(logits(eqx.combine(d, static), x, False), y))
        ev_logit = eqx.filter_jit(lambda d, x: logits(eqx.combine(d, static), x, False))
        cols = [c for c in range(C) if 0 < (Yv[:, c] < 0.5).sum() < Yv.shape[0]]
        if select == "auc" and not cols:
            raise DataError(None, "select='auc' needs a validation channel with both conditions")

        def _val(d):
            if select == "loss":
                tot = 0.0
                for a in range(0, Xv.shape[0], 1024):
                    xb, yb = Xv[a:a + 1024], Yv[a:a + 1024]
                    tot += float(ev_loss(d, jnp.asarray(xb), jnp.asarray(yb))) * len(xb)
                return tot / Xv.shape[0]
            from sklearn.metrics import roc_auc_score

            lg = np.concatenate([np.asarray(ev_logit(d, jnp.asarray(Xv[a:a + 1024])))
                                 for a in range(0, Xv.shape[0], 1024)])
            return -float(roc_auc_score((Yv[:, cols] < 0.5).ravel(), -lg[:, cols].ravel()))

        val_fn = _val

    rng = np.random.default_rng([int(seed), 7])
    losses, vals = [], []
    best = (val_fn(diff), 0, diff) if val_fn else None
    if best:
        vals.append([0, best[0]])
    for k in range(int(steps)):
        x, y = draw(rng)
        diff, state, loss = step(diff, state, x, y)
        losses.append(float(loss))
        if val_fn and ((k + 1) % int(eval_every) == 0 or k + 1 == int(steps)):
            v = val_fn(diff)
            vals.append([k + 1, v])
            if v < best[0]:
                best = (v, k + 1, diff)
        if progress is not None:
            progress(k + 1, int(steps), losses[-1])
    if best:
        diff = best[2]
    new = eqx.tree_at(lambda m: m.net, model, eqx.combine(diff, static))
    if select == "auc":
        vals = [[k, -v] for k, v in vals]
    return new, {"loss": losses, "val": vals, "best_step": best[1] if best else int(steps), "select": select,
                 "n_frames": int(X.shape[0]), "n_restricted": int(n_pos), "n_twin_frames": int(twins.shape[0]),
                 "scope": scope, "steps": int(steps), "batch": B, "lr": lr, "pairs": float(pairs),
                 "rank_weight": float(rank_weight), "gain_jitter": float(gain_jitter), "noise": float(noise),
                 "wall_s": time.perf_counter() - t0}


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
    if model is not None:
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
    if train_logs:
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


def excitation_of(lg: ConditionLog) -> str:
    """The log's excitation family tag (``conditions["excitation"]``, "unknown" without one)."""
    t = lg.traj
    return str(getattr(t, "conditions", {}).get("excitation", "unknown")) if t is not None else "unknown"


def public(res: dict[str, Any]) -> dict[str, Any]:
    """The JSON-ready result (per-frame scores left out)."""
    out = dict(res)
    out["logs"] = [{k: v for k, v in d.items() if k != "frame_scores"} for d in res.get("logs", [])]
    return out








