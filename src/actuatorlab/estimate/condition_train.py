"""Motor-condition detection, the learned detector: a fresh condition model, its supervised training
on teacher-forced windows of measured frames (through :func:`actuatorlab.learned.trainer.train`),
and its per-frame scores.

:class:`~actuatorlab.sim.arm_learned.OnlineEstimator` runs causally over the log, one frame at a
time (measured positions, logged commands and telemetry up to the present frame), and gives per
frame and channel a condition score s_k in [0, 1] (1 = normal, 0 = restricted)
(:func:`learned_frame_scores`; :func:`learned_frame_scores_batched` computes the same scores from
the log's teacher-forced windows at once).
"""

from __future__ import annotations

import dataclasses
import time
from typing import Callable, Sequence

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax

from ..errors import DataError, ModelError, UnknownNameError
from ..sim.arm_data import log_arrays
from ..learned.arm import add_residual_channels, arm_log, DEFAULT_FEATURES, make_learned_arm, with_residual_inputs
from ..learned.trainer import TrainConfig, train
from ..sim.arm_learned import frames_of_log, OnlineEstimator, RESIDUAL_FEATURE, TELEMETRY
from ..models.features import fit_normalizer, Normalizer, sliding_windows
from ..sim.force import ForcePrior
from .condition_calibrate import calibrate_condition
from .condition_windows import ConditionLog, condition_log, window_starts

__all__ = ["learned_frame_scores", "learned_frame_scores_batched", "teacher_forced",
           "make_condition_model", "ConditionTrainConfig", "train_condition_head", "DetectorConfig",
           "fit_condition_detector"]

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
    X, _ = teacher_forced(robot, model, [lg.traj])
    net, norm = model.net, model.normalizer
    f = eqx.filter_jit(lambda x: jax.nn.sigmoid(jax.vmap(lambda w: net(norm.apply(w)).condition_logit)(x)))
    return np.concatenate([np.asarray(f(jnp.asarray(X[a:a + chunk])), float) for a in range(0, X.shape[0], chunk)])


def teacher_forced(robot, model, trajs) -> tuple[np.ndarray, np.ndarray]:
    """Windows (N, H + 1, F) of measured frames (the causal window of every frame) and condition
    labels (N, C) (1 = normal) of the logs."""
    xs, ys = [], []
    for t in with_residual_inputs(robot, model, trajs):
        a = arm_log(robot, t, model.layout.channels, model.layout.per_channel)
        b = a.base
        fr = frames_of_log(model, b.inputs.q_target, b.q_meas, b.dq_meas, b.inputs.v_supply, b.inputs.enable,
                           a.telemetry)
        xs.append(np.asarray(sliding_windows(fr, model.layout.history)))
        ys.append(np.tile(a.condition, (fr.shape[0], 1)))
    return np.concatenate(xs).astype(np.float32), np.concatenate(ys).astype(np.float32)



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



@dataclasses.dataclass(frozen=True)
class ConditionTrainConfig:
    """Settings of :func:`train_condition_head`.

    Fields:
        steps: optimizer steps [-] (default 300).
        batch: windows per step [-] (default 256; at most the number of training frames).
        lr: AdamW learning rate, constant [-] (default 1e-3).
        weight_decay: AdamW weight decay on every trained leaf [-] (default 1e-4).
        seed: seed of the batches [-] (default 0).
        scope: "head" (default) trains the condition head only, "net" the whole network.
        eval_every: steps between validations (with validation logs) [-] (default 50).
        select: "loss" (default: the lowest class-balanced BCE on the validation logs) or "auc"
            (the highest frame-level ROC AUC over the channels restricted in some validation log).
    """

    steps: int = 300
    batch: int = 256
    lr: float = 1e-3
    weight_decay: float = 1e-4
    seed: int = 0
    scope: str = "head"
    eval_every: int = 50
    select: str = "loss"

    def __post_init__(self):
        if self.scope not in ("head", "net"):
            raise UnknownNameError("condition training scope", self.scope, ("head", "net"))
        if self.select not in ("loss", "auc"):
            raise UnknownNameError("condition model selection", self.select, ("loss", "auc"))


def _condition_spec(model, scope: str):
    """Filter spec over ``model.net``: the condition head's arrays ("head") or every array ("net")."""
    heads = getattr(model.net, "heads", None)
    if heads is None or not hasattr(heads, "condition"):
        raise ModelError(f"the {model.arch} network has no condition head")
    if scope == "net":
        return jax.tree.map(eqx.is_inexact_array, model.net)
    spec = jax.tree.map(lambda _: False, model.net)
    return eqx.tree_at(lambda n: n.heads.condition, spec,
                       replace=jax.tree.map(eqx.is_inexact_array, model.net.heads.condition))


def _balanced_bce(Y: np.ndarray):
    """Class-balanced BCE on condition logits (each class weighs half, weights from the labels
    ``Y``, 1 = normal) and the counts (n restricted, n normal channel frames)."""
    n_pos = float((Y < 0.5).sum())
    n_neg = float(Y.size - n_pos)
    if n_pos == 0 or n_neg == 0:
        raise DataError(None, f"condition training needs normal and restricted channels; got {int(n_pos)} "
                              f"restricted and {int(n_neg)} normal channel frames")
    w_pos, w_neg = 0.5 * Y.size / n_pos, 0.5 * Y.size / n_neg

    def bce(logit, y):
        wgt = jnp.where(y < 0.5, w_pos, w_neg)
        return jnp.mean(wgt * optax.sigmoid_binary_cross_entropy(logit, y))

    return bce, n_pos


def _condition_val_fn(robot, model, val_trajs, spec, logits, bce, select: str):
    """``val_fn(net)`` of the trainer: the class-balanced BCE ("loss") or minus the frame ROC AUC
    ("auc") over every teacher-forced frame of ``val_trajs``, 1024 windows per compiled call."""
    from sklearn.metrics import roc_auc_score

    static = eqx.partition(model.net, spec)[1]
    Xv, Yv = teacher_forced(robot, model, list(val_trajs))
    ev_loss = eqx.filter_jit(lambda d, x, y: bce(logits(eqx.combine(d, static), x), y))
    ev_logit = eqx.filter_jit(lambda d, x: logits(eqx.combine(d, static), x))
    cols = [c for c in range(model.layout.n_channels) if 0 < (Yv[:, c] < 0.5).sum() < Yv.shape[0]]
    if select == "auc" and not cols:
        raise DataError(None, "select='auc' needs a validation channel with both conditions")

    def val_fn(net):
        d = eqx.partition(net, spec)[0]
        if select == "loss":
            tot = 0.0
            for a in range(0, Xv.shape[0], 1024):
                xb, yb = Xv[a:a + 1024], Yv[a:a + 1024]
                tot += float(ev_loss(d, jnp.asarray(xb), jnp.asarray(yb))) * len(xb)
            return tot / Xv.shape[0]
        lg = np.concatenate([np.asarray(ev_logit(d, jnp.asarray(Xv[a:a + 1024])))
                             for a in range(0, Xv.shape[0], 1024)])
        return -float(roc_auc_score((Yv[:, cols] < 0.5).ravel(), -lg[:, cols].ravel()))

    return val_fn


def train_condition_head(robot, model, trajs, cfg: ConditionTrainConfig | None = None, *, val_trajs=None,
                         progress: Callable[[int, int, float], None] | None = None):
    """Supervised training of the condition head on teacher-forced frames (no simulator).

    Every frame k of every training log gives the causal window of MEASURED frames
    ``(frame_{k-H} .. frame_k)`` (as :class:`~actuatorlab.sim.arm_learned.OnlineEstimator` and
    ``infer`` see them on hardware) and the label per channel (1 = normal, 0 = the channel named
    by the log's ``restricted`` condition). Loss: class-balanced BCE on ``condition_logit``
    (each class weighs half, weights from the training labels); AdamW (``cfg.lr`` constant,
    ``cfg.weight_decay`` on every trained leaf) on minibatches of ``cfg.batch`` windows drawn
    uniformly without replacement with ``cfg.seed``, gradient clipped at 1, no parameter average:
    :func:`actuatorlab.learned.trainer.train` without a run folder.

    ``cfg.scope``: "head" trains the condition head only: the trunk and the other heads are
    unchanged, so the effort, force and gate outputs stay bit-identical; "net" trains the whole
    network (for a model used only as a condition detector: its effort changes).
    ``val_trajs`` (validation logs, never test logs): the parameters before training and every
    ``cfg.eval_every`` steps are scored on all their teacher-forced frames and the best are
    returned (early stopping by validation, ``cfg.select``). Without ``val_trajs``, the last
    parameters. ``progress(step, steps, loss)`` is called after every step.
    Returns (model with the new network, {"loss": [...], "val": [[step, value], ...], "best_step",
    "n_frames", "n_restricted", "wall_s", ...}).
    """
    cfg = cfg or ConditionTrainConfig()
    spec = _condition_spec(model, cfg.scope)
    t0 = time.perf_counter()
    trajs = with_residual_inputs(robot, model, trajs)
    X, Y = teacher_forced(robot, model, trajs)
    bce, n_pos = _balanced_bce(Y)
    norm = model.normalizer

    def logits(net, x):
        return jax.vmap(lambda w: net(norm.apply(w)).condition_logit)(x)

    B = min(int(cfg.batch), X.shape[0])
    rng = np.random.default_rng([int(cfg.seed), 7])

    def batch_fn(step: int):  # one draw per step, in order, from the run's generator
        sel = rng.choice(X.shape[0], size=B, replace=False)
        return jnp.asarray(X[sel]), jnp.asarray(Y[sel])

    val_fn = None
    if val_trajs:
        val_fn = _condition_val_fn(robot, model, with_residual_inputs(robot, model, val_trajs), spec, logits, bce,
                                   cfg.select)
    tcfg = TrainConfig(steps=int(cfg.steps), lr=float(cfg.lr), weight_decay=float(cfg.weight_decay), clip_norm=1.0,
                       ema_decay=0.0, schedule="constant", decay="all", eval_every=int(cfg.eval_every),
                       checkpoint_every=int(cfg.steps), eval_at_start=True, seed=int(cfg.seed))
    res = train(None, model.net, lambda net, b: bce(logits(net, b[0]), b[1]), batch_fn, tcfg, val_fn=val_fn,
                progress=progress or False, filter_spec=spec)
    new = eqx.tree_at(lambda m: m.net, model, res.best)
    vals = [[r["step"], r["val"]] for r in res.metrics if "val" in r]
    if cfg.select == "auc":
        vals = [[k, -v] for k, v in vals]
    return new, {"loss": [r["loss"] for r in res.metrics if "loss" in r], "val": vals,
                 "best_step": res.best_step if val_fn else int(cfg.steps), "select": cfg.select,
                 "n_frames": int(X.shape[0]), "n_restricted": int(n_pos), "scope": cfg.scope, "steps": int(cfg.steps),
                 "batch": B, "lr": cfg.lr, "wall_s": time.perf_counter() - t0}


@dataclasses.dataclass(frozen=True)
class DetectorConfig:
    """The condition detector ``actuatorlab condition`` trains when the model file has no calibrated
    one: the recipe bench/condition.py adopted (bench/README.md, docs/condition.md).

    Fields:
        arch: network, ``window_stats`` (per-joint statistics of the window and an MLP).
        history: frames of history H [-] (the window is H + 1 = 64 frames, 0.64 s at 100 Hz).
        features: per-channel inputs; ``tau_ext`` is the external joint torque [N.m] of
            ``residual`` calibrated on the free-motion training logs, stepped causally.
        residual: the classical estimator behind ``tau_ext`` (default ``id_friction``).
        train: the supervised training (:class:`ConditionTrainConfig`: the whole network, 800
            steps of 256 windows, lr 1e-3, the step of the highest validation frame AUC of the
            restricted joint, scored every 25 steps).
        min_restricted_windows: fewest restricted 64-step training windows (stride 32) of one
            channel for which a detector is trained [-] (default 20, about 6.7 s of restricted
            motion at 100 Hz); that channel must also be restricted in a validation log (model
            selection and calibration need both classes there). Below it the command reports the
            classical detectors only and says why.
        seed: seed of the network and of the batches [-].
    """

    arch: str = "window_stats"
    history: int = 63
    features: tuple[str, ...] = ("q", "dq", "err", "current", "pwm", "tau_ext")
    residual: str = "id_friction"
    train: ConditionTrainConfig = ConditionTrainConfig(steps=800, batch=256, lr=1e-3, scope="net", eval_every=25,
                                                      select="auc")
    min_restricted_windows: int = 20
    seed: int = 0


def _detector_support(robot, trajs, val_trajs, min_windows: int) -> tuple[list[str], str | None]:
    """The channels a detector can be trained for (restricted in at least ``min_windows`` 64-step
    windows of the training logs and in some validation log) and, when there is none, why (one
    line)."""
    tr = [condition_log(robot, t) for t in trajs]
    va = [condition_log(robot, t, tr[0].channels) for t in val_trajs] if tr else []
    if not tr:
        return [], "no training logs"
    n_win = {c: sum(len(window_starts(lg.q.shape[0])) for lg in tr if lg.restricted[k])
             for k, c in enumerate(tr[0].channels)}
    if not any(n_win.values()):
        return [], "no restricted training log (the restricted condition, e.g. synth's restricted_joint3)"
    ok = [c for c, n in n_win.items() if n >= min_windows]
    if not ok:
        return [], (f"too few restricted training windows ({max(n_win.values())} of one channel; a learned detector "
                    f"needs {min_windows})")
    if not va:
        return [], "no validation logs (the val folder beside the training folder, or --calibrate VAL)"
    both = [c for c in ok if any(lg.restricted[tr[0].channels.index(c)] for lg in va)]
    if not both:
        return [], f"no validation log restricted on {', '.join(ok)} (model selection and calibration need one)"
    return both, None


def fit_condition_detector(robot, trajs, val_trajs, cfg: DetectorConfig = DetectorConfig(), *,
                           verdict_s: float = 5.0):
    """Train and calibrate :class:`DetectorConfig`'s detector as bench/condition.py does: the
    residual ``tau_ext`` (``cfg.residual`` calibrated on the free-motion logs among ``trajs``)
    computed once per log, a fresh ``cfg.arch`` network (:func:`make_condition_model`, normalizer
    from the training frames) trained whole on ``trajs`` (:func:`train_condition_head`, the step
    kept by ``val_trajs``), then calibrated on ``val_trajs`` (:func:`calibrate_condition`: causal
    smoothing, plain or log-odds, and thresholds). ``trajs`` are training logs, ``val_trajs``
    validation logs; neither may be an evaluated log.

    Returns (model or None, info): info {"detector", "trained_on", "validation", "best_step",
    "val_auc" (the kept step's validation frame AUC), "train_s", "restricted_channels",
    "calibration"} or, when the logs cannot support a learned
    detector (:func:`_detector_support`), (None, {"unsupported": one line})."""
    trajs, val_trajs = list(trajs), list(val_trajs)
    chans, why = _detector_support(robot, trajs, val_trajs, cfg.min_restricted_windows)
    if why is not None:
        return None, {"unsupported": why}
    t0 = time.perf_counter()
    prior = ForcePrior.fit(robot, cfg.residual, trajs) if RESIDUAL_FEATURE in cfg.features else None
    tr_t = trajs if prior is None else add_residual_channels(robot, prior, trajs)  # once per log
    model = make_condition_model(robot, tr_t, arch=cfg.arch, seed=cfg.seed, history=cfg.history,
                                 per_channel=cfg.features, residual_input=prior)
    tr_t, va_t = with_residual_inputs(robot, model, tr_t), with_residual_inputs(robot, model, val_trajs)
    model, info = train_condition_head(robot, model, tr_t, dataclasses.replace(cfg.train, seed=cfg.seed),
                                       val_trajs=va_t)
    ch = model.layout.channels
    va = [condition_log(robot, t, ch) for t in va_t]
    cal = calibrate_condition([learned_frame_scores_batched(robot, model, lg) for lg in va],
                              [lg.restricted for lg in va], float(robot.control_dt), verdict_s=verdict_s)
    cal["channels_used"] = [ch[c] for c in cal["channels_used"]]
    cal["source"] = f"{len(va)} validation logs: " + ", ".join(lg.name for lg in va)
    return model, {"detector": f"{cfg.arch} (history {cfg.history}, inputs {', '.join(cfg.features)}"
                               + (f", tau_ext from {cfg.residual}" if prior is not None else "") + ")",
                   "trained_on": f"{len(trajs)} training logs", "validation": f"{len(va)} logs",
                   "restricted_channels": chans, "steps": info["steps"], "best_step": info["best_step"],
                   "select": info["select"], "val_auc": dict(map(tuple, info["val"])).get(info["best_step"]),
                   "n_frames": info["n_frames"], "n_restricted_frames": info["n_restricted"],
                   "train_s": round(time.perf_counter() - t0, 1), "calibration": cal}
