"""Supervised training of the force, contact-gate and condition heads (teacher forcing, no simulator).

The force, gate and condition heads of a whole-robot learned actuator are supervised by labels,
not through the rollout, so they can be trained on windows of MEASURED frames (the log's own
positions, velocities, commands and telemetry; :func:`~actuatorlab.models.features.sliding_windows`,
causal: window k holds frames k - H .. k) without MJX: seconds per hundred steps on a CPU instead
of ~10 s per step through the simulator (docs/learned_arm.md). Loss (the head terms of
:func:`~actuatorlab.learned.arm.arm_loss`, same weights)::

    J = mean c_f (1 + w_c contact) sum_xyz huber(f_hat - f)    f_hat = sigmoid(gate) (f_raw + f_prior)   [N]
      + mean c_f BCE(gate, contact)
      + mean BCE(condition_c, [channel c restricted])

f_prior = 0, or, for a model that carries a force prior (a classical method of
:mod:`actuatorlab.sim.force` stored with the model; made by a benchmark recipe, docs/force.md
"Force prior"), that method's causal estimate on the same frames. w_c = 4 (arm_loss's weight);
contact: the log's ``contact`` channel when it has one (the synth suite's protocol truth: a
payload carried or an external force above 0.05 N), else |f| > 0.01 N (a force gauge's noise
would otherwise mark a no-contact log as contact everywhere); c_f = 1 where the log carries a
force label. What is trained (``trunk``): with ``init`` (a model trained through the simulator)
only the force, gate and condition heads by default, so its torque path is unchanged; from scratch
the trunk too. The torque head is never trained here: a model made by :func:`train_heads` from
scratch has an untrained torque head (its ``training.torque_head`` says so) and is for force and
condition estimation, not for rollouts. Optimisation, EMA, checkpoints, exact resume and the run
folder are :func:`actuatorlab.learned.trainer.train`'s; the best EMA parameters by validation
force MAE are written as RUN/arm_model.json + RUN/arm_model.eqx.
"""

from __future__ import annotations

import dataclasses
import time as _time
from pathlib import Path
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax

from ..errors import DataError, ModelError
from ..logs.format import Trajectory
from ..models.features import fit_normalizer, Normalizer
from ..models.nets import Heads
from ..precision import physics
from ..robots.loader import load_robot
from ..sim.arm_data import log_arrays
from ..sim.arm_learned import RESIDUAL_FEATURE, RESIDUAL_FEATURES, TELEMETRY, LearnedArm, frames_of_log
from ..sim.dynamics import ArmDynamics
from ..sim.force import ForcePrior
from .arm import (_effort_scale, add_residual_channels, arm_log, DEFAULT_FEATURES, make_learned_arm, save_arm_model,
                  with_residual_inputs)
from .head_data import HeadData, ODD_FEATURES, head_data, mirror_augment, mirror_symmetry, yaw_augment, yaw_channel
from .trainer import train, TrainConfig

__all__ = ["HeadsConfig", "heads_loss", "head_sums", "head_terms", "val_metrics", "heads_layout", "new_heads_model",
           "train_heads", "frame_name"]


@dataclasses.dataclass(frozen=True)
class HeadsConfig:
    """Settings of :func:`train_heads` (the default budget: a few minutes on 2 CPU cores for a small
    network).

    Fields:
        arch: network of a fresh model, transformer | mlp | gru | lstm (default transformer).
        sizes: its sizes (default: the arch's), e.g. {"d": 64, "history": 32}.
        trunk: also train the shared trunk (default None: only without ``init``).
        steps: optimizer steps [-] (default 1500).
        batch: windows per step [-] (default 128).
        lr: peak learning rate [-] (default 1e-3; warm-up over steps // 20, cosine decay).
        eval_every: steps between validations and checkpoints, the best kept [-] (default 250).
        noise: input noise [training std of each feature] (default 0).
        weight_decay: AdamW weight decay on matrices [-] (default 1e-4).
        seed: seed of the network and of the batches [-] (default 0).
        augment_yaw: rotate every training sample about the robot's yaw joint by a random angle
            (:func:`~actuatorlab.learned.head_data.yaw_augment`; refused when the robot has none).
        augment_mirror: reflect half of the training samples in the arm's vertical mirror plane
            (:func:`~actuatorlab.learned.head_data.mirror_augment`; refused when
            :func:`~actuatorlab.learned.head_data.mirror_symmetry` finds none); before the rotation.
        residual_input: a classical method name (``id_linear``, ``id_friction``,
            ``momentum_observer``) calibrated on the free-motion training logs, whose estimated
            external joint torque ``tau_ext`` [N.m] becomes one more per-channel input of a fresh
            network (stored in arm_model.json and stepped online by
            :class:`~actuatorlab.sim.force.LearnedTelemetry`; docs/force.md, "The residual input");
            with ``init`` it must be None or the model's own.
    """

    arch: str = "transformer"
    sizes: dict | None = None
    trunk: bool | None = None
    steps: int = 1500
    batch: int = 128
    lr: float = 1e-3
    eval_every: int = 250
    noise: float = 0.0
    weight_decay: float = 1e-4
    seed: int = 0
    augment_yaw: bool = False
    augment_mirror: bool = False
    residual_input: str | None = None


#: the contact weight w_c of the force loss (arm_loss's; 9 was tried and not adopted, bench/journal/force.md)
CONTACT_WEIGHT = 4.0


def head_sums(model: LearnedArm, d: HeadData, valid=None, contact_weight: float = 4.0) -> dict:
    """The sums behind :func:`heads_loss` on ``d`` (rows with ``valid`` = 0 count nowhere; they
    must also have ``force_w`` = 0): ``force`` sum fw (1 + w_c c) huber, ``gate`` sum fw BCE,
    ``den`` sum fw, ``abs`` sum fw |f_hat - f|, ``abs_c``/``den_c`` the same over contact
    frames, ``cond``/``cond_n`` the condition BCE summed and its count. Sums over row chunks add up,
    so a large validation set is scored chunk by chunk (:func:`val_metrics`)."""

    def one(x):
        h: Heads = model.heads(x)
        return h.force_raw, h.gate_logit, h.condition_logit

    f_raw, g, c = jax.vmap(one)(d.x)
    f_hat = jax.nn.sigmoid(g)[:, None] * (f_raw if d.prior is None else f_raw + d.prior)
    fw = d.force_w
    v = jnp.ones(fw.shape, fw.dtype) if valid is None else valid
    err = jnp.abs(f_hat - d.force)
    wc = fw * d.contact
    return {"force": jnp.sum(fw * (1.0 + contact_weight * d.contact) * optax.huber_loss(f_hat, d.force, delta=1.0).sum(-1)),
            "gate": jnp.sum(fw * optax.sigmoid_binary_cross_entropy(g, d.contact)), "den": jnp.sum(fw),
            "abs": jnp.sum(fw[:, None] * err), "abs_c": jnp.sum(wc[:, None] * err), "den_c": jnp.sum(wc),
            "cond": jnp.sum(v[:, None] * optax.sigmoid_binary_cross_entropy(c, d.condition)),
            "cond_n": jnp.sum(v) * c.shape[-1]}


def head_terms(sums: dict) -> dict:
    """The terms of :func:`heads_loss` from :func:`head_sums` (added over chunks or not)."""
    den = jnp.maximum(sums["den"], 1.0)
    return {"force": sums["force"] / den, "gate": sums["gate"] / den,
            "condition": sums["cond"] / jnp.maximum(sums["cond_n"], 1.0), "force_mae": sums["abs"] / (3.0 * den),
            "force_mae_contact": sums["abs_c"] / (3.0 * jnp.maximum(sums["den_c"], 1.0))}


def heads_loss(model: LearnedArm, d: HeadData, weights=(1.0, 1.0, 1.0), contact_weight: float = 4.0):
    """The head loss J of the module docstring on a batch (``contact_weight`` = w_c); returns (J,
    terms); ``force_mae_contact``: the force MAE over the labelled frames in contact [N]."""
    t = head_terms(head_sums(model, d, contact_weight=contact_weight))
    a_f, a_g, a_c = weights
    return a_f * t["force"] + a_g * t["gate"] + a_c * t["condition"], t


#: validation rows per compiled call of :func:`val_metrics` (a whole scale-1 validation set in one
#: call needed about 11 GB of activations for the small Transformer)
VAL_CHUNK = 2048


def val_metrics(model: LearnedArm, d: HeadData, contact_weight: float = 4.0, chunk: int = VAL_CHUNK,
                _fn: dict | None = None) -> dict:
    """:func:`heads_loss`'s terms on a whole (validation) set, ``chunk`` rows per call: every call
    has one shape (the last chunk is padded with rows that count nowhere), the sums are added in
    float64 and divided at the end, so the result is that of one call on the whole set up to
    float32 rounding. ``_fn``: a dict the compiled chunk function is cached in between calls."""
    n = d.n
    fn: Any = None if _fn is None else _fn.get("fn")
    if fn is None:
        def chunk_sums(m, b, v):
            return head_sums(m, b, v, contact_weight)

        fn = eqx.filter_jit(chunk_sums)
        if _fn is not None:
            _fn["fn"] = fn
    total: dict = {}
    for i in range(0, n, chunk):
        idx = np.arange(i, min(i + chunk, n))
        b = d.take(idx)
        valid = np.ones(idx.size, np.float32)
        pad = chunk - idx.size
        if pad:
            b = jax.tree.map(lambda a: np.concatenate([np.asarray(a), np.repeat(np.asarray(a)[-1:], pad, 0)]), b)
            b = dataclasses.replace(b, force_w=np.concatenate([np.asarray(b.force_w)[:idx.size],
                                                                np.zeros(pad, np.float32)]))
            valid = np.concatenate([valid, np.zeros(pad, np.float32)])
        s = fn(model, jax.tree.map(jnp.asarray, b), jnp.asarray(valid))
        for k, x in s.items():
            total[k] = total.get(k, 0.0) + float(x)
    return {k: float(v) for k, v in head_terms(total).items()}


def _head_spec(model: LearnedArm, trunk: bool):
    """Filter spec: force / gate / condition heads (+ the trunk when ``trunk``), never the torque head."""
    spec = jax.tree.map(lambda _: False, model)
    net_spec = jax.tree.map(eqx.is_inexact_array, model.net) if trunk else jax.tree.map(lambda _: False, model.net)
    heads = getattr(model.net, "heads", None)
    if heads is None:
        raise ModelError(f"train_heads: the {model.arch} network has no output heads")
    on = jax.tree.map(eqx.is_inexact_array, heads)
    for name in ("force", "gate", "condition"):
        net_spec = eqx.tree_at(lambda n, k=name: getattr(n.heads, k), net_spec,  # type: ignore[misc]
                               replace=getattr(on, name))  # (a default-bound lambda mypy cannot type)
    net_spec = eqx.tree_at(lambda n: n.heads.torque, net_spec,
                           replace=jax.tree.map(lambda _: False, heads.torque))
    return eqx.tree_at(lambda m: m.net, spec, replace=net_spec)


def heads_layout(robot, trajs: list[Trajectory], residual_input: str | None = None) -> tuple[tuple, tuple]:
    """(channels, per-channel features) of a fresh heads model: the joints the first log scores, the
    default features of ``train --robot`` the logs carry, and ``tau_ext`` with a ``residual_input``."""
    scored = log_arrays(robot, trajs[0]).scored
    channels = tuple(j for j, s in zip(robot.joint_names, scored) if s)
    feats = tuple(f for f in DEFAULT_FEATURES if f not in TELEMETRY or all(
        trajs[0].has(f"{TELEMETRY[f]}/{j}") for j in channels))
    return channels, feats + ((RESIDUAL_FEATURE,) if residual_input is not None else ())


@physics
def new_heads_model(robot, train_trajs: list[Trajectory], cfg: HeadsConfig,
                    per_channel: tuple[str, ...] | None = None) -> tuple[LearnedArm, list[Trajectory]]:
    """A fresh ``cfg.arch`` network with ``cfg.sizes`` (seed ``cfg.seed``) whose normalizer is fitted
    on the measured frames of the training logs, and those logs with the residual channels it reads.
    ``per_channel``: its features (default :func:`heads_layout`'s); residual features among them
    (``RESIDUAL_FEATURES``) are computed by ``cfg.residual_input``, calibrated on the free-motion
    logs of ``train_trajs``."""
    channels, feats = heads_layout(robot, train_trajs, cfg.residual_input)
    feats = feats if per_channel is None else tuple(per_channel)
    res_feats = tuple(f for f in feats if f in RESIDUAL_FEATURES)
    res_prior = None
    if res_feats:
        if cfg.residual_input is None:
            raise ModelError(f"train_heads: the features {list(res_feats)} need a residual_input (the classical "
                             "method they come from)")
        # calibrated on the training logs' free motion only; the same prior writes every log's channel
        res_prior = ForcePrior.fit(robot, cfg.residual_input, train_trajs)
        train_trajs = add_residual_channels(robot, res_prior, train_trajs, channels, res_feats)
    tmp = make_learned_arm(robot, "mlp", channels=channels, per_channel=feats, normalizer=Normalizer(
        np.zeros(len(channels) * len(feats)), np.ones(len(channels) * len(feats))), effort_scale=1.0,
        width=4, depth=1, d=4, head_width=4)
    logs = [arm_log(robot, t, channels, feats) for t in train_trajs]
    frames = np.concatenate([frames_of_log(tmp, lg.base.inputs.q_target, lg.base.q_meas, lg.base.dq_meas,
                                           lg.base.inputs.v_supply, lg.base.inputs.enable, lg.telemetry)
                             for lg in logs])
    base = robot.nominal_params()
    model = make_learned_arm(robot, cfg.arch, channels=channels, per_channel=feats, normalizer=fit_normalizer(frames),
                             effort_scale=_effort_scale(robot, base, logs, channels, False), base=base,
                             key=jax.random.PRNGKey(cfg.seed), **dict(cfg.sizes or {}))
    if res_prior is not None:
        model = dataclasses.replace(model, residual_input=res_prior)
    return model, train_trajs


def _check_init(init: LearnedArm, cfg: HeadsConfig) -> None:
    """A residual input is chosen with the network's inputs: with ``init`` only its own."""
    have = init.residual_input
    if cfg.residual_input is not None and (have is None or have.method != cfg.residual_input):
        raise ModelError(f"train_heads: a residual input is chosen with the network's inputs, from scratch only; "
                         f"the initial model reads {'no residual' if have is None else repr(have.method)}, "
                         f"not {cfg.residual_input!r}")


def _mirror_of(robot, layout) -> tuple[list[int], np.ndarray]:
    """(raw frame columns negated by the reflection, P) for :func:`mirror_augment`, or a one-line
    ModelError when the arm is not mirror-symmetric."""
    try:
        dyn = ArmDynamics(robot)
    except ModelError:
        dyn = None
    sym = None if dyn is None else mirror_symmetry(robot, dyn=dyn)
    if sym is None:
        raise ModelError(f"train_heads: --augment-mirror needs an arm that is mirror-symmetric about a vertical "
                         f"plane through its yaw joint; {robot.name} is not (or has no yaw joint)")
    assert dyn is not None  # mirror_symmetry found a symmetry, so the dynamics model exists
    est = dyn.joints
    off = [c for c in layout.channels if c not in est]
    if off:
        raise ModelError(f"train_heads: --augment-mirror: channels {off} are not arm joints of {robot.name} "
                         f"(the mirror is defined on {list(est)})")
    F = len(layout.per_channel)
    flips = [c for c in layout.channels if sym[0][est.index(c)] < 0]
    neg = [layout.channels.index(c) * F + layout.per_channel.index(f) for c in flips for f in ODD_FEATURES
           if f in layout.per_channel]
    return neg, sym[1]


def _batch_fn(robot, model: LearnedArm, tr: HeadData, cfg: HeadsConfig):
    """``batch_fn(step)`` of the trainer: ``cfg.batch`` windows drawn with the generator of
    (seed, step), mirrored, rotated about the yaw joint and with input noise as ``cfg`` says."""
    B, noise = int(cfg.batch), float(cfg.noise)
    std = np.asarray(model.normalizer.std, np.float32)
    lay = model.layout
    yaw = None
    if cfg.augment_yaw:
        found, c, F = yaw_channel(robot, lay, "--augment-yaw")
        cols = [c * F + lay.per_channel.index(f) for f in ("q_target", "q") if f in lay.per_channel]
        yaw = (cols, found[1], found[2], c * F + lay.per_channel.index("q"))
    mirror = _mirror_of(robot, lay) if cfg.augment_mirror else None

    def batch_fn(step: int) -> HeadData:
        rng = np.random.default_rng([int(cfg.seed), int(step)])
        b = tr.take(rng.choice(tr.n, size=B, replace=tr.n < B))
        if mirror is not None:
            b = mirror_augment(b, *mirror, rng)
        if yaw is not None:
            b = yaw_augment(b, *yaw, rng)
        if noise > 0:  # input noise (augmentation): sigma in units of each feature's training std
            b = HeadData(b.x + noise * std * rng.standard_normal(b.x.shape).astype(np.float32), b.force, b.force_w,
                         b.contact, b.condition, b.prior)
        return jax.tree.map(jnp.asarray, b)

    return batch_fn


def _residual_features(model: LearnedArm) -> list[str]:
    return [f for f in model.layout.per_channel if f in RESIDUAL_FEATURES]


@physics
def train_heads(robot_name: str, train_trajs: list[Trajectory], val_trajs: list[Trajectory],
                cfg: HeadsConfig = HeadsConfig(), *, out: str | Path, init: LearnedArm | None = None,
                resume: bool = False, progress: bool = True) -> dict[str, Any]:
    """Train the force / gate / condition heads on teacher-forced windows (module docstring) and
    write RUN/arm_model.json + RUN/arm_model.eqx. ``init``: a model to start from (its layout,
    normalizer, effort scales, torque head, force frame and force prior are kept; a benchmark
    recipe may pass a fresh model of :func:`new_heads_model` changed in one of those); otherwise a
    fresh model (:func:`new_heads_model`). ``cfg``: :class:`HeadsConfig`. Returns the
    arm_model.json dict."""
    t_all = _time.perf_counter()
    if not train_trajs or not val_trajs:
        raise DataError(None, f"train_heads needs training and validation logs (got {len(train_trajs)} and "
                              f"{len(val_trajs)})")
    robot = load_robot(robot_name)
    if init is None:
        model, train_trajs = new_heads_model(robot, train_trajs, cfg)
    else:
        _check_init(init, cfg)
        model, train_trajs = init, with_residual_inputs(robot, init, train_trajs)
    trunk = bool((init is None) if cfg.trunk is None else cfg.trunk)
    val_trajs = with_residual_inputs(robot, model, val_trajs)
    tr = head_data(robot, model, train_trajs, lazy=True)  # windows gathered per batch
    va = head_data(robot, model, val_trajs, lazy=True)
    val_cache: dict = {}

    def val_fn(m):  # chunk by chunk: a scale-1 validation set in one call needs ~11 GB of activations
        aux = val_metrics(m, va, contact_weight=CONTACT_WEIGHT, _fn=val_cache)
        return {"val": aux["force_mae"], **{f"val_{k}": v for k, v in aux.items()}}

    tcfg = TrainConfig(steps=int(cfg.steps), lr=float(cfg.lr), warmup=max(1, int(cfg.steps) // 20),
                       eval_every=int(cfg.eval_every), checkpoint_every=int(cfg.eval_every), seed=int(cfg.seed),
                       ema_decay=0.99, weight_decay=float(cfg.weight_decay))
    prior = model.force_prior
    described = {"augment_yaw": bool(cfg.augment_yaw), "augment_mirror": bool(cfg.augment_mirror),
                 "force_frame": frame_name(model),
                 "residual_input": None if model.residual_input is None else model.residual_input.method,
                 "residual_features": _residual_features(model)}
    meta = {"robot": robot_name, "arch": model.arch, "heads_only": True, "trunk": trunk,
            "force_prior": None if prior is None else prior.method,
            "force_prior_labelled": None if prior is None else prior.calibration.labelled, **described,
            "train": [t.name for t in train_trajs], "val": [t.name for t in val_trajs]}
    res = train(Path(out), model, heads_loss, _batch_fn(robot, model, tr, cfg), tcfg, val_fn=val_fn, resume=resume,
                progress=progress, meta=meta, filter_spec=_head_spec(model, trunk))
    final = val_fn(res.best)
    return save_arm_model(out, robot_name, res.best, None if init is None else _base_desc(init), extra={
        "training": {"method": "train_heads (teacher forcing on measured frames, no simulator)",
                     "torque_head": "as initialised" if init is not None else "untrained (train_heads only)",
                     "trunk_trained": trunk, "steps": res.steps, "best_step": res.best_step,
                     "best_val_force_mae": final["val"], "val_gate_bce": final["val_gate"],
                     "s_per_1k_steps": res.s_per_1k_steps, "compile_s": res.compile_s, "batch": int(cfg.batch),
                     "lr": cfg.lr, "noise": float(cfg.noise), "weight_decay": float(cfg.weight_decay),
                     "contact_weight": CONTACT_WEIGHT, **described,
                     "best_val_force_mae_contact": final["val_force_mae_contact"],
                     "wall_s": _time.perf_counter() - t_all},
        "data": {"train": [t.source_file or t.name for t in train_trajs],
                 "val": [t.source_file or t.name for t in val_trajs]}})
def frame_name(model: LearnedArm) -> str:
    """The force frame of ``model``'s force head: "joint", "yaw" or "base"."""
    return "joint" if model.force_joint is not None else ("yaw" if model.force_yaw else "base")


def _base_desc(model: LearnedArm) -> dict | None:
    """The analytic base description a residual model was saved with (None for a replacing model:
    its base is the robot's nominal model)."""
    if not model.residual:
        return None
    raise ModelError("train_heads: fine-tuning the heads of a residual model is not supported yet "
                     "(its analytic base description is not carried by LearnedArm)")
