"""The work behind ``actuatorlab train`` and ``infer``: one-joint training, whole-robot training
and causal online inference (re-exported by :mod:`actuatorlab.app.jobs`)."""

from __future__ import annotations


import contextlib
import dataclasses
import os
import time
from pathlib import Path
from typing import Any, Iterator

import jax
import numpy as np
from jax.experimental.compilation_cache import compilation_cache as compilation_cache_module


from ..precision import physics
from ..errors import DataError
from ..logs import load_logs
from ..logs.format import Trajectory
from ..models.actuator_model import LEARNED_KINDS
from ..sim.rollout import make_batches
from ..evaluate import summarize
from ..evaluate.replay import replay_joint
from ..identify.folds import GROUP_KEYS, LOG_KEY, Fold, condition_folds, split_validation, time_split
from ..models.modelfile import load_model
from ..files import atomic_write
from ..errors import ModelError, UnknownNameError
from ..learned.joint_train import build_joint_model, DEFAULT_CURRICULUM, JOINT_DISTILL, JOINT_SIZES, load_joint_model, \
    save_joint_model, train_joint, WindowSampling
from ..learned.gate import GATES, choose_gate, gate_scores, gated
from ..models.nets import arch_sizes, ARCHS
from ..learned.trainer import TrainConfig
from ..learned.distill import DistillConfig
from ..learned.learn import check_resume_teacher, run_meta
from ..identify.select import FamilyOptions, fit_family
from ..models.modelfile import model_to_dict
from ..learned.arm import arm_log, load_arm_model
from ..identify.images import ImageOptions, load_image_supervision
from ..robots import load_robot
from ..learned.arm_train import ArmTrainConfig, DEFAULT_BUDGET, FULL_BUDGET, train_arm
from ..sim.force import LearnedTelemetry, read_force_log
from ..precision import physics_precision
from ..sim.arm_learned import gate_weight, OnlineEstimator, RESIDUAL_FEATURES

from .data_files import _setup_summary, load_data


#: default one-joint training budget (``actuatorlab train`` without --steps): optimizer steps,
#: windows per step, history frames; minutes on two CPU cores for the one-joint default sizes
TRAIN_BUDGET = {"steps": 600, "n_windows": 16, "history": 8}
#: the default analytic teacher when none is given: the family selection of ``actuatorlab fit`` at this budget
TEACHER_FIT = {"budget": "quick"}


def _described(d: dict) -> dict:
    """What a teacher is (stored in RUN/config.json, compared on ``--resume``): model and parameters."""
    return {"model": d["model"], "parameters": {k: {"value": float(v["value"])} for k, v in d["parameters"].items()}}


def _teacher(opts: "JointTrainOptions", fit_part: list[Trajectory], dt: float,
             resumed: dict | None) -> tuple[dict | None, str]:
    """(the warm start's teacher, a loaded analytic model.json, or None; a one-line account of where
    it came from): ``opts.teacher``, else the residual's base, else the resumed run's (``resumed``:
    its RUN/config.json meta; a run written before the warm start existed has no teacher), else the
    default analytic model fitted on ``fit_part`` first (:data:`TEACHER_FIT`)."""
    if opts.distill is None:
        return None, "no warm start (cold start)"
    src = opts.teacher if opts.teacher is not None else opts.residual
    if src is not None:
        d = load_model(src)
        if d.get("kind") in LEARNED_KINDS:
            raise ModelError(f"{src}: the warm start's teacher is a fitted analytic model (actuatorlab fit), "
                             f"not a {d['kind']} one")
        return _described(d), f"teacher {src}"
    if resumed is not None:
        stored = resumed.get("teacher")
        return (None, "none: the resumed run was a cold start") if stored is None else (
            _described(stored), f"teacher of the resumed run ({stored.get('model')})")
    t0 = time.perf_counter()
    sel = fit_family(fit_part, options=FamilyOptions(seed=opts.seed, dt=dt, budget=TEACHER_FIT["budget"]))
    d = model_to_dict(sel.final, setup=_setup_summary(fit_part), data={"dt": sel.final.dt}, metrics={})
    return _described(d), (f"no teacher given: fitted the default analytic model ({sel.final.model}) on the training part "
               f"first ({TEACHER_FIT['budget']} budget, {time.perf_counter() - t0:.0f} s)")


@physics
@dataclasses.dataclass(frozen=True)
class JointTrainOptions:
    """Options of :func:`run_train` (one joint): ``arch``; ``residual`` (a fitted analytic
    RUN/model.json the network corrects); ``steps``, ``n_windows``, ``history`` (None: the
    TRAIN_BUDGET's); ``seed``; ``lr``; ``sizes``; ``dt`` [s] (None: the logs' or the residual's);
    ``curriculum`` (None: DEFAULT_CURRICULUM); ``validation`` "time" | "logs"; ``teacher``: the
    fitted analytic RUN/model.json of the warm start (None: the residual's base, else the default
    analytic model fitted on the training part first, :data:`TEACHER_FIT`); ``distill``: the warm
    start's :class:`~actuatorlab.learned.distill.DistillConfig` (default
    :data:`~actuatorlab.learned.joint_train.JOINT_DISTILL`, its seed offset by ``seed``; None: a
    cold start, no teacher); ``gate`` (a residual only): "groups" (default) scales the correction by
    the gate that earns its place on leave-one-group-out refits (:mod:`actuatorlab.learned.gate`, one
    more training per group), "none" keeps it whole."""

    arch: str = "transformer"
    residual: Any = None
    steps: int | None = None
    seed: int = 0
    lr: float = 3e-3
    n_windows: int | None = None
    history: int | None = None
    sizes: dict | None = None
    dt: float | None = None
    curriculum: Any = None
    validation: str = "time"
    teacher: Any = None
    distill: DistillConfig | None = JOINT_DISTILL
    gate: str = "groups"


#: what ``JointTrainOptions.gate`` may be
GATE_MODES = ("groups", "none")


def run_train(paths, out: str | Path = "run", opts: JointTrainOptions = JointTrainOptions(), *, resume: bool = False,
              progress: bool = True) -> dict:
    """Train a one-joint learned actuator (or, with ``residual``, a learned correction of that
    fitted analytic RUN/model.json) through the one-joint simulator; write RUN/model.json
    (``kind`` learned | residual), RUN/weights.eqx and the training run files (config.json,
    metrics.jsonl, checkpoint.ckpt, best.ckpt).

    Validation data come from the given logs only: ``validation="time"`` (default) holds back the
    last 25 % of every log (:func:`~actuatorlab.identify.select.time_split`), so that every
    condition (gain, trajectory family) is trained on; ``"logs"`` holds back whole logs
    (:func:`~actuatorlab.identify.select.split_validation`, every 4th by excitation). The network
    is trained on windows of the fit part and the EMA parameters with the lowest full-replay
    validation MAE are kept. With ``opts.gate="groups"`` (the default) a residual's correction is then
    gated: the same training on every leave-one-group-out subset, each in RUN/gate/GROUP/, decides how much of
    the correction earns its place on the held-out groups
    (:mod:`actuatorlab.learned.gate`); the model file records it under ``fit.correction_gate``.
    Returns the model dict plus ``_summary`` (metrics of the replay on all given logs) and
    ``_train`` (wall times). ``opts``: :class:`JointTrainOptions`."""
    if opts.arch not in ARCHS:
        raise UnknownNameError("architecture", opts.arch, list(ARCHS))
    if opts.gate not in GATE_MODES:
        raise UnknownNameError("correction gate", opts.gate, GATE_MODES)
    if opts.validation not in ("time", "logs"):
        raise UnknownNameError("validation split", opts.validation, ("time", "logs"))
    base = None
    if opts.residual is not None:
        base = load_model(opts.residual)
        if base.get("kind") in LEARNED_KINDS:
            raise ModelError(f"{opts.residual}: --residual needs a fitted analytic model (actuatorlab fit), "
                             f"not a {base['kind']} one")
    trajs = load_data(paths)
    if base is not None:
        for t in trajs:
            if t.setup.joint_type != base.get("joint_type", t.setup.joint_type):
                raise DataError(t.source_file or t.name, f"unit mismatch: log is {t.setup.joint_type} but the "
                                                         f"residual's base model is {base.get('joint_type')}")
        opts = dataclasses.replace(opts, dt=opts.dt or (base.get("fit") or {}).get("dt"))
    out = Path(out)
    if not resume and (out / "checkpoint.ckpt").exists():  # before any fold is trained
        raise ModelError(f"{out / 'checkpoint.ckpt'}: the run folder already holds a checkpoint; resume it or "
                         "choose another output folder")
    choice = None
    if base is not None and opts.gate == "groups":
        choice = _choose_gate(trajs, out, opts, base, resume=resume, progress=progress)
    return _train_and_save(trajs, out, opts, base, resume=resume, progress=progress, choice=choice)


def _gate_folds(trajs: list[Trajectory]) -> list[Fold]:
    """The leave-one-group-out folds of the gate: by excitation, else one log each (none for one log)."""
    folds = condition_folds(trajs, GROUP_KEYS)
    if len(folds) < 2 and len(trajs) >= 2:
        folds = condition_folds(trajs, (LOG_KEY,))
    return folds if len(folds) >= 2 else []


def _choose_gate(trajs: list[Trajectory], out: Path, opts: JointTrainOptions, base: dict, *, resume: bool,
                 progress: bool) -> dict:
    """The residual's correction gate (:mod:`actuatorlab.learned.gate`): the same training on every
    leave-one-group-out subset (RUN/gate/GROUP/, reused when resuming a run whose fold finished),
    scored on the held-out group. Returns the ``fit.correction_gate`` record of the model file."""
    folds = _gate_folds(trajs)
    if not folds:
        return {"gate": 1.0, "note": "one log: no group to hold out, the correction is kept whole"}
    scores = []
    for f in folds:
        run = out / "gate" / f.label.replace("=", "_").replace("/", "_")
        if resume and (run / "model.json").is_file():
            d = load_model(run / "model.json")
        else:
            d = _train_and_save([trajs[i] for i in f.train], run, dataclasses.replace(opts, gate="none"), base,
                                resume=resume and (run / "checkpoint.ckpt").exists(), progress=progress)
        m = load_joint_model(d, run / "model.json")
        with physics_precision():  # on the fold model's own control grid
            scores.append(gate_scores(m, make_batches([trajs[i] for i in f.heldout], (d.get("fit") or {}).get("dt"))))
    return choose_gate(np.array(scores).T, GATES, [f.label for f in folds]).to_dict()


def _train_and_save(trajs: list[Trajectory], out: Path, opts: JointTrainOptions, base: dict | None, *,
                    resume: bool, progress: bool, choice: dict | None = None) -> dict:
    """One training of :func:`run_train` on ``trajs`` into ``out`` (validation split, teacher, model,
    training, model file); ``choice``: the correction gate record to apply before saving."""
    arch, steps, seed, lr = opts.arch, opts.steps, opts.seed, opts.lr
    n_windows, history, sizes, dt, curriculum, validation = (opts.n_windows, opts.history, opts.sizes, opts.dt,
                                                             opts.curriculum, opts.validation)
    steps = int(steps or TRAIN_BUDGET["steps"])
    n_windows = int(n_windows or TRAIN_BUDGET["n_windows"])
    history = int(TRAIN_BUDGET["history"] if history is None else history)
    if validation == "time":
        fit_part, val_part = map(list, zip(*[time_split(t, 0.75) for t in trajs]))
    else:
        fit_part, val_part = split_validation(trajs)
    fb = make_batches(fit_part, dt)
    dt = fb[0].dt
    vb = make_batches(val_part, dt)
    kind = "residual" if base is not None else "learned"
    resumed = run_meta(out, resume)
    teacher, said = _teacher(opts, fit_part, dt, resumed)
    if resumed is None or "teacher" in resumed:  # a run written before the warm start existed resumes cold
        check_resume_teacher(out, resume, teacher)
    # a replacing network keeps the teacher's plant terms (armature, offsets) around it
    model = build_joint_model(kind, arch, fb, base=base if base is not None else teacher, history=history,
                              sizes=sizes, seed=seed)
    cfg = TrainConfig(steps=steps, lr=lr, warmup=min(50, steps // 10), seed=seed,
                      checkpoint_every=max(25, steps // 10), eval_every=max(25, steps // 10))
    meta = {"kind": kind, "arch": arch, "residual": None if opts.residual is None else str(opts.residual),
            "fit_logs": [t.name for t in fit_part], "validation_logs": [t.name for t in val_part],
            "n_windows": n_windows, "history": history, "dt": dt, "validation": validation, "teacher": teacher,
            "distill": None if opts.distill is None else dataclasses.asdict(  # the run's seed draws the warm start's too
                dataclasses.replace(opts.distill, seed=opts.distill.seed + seed))}
    t0 = time.perf_counter()
    curriculum = tuple(curriculum or DEFAULT_CURRICULUM)
    meta["curriculum"] = [list(c) for c in curriculum]
    best, res = train_joint(out, fb, vb, model, cfg, sampling=WindowSampling(n_windows=n_windows, curriculum=curriculum),
                            resume=resume, progress=progress, meta=meta)
    wall = time.perf_counter() - t0
    if choice is not None:
        best = gated(best, float(choice["gate"]))
    batches = make_batches(trajs, dt)
    summary = summarize(replay_joint(best, batches))
    training = {"steps": steps, "n_windows": n_windows, "curriculum": meta["curriculum"], "lr": lr, "seed": seed,
                "best_step": res.best_step, "validation_mae": res.best_val, "wall_s": wall,
                "s_per_1k_steps": res.s_per_1k_steps, "compile_s": res.compile_s,
                "fit_logs": meta["fit_logs"], "validation_logs": meta["validation_logs"],
                "warm_start": {**(res.warm_start or {}), "teacher": said}}
    if choice is not None:
        training["correction_gate"] = choice
    data = {"logs": [{"name": t.name, "file": t.source_file, "conditions": t.conditions} for t in trajs],
            "n_samples": int(sum(b.n_samples for b in batches)), "dt": dt}

    full = arch_sizes(arch, **{**JOINT_SIZES.get(arch, {}), **(sizes or {})})
    stored = None
    if base is not None:  # what the replay needs, plus provenance
        stored = {**{k: base[k] for k in ("format", "format_version", "model", "description", "parameters",
                                          "joint_type", "controller", "setup") if k in base},
                  "fit": {"dt": (base.get("fit") or {}).get("dt")}, "source": str(opts.residual),
                  "git_revision": base.get("git_revision")}
    save_joint_model(out, best, arch=arch, sizes=full, base=stored,
                     setup=_setup_summary(trajs), data=data, training=training,
                     metrics={"train": {k: summary[k] for k in ("position_mae", "position_rmse",
                                                                 "position_relative_error")}})
    d = load_model(out / "model.json")
    d["_summary"] = summary
    return d


def split_arm_data(paths) -> tuple[list[Trajectory], list[Trajectory]]:
    """(training, validation) logs for whole-robot training: a dataset folder written by
    ``actuatorlab synth`` (with train/ and val/) gives its own split; other logs are split by
    :func:`~actuatorlab.identify.select.split_validation` (every 4th log by excitation)."""

    tr, va, rest = [], [], []
    for p in map(Path, paths):
        if (p / "train").is_dir() and (p / "val").is_dir():
            tr += load_logs([p / "train"])
            va += load_logs([p / "val"])
        else:
            rest.append(p)
    if rest:
        a, b = split_validation(load_logs(rest))
        tr, va = tr + a, va + b
    return tr, va


@contextlib.contextmanager
def compilation_cache(min_compile_s: float = 5.0) -> Iterator[Path | None]:
    """JAX's persistent compilation cache for a command: ``$XDG_CACHE_HOME/actuatorlab/jax``
    (default ``~/.cache/actuatorlab/jax``) unless the user has chosen a folder
    (``JAX_COMPILATION_CACHE_DIR``, which is then used as it is); programs that took at least
    ``min_compile_s`` [s] to compile are written; the previous settings are restored. A whole-robot
    training (5 s): the MJX training step of one window shape compiles in 40-65 s on 2 idle CPU
    cores (minutes on a loaded one) and loads from the cache in about 3 s (bench/journal/
    learned_speed.md). The one-joint family fit (``actuatorlab fit``, 0.2 s): 5-7 programs, about
    0.3 MB for the 11 shared XL330 logs, about 4 CPU s less from the second fit of the same shapes on
    (bench/journal/fit_rules.md). Entries are written without a lock; a reader that meets a
    half-written one (two commands at once) gets JAX's warning and compiles instead."""
    if jax.config.jax_compilation_cache_dir:  # type: ignore[attr-defined]
        yield Path(jax.config.jax_compilation_cache_dir)  # type: ignore[attr-defined]
        return
    folder = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "actuatorlab" / "jax"
    old = jax.config.jax_persistent_cache_min_compile_time_secs  # type: ignore[attr-defined]
    jax.config.update("jax_compilation_cache_dir", str(folder))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", float(min_compile_s))
    compilation_cache_module.reset_cache()
    try:
        yield folder
    finally:
        jax.config.update("jax_compilation_cache_dir", None)
        jax.config.update("jax_persistent_cache_min_compile_time_secs", old)
        compilation_cache_module.reset_cache()


@dataclasses.dataclass(frozen=True)
class TrainImages:
    """Camera supervision of a whole-robot training (:func:`run_train_arm`): ``masks`` (folder with
    cameras.json and NAME.npz, docs/format.md section 6), ``camera`` (camera_calibration.json of
    ``actuatorlab calibrate-camera``; None: the camera file's poses), ``weight`` (lambda [rad^2])."""

    masks: str | Path
    camera: str | Path | None = None
    weight: float = 1e-2


def run_train_arm(robot: str, paths, out: str | Path = "run", opts: ArmTrainConfig = ArmTrainConfig(), *,
                  budget: str | dict = "default", resume: bool = False, progress: bool = True,
                  images: TrainImages | None = None) -> dict:
    """Train a learned (or, with ``residual`` = an analytic RUN/arm_model.json, a residual)
    whole-robot actuator model through the MJX rollout and write RUN/arm_model.json (kind
    "learned" | "residual") + RUN/arm_model.eqx, loadable by ``evaluate --robot``
    (:func:`actuatorlab.learned.arm_train.train_arm`). ``budget``: "default" (finishes within 15 min on
    2 CPU cores for the neural_actuator suite at --scale 0.1), "full" (documented full run) or a
    dict of :data:`~actuatorlab.learned.arm_train.DEFAULT_BUDGET` keys. The run folder also holds the
    trainer's config.json, metrics.jsonl and checkpoints (``resume`` continues exactly). The
    training step's compilation is kept in JAX's persistent cache (:func:`compilation_cache`).
    ``images``: the masks of the training and validation logs join the loss and the validation
    (:mod:`actuatorlab.learned.arm_images`; arm_model.json's ``training.images``: cameras, weight,
    logs with masks)."""

    if isinstance(budget, str):
        if budget not in ("default", "full"):
            raise UnknownNameError("training budget", budget, ("default", "full"))
        budget = DEFAULT_BUDGET if budget == "default" else FULL_BUDGET
    tr, va = split_arm_data(paths)
    sup = None if images is None else load_image_supervision(load_robot(robot), tr + va, images.masks, images.camera,
                                                             ImageOptions(weight=images.weight))
    with compilation_cache():
        return train_arm(robot, tr, va, dataclasses.replace(opts, budget=dict(budget)), out=out, resume=resume,
                         progress=progress, images=sup)


def run_infer(model_path, paths, out: str | Path, *, robot: str | None = None) -> dict:
    """Causal online inference of a learned whole-robot model over logs, one frame at a time
    (:class:`~actuatorlab.sim.arm_learned.OnlineEstimator`: measured positions, logged commands and
    telemetry up to the present frame only). Writes OUT (CSV: log, time, effort/<channel> [N.m | N],
    force_x/y/z [N], contact, condition/<channel>) atomically; returns {"frames", "logs", "out",
    "mean_step_ms"}. For a model with a force prior the force is sigmoid(gate) (f_raw + f_prior),
    the prior's classical estimator stepped on the same frame (as ``estimate-force``). A model
    reading the estimated external torque ``tau_ext`` gets it from its ``residual_input`` stepped
    on the same frame (:class:`~actuatorlab.sim.force.LearnedTelemetry`); the logs need not
    carry it."""
    import io


    with physics_precision():
        r, m, d = load_arm_model(model_path, robot)
        est = OnlineEstimator(m)
        # tau_ext / f_lever are computed online from each frame, never read from the log (as estimate-force does)
        res = any(f in RESIDUAL_FEATURES for f in m.layout.per_channel)
        tel = LearnedTelemetry(r, m, f"infer {model_path}") if res else None
        feats = tuple(f for f in m.layout.per_channel if f not in RESIDUAL_FEATURES)
        ch = m.layout.channels
        buf = io.StringIO()
        buf.write(",".join(["log", "time"] + [f"effort/{c}" for c in ch] + ["force_x", "force_y", "force_z", "contact"]
                           + [f"condition/{c}" for c in ch]) + "\n")
        n, t_steps = 0, 0.0
        trajs = load_logs(list(paths))
        prior = m.force_prior.estimator(r) if m.force_prior is not None else None
        for traj in trajs:
            lg = arm_log(r, traj, ch, feats)
            b = lg.base
            est.reset()
            if prior is not None or tel is not None:
                flog = read_force_log(r, traj)
            if prior is not None:
                prior.reset()
            if tel is not None:
                tel.reset()
            for k in range(b.q_meas.shape[0]):
                t0 = time.perf_counter()
                o = est.step(b.inputs.q_target[k], b.q_meas[k], b.dq_meas[k], b.inputs.v_supply[k], b.inputs.enable[k],
                             lg.telemetry[k] if tel is None else tel(flog.frame(k)))
                force = o["force"] if prior is None else gate_weight(o["contact"]) * (o["force_raw"]
                                                                                      + prior.step(flog.frame(k)).force)
                t_steps += time.perf_counter() - t0
                n += 1
                vals = [*o["effort"], *force, o["contact"], *o["condition"]]
                buf.write(f"{traj.name},{traj.time[k]:.6g}," + ",".join(f"{float(v):.6g}" for v in vals) + "\n")
    atomic_write(out, buf.getvalue())
    return {"frames": n, "logs": len(trajs), "out": str(out), "mean_step_ms": 1e3 * t_steps / max(n, 1)}
