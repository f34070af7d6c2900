"""Motor-condition detection, the window side: logs on the control grid, 64-step windows, their twenty
features and the classical per-channel classifiers (threshold, SVM, random forest) fitted on them.

Windows
    ``WINDOW`` = 64 control steps with 50 % overlap (``STRIDE`` = 32): starts 0, 32, 64, ... while
    ``start + 64 <= T`` (:func:`window_starts`); the samples after the last full window are not
    scored. A log shorter than 64 steps gives no window.

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

from ..errors import DataError
from ..sim.arm_data import log_arrays

__all__ = ["WINDOW", "STRIDE", "METHODS", "FEATURE_NAMES", "ConditionLog", "condition_log", "window_starts",
           "window_features", "log_windows", "stack_windows", "CurrentThreshold", "make_baselines", "ChannelModels",
           "fit_baselines", "classification_metrics", "excitation_of"]

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
    logs = list(logs)
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
        models: list[Any] = []
        const: list[int | None] = []
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


def excitation_of(lg: ConditionLog) -> str:
    """The log's excitation family tag (``conditions["excitation"]``, "unknown" without one)."""
    t = lg.traj
    return str(getattr(t, "conditions", {}).get("excitation", "unknown")) if t is not None else "unknown"

