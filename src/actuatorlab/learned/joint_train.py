"""Training one-joint learned / residual actuators through the one-joint simulator, and their
model file (RUN/model.json with ``"kind": "learned" | "residual"``, weights beside it).

Precision: the entry points here run under :func:`~actuatorlab.precision.physics` (float64
physics); the networks stay float32 (:mod:`actuatorlab.models.nets`).

Training (:func:`train_joint`, the one-joint instance of the one training algorithm
:func:`actuatorlab.learned.learn.learn`, whose other instance is the whole robot's through MJX):
a warm start by distillation of an analytic teacher (:func:`distill_targets`), then windows of
``horizon`` control steps cut at random places of the
training logs, each restarted from the measured state (and measured history) at its start, are
replayed closed loop by :func:`~actuatorlab.learned.joint.simulate`; the loss is the Huber loss of
simulated vs measured positions (:func:`~actuatorlab.learned.joint.window_loss`), differentiated
through the whole window (BPTT through the simulator and the history buffer). The horizon grows
along a curriculum (default 32 -> 64 -> 128 steps, equal thirds of the run). Validation: the full
closed-loop replay MAE of validation logs (split off the *training* logs by
:func:`~actuatorlab.identify.select.split_validation`, never the held-out ones); the best EMA
parameters by validation are the model that is written.
"""

from __future__ import annotations

import dataclasses
from functools import partial
from pathlib import Path
from typing import Literal

import jax
import jax.numpy as jnp
import numpy as np

from ..errors import DataError, ModelError
from ..models.actuator import StepConfig
from ..models.params import neutral_params
from ..precision import physics, x64_enabled
from ..models.features import FeatureLayout, Normalizer, fit_normalizer
from .distill import DistillConfig
from .joint import JOINT_FEATURES, KINDS, JointModel, LogSet, analytic_effort, frame, log_set, measured_windows, \
    replay_mae, trainable, window_loss, windows
from .learn import Curriculum, Problem, learn
from .trainer import TrainConfig, TrainResult
from ..identify.fit import substeps_for
from ..sim.rollout import rollout
from ..models.modelfile import MODEL_FORMAT, MODEL_FORMAT_VERSION, params_from_model, save_model
from ..models.registry import get_model
from ..models.nets import make_net, zero_torque_head
from ..files import git_revision
from .checkpoint import load_learned, save_learned
from .. import __version__

__all__ = ["JOINT_SIZES", "ARCH_FEATURES", "DEFAULT_CURRICULUM", "build_joint_model", "WindowSampling", "train_joint",
           "JOINT_DISTILL", "teacher_step", "envelope_logs", "distill_targets", "save_joint_model",
           "load_joint_model", "WEIGHTS_NAME"]

#: one-joint default network sizes (a single channel of 7 features needs far less than the
#: whole-robot defaults of :data:`~actuatorlab.models.nets.ARCHS`; these train at a few steps
#: per second on two CPU cores). Override with ``sizes``.
JOINT_SIZES = {
    "transformer": dict(d=64, n_heads=4, n_layers=2, ff=128, head_width=64),
    "mlp": dict(width=128, depth=3, d=64, head_width=64),
    "gru": dict(hidden=64, n_layers=1, head_width=64),
    "lstm": dict(hidden=56, n_layers=1, head_width=64),
    "actuator_net": dict(width=32, depth=3, stride=1),
    "actuator_lstm": dict(hidden=16, n_layers=2),
}
#: per-channel features of the architectures that read a fixed layout (others read JOINT_FEATURES):
#: the Isaac Lab / mjlab actuator-net input, position error q* - q and velocity
ARCH_FEATURES = {"actuator_net": ("err", "dq"), "actuator_lstm": ("err", "dq")}
#: history forced by an architecture (a recurrent state instead of a window)
ARCH_HISTORY = {"actuator_lstm": 0}
#: (fraction of the run at which the horizon starts, horizon [control steps])
DEFAULT_CURRICULUM = ((0.0, 32), (1 / 3, 64), (2 / 3, 128))
WEIGHTS_NAME = "weights.eqx"
#: at most this many (window, target) pairs are distilled, evenly spread over the training frames
MAX_DISTILL_FRAMES = 80000
#: the one-joint warm start (``actuatorlab train`` on bench logs): 16 envelope logs per training log
#: and a longer distillation, measured on the real logs (bench/journal/learned_xl330.md): the
#: distilled replacing MLP replays held-out XL330 logs at 0.95-1.25x its teacher (3.9x without the
#: envelope), held-out STS3250 logs at 0.99-1.04x
JOINT_DISTILL = DistillConfig(steps=4000, lr=3e-3, envelope=16)
#: dwell of a step [s] and frequency of a sine [Hz] of the envelope's random commands (:func:`envelope_logs`)
ENVELOPE_DWELL = (0.05, 1.0)
ENVELOPE_FREQ = (0.1, 4.0)
#: (share of the envelope logs with the torque off for a while, shortest and longest such stretch
#: as a share of the log) (:func:`envelope_logs`)
ENVELOPE_OFF = (1 / 3, 0.2, 0.5)


def _gravity_effort(batches) -> float:
    """Largest static gravity effort of the training benches [N.m|N] (m l + m_arm l / 2) g."""
    vals = []
    for b in batches:
        pc = b.consts.plant
        vals.append(np.max(np.abs((pc.mass * pc.length + 0.5 * pc.arm_mass * pc.length) * pc.gravity)))
    return float(max(vals)) if vals else 0.0


def _measured_frames(layout, batches) -> np.ndarray:
    out = []
    for b in batches:
        c = jax.tree.map(jnp.asarray, b.consts)
        f = jax.vmap(lambda ci, qt, en, vs, q, dq: frame(layout, ci, qt, en, vs, q, dq))(
            c, jnp.asarray(b.q_target), jnp.asarray(b.enable), jnp.asarray(b.v_supply),
            jnp.asarray(b.q_meas), jnp.asarray(b.dq_meas))
        out.append(np.asarray(f)[np.asarray(b.mask)])
    return np.concatenate(out, 0)


@physics
def build_joint_model(kind: str, arch: str, batches, *, base: dict | None = None, history: int = 8,
                      sizes: dict | None = None, seed: int = 0, effort_scale: float | None = None,
                      effort_bound: float | None = None) -> JointModel:
    """A freshly initialised one-joint model for the logs of ``batches`` (their law and plant).

    ``kind`` "residual" needs ``base``, a loaded analytic model.json (its parameters and model
    structure are frozen inside); its torque head starts at zero, so the model starts as ``base``. Normalization is fitted on the measured frames of ``batches``
    (training logs only). Effort scale / bound default to the largest gravity effort g* of the
    benches: learned: scale g*, bound 2 g*; residual: scale 0.1 g*, bound 0.5 g* (1 N.m / N when
    the bench has no gravity)."""

    if kind not in KINDS:
        raise ModelError(f"unknown learned-model kind {kind!r}; available: {', '.join(KINDS)}")
    laws = {(b.law, b.plant) for b in batches}
    if len(laws) != 1:
        raise DataError(None, f"one-joint training needs logs of one control law and bench, got {sorted(laws)}")
    (law, plant), = laws
    history = ARCH_HISTORY.get(arch, history)
    if arch in ARCH_HISTORY and kind != "learned":
        raise ModelError(f"{arch} is a whole (learned) actuator with a carried state; a residual needs a "
                         "window architecture (mlp, transformer, gru, lstm)")
    layout = FeatureLayout(channels=("joint",), per_channel=ARCH_FEATURES.get(arch, JOINT_FEATURES), history=history)
    norm = fit_normalizer(_measured_frames(layout, batches))
    g = _gravity_effort(batches) or 1.0
    if kind == "residual":
        if base is None:
            raise ModelError("a residual model needs the fitted analytic model it corrects (RUN/model.json)")
        spec = get_model(base["model"])
        cfg = StepConfig(law, plant, spec.compliant, substeps_for(spec), spec.thermal)
        if spec.thermal:
            raise ModelError(f"{base['model']}: a learned residual cannot correct a +thermal model: its "
                             f"training windows start mid-log, where the winding temperature is not "
                             f"known; fit the residual over the model without +thermal")
        params = params_from_model(base)
        scale, bound = 0.1 * g, 0.5 * g
    else:
        cfg = StepConfig(law, plant)
        params = neutral_params()
        if base is not None:  # the bench's rotor inertia and plant offsets from a fitted model
            bp = params_from_model(base)
            params.update({k: bp[k] for k in ("armature", "q_offset", "force_offset")})
        scale, bound = g, 2.0 * g
    dtype = jnp.float64 if x64_enabled() else jnp.float32
    physics_params = {k: jnp.asarray(v, dtype) for k, v in params.items()}
    net = make_net(arch, n_features=layout.n_features, n_channels=1, history=history,
                   key=jax.random.PRNGKey(seed), **{**JOINT_SIZES.get(arch, {}), **(sizes or {})})
    if kind == "residual":  # start from the analytic model exactly (as a robot's residual does)
        net = zero_torque_head(net)
    return JointModel(net=net, norm=norm, params=physics_params, kind=kind, cfg=cfg, layout=layout,
                      effort_scale=float(effort_scale or scale), effort_bound=float(effort_bound or bound))


@physics
@dataclasses.dataclass(frozen=True)
class WindowSampling:
    """The training windows of :func:`train_joint`: ``n_windows`` per step [-] (default 16) and the
    horizon ``curriculum`` ((fraction of the run at which the stage starts, horizon [steps]) stages;
    default :data:`DEFAULT_CURRICULUM`)."""

    n_windows: int = 16
    curriculum: tuple = DEFAULT_CURRICULUM

    def stages(self) -> Curriculum:
        """The :class:`~actuatorlab.learned.learn.Curriculum` of ``curriculum``."""
        starts = [float(f) for f, _ in self.curriculum] + [1.0]
        return Curriculum(tuple(int(h) for _, h in self.curriculum),
                          tuple(max(b - a, 0.0) for a, b in zip(starts[:-1], starts[1:])))


def teacher_step(teacher: dict, law: str, plant: Literal["pendulum", "carriage"]) -> tuple[StepConfig, dict]:
    """(StepConfig without thermal, parameters) of a loaded analytic model.json ``teacher`` on a
    bench of ``law`` and ``plant``, for :func:`~actuatorlab.learned.joint.analytic_effort`; a
    learned model is a one-line ModelError."""
    if teacher.get("kind") in ("learned", "residual") or "parameters" not in teacher or "model" not in teacher:
        raise ModelError(f"{teacher.get('source', 'teacher')}: the warm start's teacher is a fitted analytic "
                         "model.json (actuatorlab fit), not a learned one")
    spec = get_model(teacher["model"])
    return StepConfig(law, plant, spec.compliant, substeps_for(spec), False), params_from_model(teacher)


def _envelope_command(rng: np.random.Generator, T: int, dt: float, lo: float, hi: float, kind: int) -> np.ndarray:
    """(T,) a random command in [lo, hi]: ``kind`` % 3 = 0 steps (levels uniform, dwell uniform in
    :data:`ENVELOPE_DWELL`), 1 a sum of 1-3 sines (frequency log-uniform in :data:`ENVELOPE_FREQ`),
    2 their mean."""
    t = np.arange(T) * dt
    steps = np.empty(T)
    k = 0
    while k < T:
        n = max(1, int(round(rng.uniform(*ENVELOPE_DWELL) / dt)))
        steps[k:k + n] = rng.uniform(lo, hi)
        k += n
    sines = np.full(T, rng.uniform(lo, hi))
    for _ in range(int(rng.integers(1, 4))):
        f = float(np.exp(rng.uniform(*np.log(ENVELOPE_FREQ))))
        sines += rng.uniform(0.0, 0.5 * (hi - lo)) * np.sin(2 * np.pi * f * t + rng.uniform(0.0, 2 * np.pi))
    cmd = (steps, sines, 0.5 * (steps + sines))[kind % 3]
    return np.clip(cmd, lo, hi)


@partial(jax.jit, static_argnames=("cfg",))
def _teacher_rollouts(cfg: StepConfig, params: dict, consts, qt, en, vs):
    """(q, dq) (B, T): closed-loop rollouts of the analytic model from rest at the first command."""
    def one(c, q, e, v):
        return rollout(cfg, params, c, q, e, v, q[0], jnp.zeros_like(q[0]))

    out = jax.vmap(one)(consts, qt, en, vs)
    return out.q, out.dq


def envelope_logs(logs: LogSet, cfg: StepConfig, params: dict, copies: int, rng: np.random.Generator) -> LogSet:
    """``copies`` synthetic logs per log of ``logs``: that log's constants (gain, bench), the enable
    and supply voltage of a log drawn at random (so that every gain meets every enable pattern),
    the torque switched off for a stretch in a share of them (:data:`ENVELOPE_OFF`: the effort of a
    disabled drive is the teacher's too), a random command (:func:`_envelope_command`, the three kinds in turn) within
    the range of the logs' commands, and as its "measured" q, dq the closed-loop rollout of the
    analytic model (``cfg`` without thermal, ``params``) from rest. The states a network meets when
    it replays a command the logs do not hold, where the teacher is still known."""
    qt = np.asarray(logs.qt)
    mask = np.asarray(logs.mask)
    lo, hi = float(qt[mask].min()), float(qt[mask].max())
    B, T = qt.shape
    src = np.repeat(np.arange(B), max(int(copies), 0))
    dts = np.asarray(logs.consts.law.dt).reshape(-1)
    cmd = jnp.asarray(np.stack([_envelope_command(rng, T, float(dts[i] if dts.size > 1 else dts[0]), lo, hi, j)
                                for j, i in enumerate(src)]), logs.qt.dtype)
    consts = jax.tree.map(lambda x: jnp.asarray(x)[src], logs.consts)
    other = rng.integers(0, B, size=len(src))  # enable and supply of any log, at this log's gain and bench
    en_np = np.array(logs.en)[other]
    for j in np.flatnonzero(rng.random(len(src)) < ENVELOPE_OFF[0]):  # the torque switched off for a while
        n = int(rng.uniform(*ENVELOPE_OFF[1:]) * T)
        k = int(rng.integers(0, T - n + 1))
        en_np[j, k:k + n] = 0.0
    en, vs = jnp.asarray(en_np, logs.en.dtype), logs.vs[other]
    q, dq = _teacher_rollouts(cfg, params, consts, cmd, en, vs)
    return LogSet(consts, cmd, en, vs, cmd, en, q, dq, logs.mask[other])


def distill_targets(model: JointModel, logs: LogSet, teacher: dict, cfg: DistillConfig) -> tuple:
    """The one-joint warm start's data: (windows (N, H+1, F), targets (N, 1), weights (N, 1)) at
    the measured frames of ``logs``, ``cfg.copies`` noisy copies (state noise ``cfg.noise`` x the
    logs' std of q and dq) and ``cfg.envelope`` synthetic logs per log (:func:`envelope_logs`, the
    teacher's own rollouts of random commands): the effort of ``teacher`` (a loaded analytic
    model.json; a residual's own base subtracted) in the network's units, clipped to its bound."""
    tcfg, tp = teacher_step(teacher, model.cfg.law, model.cfg.plant)
    dtype = logs.q_meas.dtype
    tp = {k: jnp.asarray(v, dtype) for k, v in tp.items()}
    rng = np.random.default_rng(cfg.seed)
    mask = np.asarray(logs.mask)
    sq, sdq = (float(np.std(np.asarray(a)[mask])) for a in (logs.q_meas, logs.dq_meas))
    sets = [logs]
    for _ in range(max(int(cfg.copies), 0)):  # the teacher's effort at states near the measured ones
        sets.append(logs._replace(q_meas=logs.q_meas + cfg.noise * sq * rng.standard_normal(logs.q_meas.shape),
                                  dq_meas=logs.dq_meas + cfg.noise * sdq * rng.standard_normal(logs.dq_meas.shape)))
    if cfg.envelope > 0:
        sets.append(envelope_logs(logs, tcfg, tp, cfg.envelope, rng))
    xs, ys = [], []
    for lg in sets:
        m = np.asarray(lg.mask)
        tau = np.asarray(analytic_effort(tcfg, tp, lg))
        if model.kind == "residual":
            tau = tau - np.asarray(analytic_effort(dataclasses.replace(model.cfg, thermal=False), model.params,
                                                   lg))
        xs.append(np.asarray(measured_windows(model.layout, lg))[m])
        ys.append(tau[m][:, None])
    x, y = np.concatenate(xs), np.concatenate(ys)
    b = model.effort_bound / model.effort_scale
    sel = np.unique(np.linspace(0, len(x) - 1, min(len(x), MAX_DISTILL_FRAMES)).astype(int))
    return x[sel], np.clip(y[sel] / model.effort_scale, -b, b), np.ones((len(sel), 1))


def _torque(m: JointModel, win):
    """The network's normalized effort (1,) on one raw window of frames (H+1, F)."""
    return m.net(m.norm.apply(win)).torque


def train_joint(run_dir, fit_batches, val_batches, model: JointModel, cfg: TrainConfig, *,
                sampling: WindowSampling = WindowSampling(), resume: bool = False,
                progress: bool = True, meta: dict | None = None) -> tuple[JointModel, TrainResult]:
    """Train ``model`` on windows of ``fit_batches`` (one Batch: one law/plant) by the one algorithm
    of :func:`~actuatorlab.learned.learn.learn` through the one-joint scan, ``sampling`` the
    windows; validation = full-replay MAE on ``val_batches`` (None: no validation, the final EMA is
    kept). ``meta``: the run's record (RUN/config.json); its ``"teacher"``, an analytic model
    ({"model", "parameters"} as in a model.json), is the warm start's: the network first learns its
    effort (``meta["distill"]``: :class:`~actuatorlab.learned.distill.DistillConfig` fields,
    default the defaults; a residual over the teacher itself starts exactly from it, its torque
    head being zero, so nothing is distilled) and the initial model is validated too. No teacher:
    a cold start. Returns (best model, TrainResult with ``warm_start``)."""
    teacher = (meta or {}).get("teacher")
    distill = DistillConfig(**((meta or {}).get("distill") or {}))
    n_windows = int(sampling.n_windows)
    if len(fit_batches) != 1:
        raise DataError(None, "one-joint training needs logs of one control law and bench")
    logs = log_set(model, fit_batches[0])
    n_valid = np.asarray(fit_batches[0].mask).sum(1)
    val_logs = [log_set(model, b) for b in (val_batches or [])]
    base_key = jax.random.PRNGKey(cfg.seed + 1)
    cur = sampling.stages()

    def batch(stage: int, step: int):
        hz = cur.lengths[stage]
        k = jax.random.fold_in(base_key, step)
        ka, kb = jax.random.split(k)
        idx = np.asarray(jax.random.randint(ka, (n_windows,), 0, len(n_valid)))
        span = np.maximum(n_valid[idx] - hz, 1)
        k0 = np.floor(np.asarray(jax.random.uniform(kb, (n_windows,))) * span).astype(np.int32)
        return windows(model, logs, idx, k0, hz)

    def loss_fn(m, w):
        return window_loss(m, w)

    def val_fn(m):
        mae = replay_mae(m, val_logs)
        return {"val": mae, "val_mae": mae}

    warm: dict = {"teacher": None if teacher is None else teacher.get("model")}
    distill_data = None
    if teacher is not None:
        if hasattr(model.net, "step"):
            warm.update(steps=0, note=f"{model.net.__class__.__name__} carries a state: no warm start")
        elif model.kind == "residual" and teacher_step(teacher, model.cfg.law, model.cfg.plant)[1] == {
                k: float(v) for k, v in model.params.items()}:
            warm.update(steps=0, note="the teacher is the residual's base: the zeroed torque head reproduces it")
        else:
            def distill_data(m):
                return distill_targets(m, logs, teacher, distill)
        cfg = dataclasses.replace(cfg, eval_at_start=bool(val_logs))
    problem = Problem(loss=loss_fn, batch=batch, validate=val_fn if val_logs else None, trainable=trainable(model),
                      distill_data=distill_data, torque=_torque, distill=distill, warm=warm)
    res = learn(run_dir, model, problem, cfg, cur, resume=resume, progress=progress, meta=meta)
    return res.best, res


# ---------------------------------------------------------------------------------------------
# model file


def save_joint_model(run_dir, model: JointModel, *, arch: str, sizes: dict, base: dict | None,
                     setup: dict, data: dict, training: dict, metrics: dict | None = None) -> Path:
    """Write RUN/weights.eqx (network) and RUN/model.json (kind, layout, normalizer, physics)."""
    run_dir = Path(run_dir)
    corrects = ""  # a residual's model name names the analytic model it corrects
    if model.kind == "residual":
        if base is None:
            raise ModelError(f"{run_dir}: a residual model is saved with the analytic model it corrects (base)")
        corrects = f"({base['model']})"
    save_learned(run_dir / WEIGHTS_NAME, model.net, layout=model.layout, normalizer=model.norm, arch=arch,
                 sizes=sizes, meta={"kind": model.kind})
    d = {"format": MODEL_FORMAT, "format_version": MODEL_FORMAT_VERSION, "kind": model.kind,
         "model": f"{model.kind}:{arch}" + corrects,
         "arch": arch, "sizes": sizes, "weights": WEIGHTS_NAME,
         "layout": model.layout.to_dict(), "normalizer": model.norm.to_dict(),
         "effort_scale": model.effort_scale, "effort_bound": model.effort_bound,
         "step_config": {"law": model.cfg.law, "plant": model.cfg.plant, "compliant": model.cfg.compliant,
                         "substeps": model.cfg.substeps},
         "physics_parameters": {k: float(v) for k, v in model.params.items()},
         "base": base, "joint_type": setup.get("joint_type"), "controller": setup.get("controller"),
         "actuator": setup.get("actuator"), "setup": setup, "fit": {"dt": data.get("dt"), **training},
         "data": data, "metrics": metrics or {}, "package_version": __version__,
         "git_revision": git_revision()}
    return save_model(d, run_dir / "model.json")


@physics
def load_joint_model(d: dict, path: Path) -> JointModel:
    """The JointModel of a loaded learned/residual model.json (``path``: that file, for the
    weights' relative path and error messages)."""

    path = Path(path)
    for key in ("weights", "layout", "normalizer", "physics_parameters", "step_config", "arch"):
        if key not in d:
            raise ModelError(f"{path}: learned model file has no {key!r}")
    wpath = path.parent / d["weights"]
    lm = load_learned(wpath)
    layout = FeatureLayout.from_dict(d["layout"])
    layout.check_compatible(lm.layout, where=str(wpath))
    norm = Normalizer.from_dict(d["normalizer"], layout.n_features)
    sc = d["step_config"]
    dtype = jnp.float64 if x64_enabled() else jnp.float32
    try:
        return JointModel(net=lm.net, norm=norm,
                          params={k: jnp.asarray(float(v), dtype) for k, v in d["physics_parameters"].items()},
                          kind=d["kind"], cfg=StepConfig(sc["law"], sc["plant"], bool(sc.get("compliant", False)),
                                                         int(sc.get("substeps", 1))),
                          layout=layout, effort_scale=float(d["effort_scale"]), effort_bound=float(d["effort_bound"]))
    except (KeyError, TypeError, ValueError) as e:
        raise ModelError(f"{path}: malformed learned model ({e.__class__.__name__}: {e})") from None
