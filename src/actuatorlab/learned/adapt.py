"""Online adaptation: fine-tune a trained learned actuator (a whole robot's, or one joint's) to another
unit or condition from a few logs.

:func:`adapt_arm` takes a trained RUN/arm_model.json and at most ``AdaptConfig.max_trajectories``
logs of the new unit (docs/learned_arm.md, "Adaptation to another unit"):

1. **Residual model**: the analytic base's parameter sets are refitted on the new logs
   (:func:`~actuatorlab.identify.arm_fit.fit_arm`, CMA-ES started from the base, step 0.1: a local
   refinement, never worse on the fit windows than the base). The unit-to-unit variation of the
   virtual hardware is in the analytic parameters (friction, armature, motor gain; synth/truth.py
   ``VARIATION``). By default that refit is the whole adaptation (:data:`DEFAULT_STEPS`): fine-tuning
   the residual network on a dozen short logs lowered the checkpoint logs' error but not the new
   unit's test error, on either unit measured (bench/journal/adapt.md).
2. **Replacing model** (and a residual one when ``steps`` is given): the network is fine-tuned
   through MJX from its trained weights (:func:`~actuatorlab.learned.arm_train.train_arm` with
   ``init``: layout, normalizer and analytic base kept, no warm start), ``steps`` steps of
   :data:`ADAPT_BATCH` windows, the training run's window shape (so the compiled step can come from
   the persistent compilation cache). The last ``n_val`` adaptation logs choose the checkpoint;
   when fine-tuning never beats the starting network on them the starting network is kept (for a
   residual: with its refitted base).

**One joint** (a RUN/model.json of the one-joint ``train``, :func:`adapt_joint`; the same servo at
another gain or load): the same two steps through the one-joint simulator. The residual's base is
refitted with :func:`~actuatorlab.identify.fit.fit_model` from its values (step 0.1, CMA-ES only)
on the first 75 % of every adaptation log and kept only when it replays the last 25 % better;
the network is fine-tuned by :func:`~actuatorlab.learned.joint_train.train_joint` from its trained
weights, on the first 75 % of every adaptation log, the last 25 % choosing the checkpoint (the
one-joint ``train``'s default validation: a few logs of one condition leave no whole log to spare),
the starting model validated too, so it is kept when fine-tuning never beats it. Measured on the
real XL330 at a new gain and on a zoo servo at new masses, neither step lowered the held-out error
(bench/journal/adapt.md): the defaults are the ones built, not a tuned rule.

The adapted model is written to OUT atomically: it is built in a temporary sibling folder and
renamed to OUT at the end, so a failed run leaves neither OUT nor RUN changed. OUT equal to RUN or inside it,
or an existing OUT, is refused before any work.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import time as _time
from pathlib import Path
from typing import Any, Callable

import equinox as eqx
import jax.numpy as jnp
import numpy as np

from ..errors import ActuatorlabError, DataError, ModelError
from ..identify.arm_fit import fit_arm
from ..identify.fit import fit_model
from ..identify.folds import time_split
from ..logs.format import Trajectory
from ..models.actuator_model import load
from ..models.modelfile import load_model, params_from_model
from ..precision import physics
from ..sim.rollout import make_batches
from .arm import load_arm_model, save_arm_model
from .arm_train import ArmTrainConfig, train_arm
from .joint import log_set, replay_mae
from .joint_train import WindowSampling, load_joint_model, save_joint_model, train_joint
from .trainer import TrainConfig

__all__ = ["AdaptConfig", "adapt_arm", "adapt_joint", "adapt", "adaptation_logs", "check_adapt_out", "JOINT_STEPS"]


#: windows per fine-tuning step: 2, as measured (bench/journal/adapt.md); training's default batch
#: (learned.arm_train.DEFAULT_BUDGET) grew to 4 after those runs, which would cost a new compile
ADAPT_BATCH = 2
#: fine-tuning steps when ``AdaptConfig.steps`` is None, by model kind, judged on two units (synth
#: seeds 11 and 12, bench/journal/adapt.md, 2026-12-05): a replacing network 80 steps at lr 3e-4
#: (-28.9 % / -71.0 % test MAE, against -14.0 % / -60.9 % at 40 steps and lr 1e-4); a residual none
#: (80 steps moved its test MAE by -0.8 / 0 points over the base refit, at 7-11 min wall)
DEFAULT_STEPS = {"learned": 80, "residual": 0}
#: one joint (:func:`adapt_joint`): fine-tuning steps when ``AdaptConfig.steps`` is None, by kind
JOINT_STEPS = {"learned": 150, "residual": 150}
#: a robot: fine-tuning learning rate (training's) and CMA-ES evaluations of the residual base's refit
ARM_LR, ARM_REFIT_EVALS = 3e-4, 40
#: one joint: CMA-ES evaluations of the residual base's refit (CMA-ES of one joint is cheap) and
#: the fine-tuning's learning rate (training's is 3e-3)
JOINT_REFIT_EVALS, JOINT_LR = 400, 1e-3
#: one joint: windows per fine-tuning step and their horizon [control steps]
JOINT_WINDOWS, JOINT_HORIZON = 16, 128


@dataclasses.dataclass(frozen=True)
class AdaptConfig:
    """Settings of :func:`adapt_arm` and :func:`adapt_joint`.

    Fields:
        steps: fine-tuning optimizer steps of the network [-] (default None: the model kind's,
            :data:`DEFAULT_STEPS` for a robot (80 replacing, 0 residual), :data:`JOINT_STEPS` for one
            joint; 0: no fine-tuning).
        lr: peak learning rate of the fine-tuning [-] (default None: 3e-4 for a robot, training's;
            :data:`JOINT_LR` for one joint).
        seed: seed of the batches and of the base refit [-] (default 0).
        max_trajectories: at most this many logs of the new unit are used, evenly spread over them
            by name [-] (default 12).
        n_val: of those, the last this many (every k-th) choose the checkpoint [-] (default 2; a
            robot only: one joint validates on the last 25 % of every log).
        refit_evals: CMA-ES evaluations of a residual's base refit [-] (default None: 40 for a robot,
            :data:`JOINT_REFIT_EVALS` for one joint; 0: no refit).
        refit_windows: fit windows of a robot's base refit, evenly spread [-] (default 16).
    """

    steps: int | None = None
    lr: float | None = None
    seed: int = 0
    max_trajectories: int = 12
    n_val: int = 2
    refit_evals: int | None = None
    refit_windows: int = 16

    def resolved(self, one_joint: bool) -> "AdaptConfig":
        """This config with the path's defaults in place of None (``steps`` stays None: by kind)."""
        return dataclasses.replace(
            self, lr=(JOINT_LR if one_joint else ARM_LR) if self.lr is None else self.lr,
            refit_evals=(JOINT_REFIT_EVALS if one_joint else ARM_REFIT_EVALS) if self.refit_evals is None
            else self.refit_evals)


def adaptation_logs(trajs: list[Trajectory], cfg: AdaptConfig) -> tuple[list[Trajectory], list[Trajectory]]:
    """(fine-tuning logs, checkpoint-choice logs): at most ``cfg.max_trajectories`` of ``trajs``,
    evenly spread over them sorted by name; every k-th of those (``cfg.n_val`` of them, none with
    fewer than 4 logs, which then serve both) choose the checkpoint."""
    if not trajs:
        raise DataError(None, "adapt: no logs of the new unit")
    if cfg.max_trajectories < 1:
        raise ActuatorlabError(f"adapt: max_trajectories must be >= 1 (got {cfg.max_trajectories})")
    s = sorted(trajs, key=lambda t: t.name)
    keep = [s[i] for i in np.unique(np.linspace(0, len(s) - 1, min(len(s), cfg.max_trajectories)).astype(int))]
    if len(keep) < 4 or cfg.n_val < 1:
        return keep, keep
    k = max(len(keep) // cfg.n_val, 2)
    va = [t for i, t in enumerate(keep) if i % k == k - 1][:cfg.n_val]
    return [t for t in keep if t not in va], va


def check_adapt_out(run: Path, out: Path) -> Path:
    """The model file of ``run`` (a run folder: its arm_model.json, else its model.json; or the file). OUT equal to RUN or inside it, or
    an OUT that already exists, is a one-line error (nothing is ever written over)."""
    if run.is_dir():
        model = next((run / n for n in ("arm_model.json", "model.json") if (run / n).is_file()), run / "arm_model.json")
    else:
        model = run
    if not model.is_file():
        raise ModelError(f"{run}: no arm_model.json or model.json to adapt (give a run folder of `train` or its model file)")
    if out.resolve() == model.parent.resolve() or model.parent.resolve() in out.resolve().parents:
        raise ActuatorlabError(f"--out {out}: is (inside) the run being adapted; give a new folder (RUN is never changed)")
    if out.exists():
        raise ActuatorlabError(f"--out {out}: already exists; give a new folder (adapt never writes over a run)")
    return model


def _refit_base(robot_name: str, desc: dict, base: dict, logs: list[Trajectory], cfg: AdaptConfig) -> tuple[dict, dict, dict]:
    """(new base description {"model", "params"}, new base parameter sets, fit record) of a
    residual's analytic base refitted on ``logs`` from its current values."""
    start = {k: np.asarray(v, float) for k, v in base.items()}
    f = fit_arm(robot_name, logs, model=desc.get("model"), init=[start], max_evals=int(cfg.refit_evals or 0),
                max_windows=int(cfg.refit_windows), seed=int(cfg.seed))
    rec = {"model": f["model"], "evaluations": f["evaluations"], "wall_s": f["wall_s"],
           "train_mae": f["train_mae"], "params": f["params"]}
    return {"model": f["model"], "params": f["params"]}, {k: jnp.asarray(v, jnp.float64)
                                                          for k, v in f["param_sets"].items()}, rec


def _build(model_path: Path, trajs: list[Trajectory], cfg: AdaptConfig, tmp: Path, progress: bool) -> dict[str, Any]:
    """Adapt the model of ``model_path`` into the (new, empty) folder ``tmp``; returns the saved dict."""
    t_wall, t_cpu = _time.perf_counter(), _time.process_time()
    cfg = cfg.resolved(one_joint=False)
    robot, m0, d0 = load_arm_model(model_path)
    robot_name = d0["robot"]
    tr, va = adaptation_logs(trajs, cfg)
    used = sorted({t.name for t in tr + va})
    desc = d0.get("base")
    model, refit = m0, None
    if m0.residual and int(cfg.refit_evals or 0) > 0:
        desc, base, refit = _refit_base(robot_name, desc or {}, m0.base, tr + [t for t in va if t not in tr], cfg)
        model = eqx.tree_at(lambda m: m.base, m0, base)
    training: dict[str, Any] = {"steps": 0}
    steps = int(DEFAULT_STEPS[d0["kind"]] if cfg.steps is None else cfg.steps)
    if steps > 0:
        opts = ArmTrainConfig(arch=m0.arch, residual=desc if m0.residual else None,
                              teacher=None if m0.residual else desc, steps=steps, seed=int(cfg.seed),
                              budget={"lr": float(cfg.lr or ARM_LR), "eval_every": max(1, steps // 4), "batch": ADAPT_BATCH})
        d1 = train_arm(robot_name, tr, va, opts, out=tmp, init=model, progress=progress)
        training = d1["training"]
        tuned = load_arm_model(tmp / "arm_model.json")[1]
        if training.get("init_val_mae") is None or training["best_val_mae"] < training["init_val_mae"]:
            model = tuned
        else:
            training = {**training, "kept": "the starting network: fine-tuning never beat it on the checkpoint logs"}
            for name in ("checkpoint.ckpt", "best.ckpt"):  # the fine-tuning's, not the saved model's
                (tmp / name).unlink(missing_ok=True)
    adaptation = {"from": str(model_path), "n_trajectories": len(used), "logs": used,
                  "checkpoint_logs": sorted(t.name for t in va), "config": dataclasses.asdict(cfg),
                  "base_refit": refit, "wall_s": _time.perf_counter() - t_wall, "cpu_s": _time.process_time() - t_cpu}
    return save_arm_model(tmp, robot_name, model, desc, extra={"training": training, "adaptation": adaptation,
                                                               "data": {"adapt": used}})


def _refit_joint_base(model, base: dict, fb, vb, cfg: AdaptConfig) -> tuple[Any, dict, dict]:
    """(model, base description, record): the residual's base refitted on the fit parts ``fb`` from
    its values (CMA-ES only, step 0.1), kept only when the residual model with it replays the
    validation parts ``vb`` better than with the base as given (a refit on a few logs can trade one
    parameter for another and fit them at the expense of the rest of the logs)."""
    f = fit_model(fb, base["model"], init=params_from_model(base), max_evals=int(cfg.refit_evals or 0),
                  n_starts=1, grad_steps=0, sigma0=0.1, seed=int(cfg.seed))
    dtype = next(iter(model.params.values())).dtype
    new = dataclasses.replace(model, params={k: jnp.asarray(float(f.params[k]), dtype) for k in model.params})
    before, after = replay_mae(model, [log_set(model, b) for b in vb]), replay_mae(new, [log_set(new, b) for b in vb])
    rec = {"model": f.model, "evaluations": f.evaluations, "wall_s": f.wall_s, "train_mae": f.train_mae,
           "validation_mae_before": before, "validation_mae_after": after, "kept": after < before}
    if after >= before:
        return model, base, rec
    return new, {**base, "parameters": {k: {**v, "value": float(f.params[k])} if k in f.params else v
                                        for k, v in base["parameters"].items()}}, rec


def _build_joint(model_path: Path, trajs: list[Trajectory], cfg: AdaptConfig, tmp: Path, progress: bool) -> dict[str, Any]:
    """Adapt the one-joint model of ``model_path`` into the (new, empty) folder ``tmp`` (module
    docstring, "One joint"); returns the saved model dict."""
    t_wall, t_cpu = _time.perf_counter(), _time.process_time()
    cfg = cfg.resolved(one_joint=True)
    d0 = load_model(model_path)
    if d0.get("kind") not in ("learned", "residual"):
        raise ModelError(f"{model_path}: a {d0.get('kind', 'analytic')} model; adapt takes a learned or residual "
                         f"one (actuatorlab train); refit an analytic model with actuatorlab fit")
    model = load_joint_model(d0, model_path)
    keep = adaptation_logs(trajs, dataclasses.replace(cfg, n_val=0))[0]  # every kept log: fit part + validation part
    jt = d0.get("joint_type")
    for t in keep:
        if jt and t.setup.joint_type != jt:
            raise DataError(t.source_file or t.name, f"unit mismatch: log is {t.setup.joint_type} but the model "
                                                     f"{model_path} is {jt}")
    dt = (d0.get("fit") or {}).get("dt") or (d0.get("data") or {}).get("dt")
    fit_part, val_part = map(list, zip(*[time_split(t, 0.75) for t in keep]))
    fb = make_batches(fit_part, dt)
    vb = make_batches(val_part, fb[0].dt)
    kinds = {(b.law, b.plant) for b in fb + vb}
    if kinds != {(model.cfg.law, model.cfg.plant)}:
        raise DataError(None, f"adapt: the logs are {sorted(kinds)} (control law, bench) but the model "
                              f"{model_path} was trained on {(model.cfg.law, model.cfg.plant)}")
    base, refit = d0.get("base"), None
    if model.kind == "residual" and base is not None and int(cfg.refit_evals or 0) > 0:
        model, base, refit = _refit_joint_base(model, base, fb, vb, cfg)
    steps = int(JOINT_STEPS[model.kind] if cfg.steps is None else cfg.steps)
    training: dict[str, Any] = {"steps": 0}
    if steps > 0:
        tcfg = TrainConfig(steps=steps, lr=float(cfg.lr or JOINT_LR), warmup=min(10, steps // 10), seed=int(cfg.seed),
                           checkpoint_every=max(25, steps // 4), eval_every=max(1, steps // 6), eval_at_start=True)
        meta = {"kind": model.kind, "arch": d0["arch"], "adapt_from": str(model_path), "teacher": None,
                "fit_logs": [t.name for t in fit_part], "validation_logs": [t.name for t in val_part]}
        best, res = train_joint(tmp, fb, vb, model, tcfg, progress=progress, meta=meta,
                                sampling=WindowSampling(n_windows=JOINT_WINDOWS, curriculum=((0.0, JOINT_HORIZON),)))
        first = next((m["val_mae"] for m in res.metrics if m.get("step") == 0 and "val_mae" in m), None)
        training = {"steps": steps, "lr": tcfg.lr, "best_step": res.best_step, "best_val_mae": res.best_val,
                    "init_val_mae": first, "wall_s": res.wall_s, "compile_s": res.compile_s}
        if res.best_step and (first is None or (res.best_val is not None and res.best_val < first)):
            model = best
        else:
            training["kept"] = "the starting network: fine-tuning never beat it on the validation parts"
            for name in ("checkpoint.ckpt", "best.ckpt"):  # the fine-tuning's, not the saved model's
                (tmp / name).unlink(missing_ok=True)
    used = sorted(t.name for t in keep)
    adaptation = {"from": str(model_path), "n_trajectories": len(used), "logs": used,
                  "validation": "the last 25 % of every log", "config": dataclasses.asdict(cfg), "base_refit": refit,
                  "wall_s": _time.perf_counter() - t_wall, "cpu_s": _time.process_time() - t_cpu}
    save_joint_model(tmp, model, arch=d0["arch"], sizes=d0["sizes"], base=base, setup=d0.get("setup") or {},
                     data={"logs": [{"name": t.name, "file": t.source_file, "conditions": t.conditions} for t in keep],
                           "dt": fb[0].dt},
                     training={**training, "adaptation": adaptation})
    return load_model(tmp / "model.json")


def _atomic(run: Path, out: Path, build: Callable[[Path, Path], dict[str, Any]]) -> dict[str, Any]:
    """``build(model file of RUN, tmp)`` into a temporary sibling of OUT, renamed to OUT when it
    succeeds; on any failure the temporary folder and the folders made for OUT are removed."""
    model_path = check_adapt_out(run, out)
    made = [p for p in (out.parent, *out.parent.parents) if not p.exists()]
    tmp = out.parent / f".{out.name}.adapt-{os.getpid()}"
    out.parent.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    try:
        d = build(model_path, tmp)
        os.replace(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        for p in made:  # folders made for OUT only (innermost first), when left empty
            if p.is_dir() and not any(p.iterdir()):
                p.rmdir()
        raise
    return d


@physics
def adapt_arm(run: str | Path, trajs: list[Trajectory], cfg: AdaptConfig = AdaptConfig(), *, out: str | Path,
              progress: bool = False) -> dict[str, Any]:
    """Adapt the learned or residual model of RUN (a run folder or its arm_model.json) to the unit
    that recorded ``trajs`` (module docstring) and write OUT/arm_model.json + weights (and the
    fine-tuning's metrics.jsonl and checkpoints). OUT is written atomically and must not exist;
    RUN is only read. Returns the saved dict, with ``adaptation`` (logs used, base refit, wall and
    CPU seconds)."""
    return _atomic(Path(run), Path(out), lambda m, tmp: _build(m, list(trajs), cfg, tmp, progress))


@physics
def adapt_joint(run: str | Path, trajs: list[Trajectory], cfg: AdaptConfig = AdaptConfig(), *, out: str | Path,
                progress: bool = False) -> dict[str, Any]:
    """Adapt the one-joint learned or residual model of RUN (a run folder of the one-joint ``train``
    or its model.json) to the logs ``trajs`` (the same servo at another gain or load; module
    docstring, "One joint") and write OUT/model.json + weights (and the fine-tuning's run files)
    atomically; OUT must not exist, RUN is only read. Returns the saved model dict; its
    ``fit.adaptation`` records the logs, the base refit, wall and CPU seconds."""
    return _atomic(Path(run), Path(out), lambda m, tmp: _build_joint(m, list(trajs), cfg, tmp, progress))


def adapt(run: str | Path, trajs: list[Trajectory], cfg: AdaptConfig = AdaptConfig(), *, out: str | Path,
          progress: bool = False) -> dict[str, Any]:
    """:func:`adapt_arm` for a whole-robot run (an arm_model.json), :func:`adapt_joint` for a one-joint one."""
    model = check_adapt_out(Path(run), Path(out))
    fn = adapt_arm if model.name == "arm_model.json" or _is_robot_file(model) else adapt_joint
    return fn(run, trajs, cfg, out=out, progress=progress)


def _is_robot_file(path: Path) -> bool:
    """True when the model file at ``path`` describes a whole robot (not a one-joint bench)."""
    try:
        return not load(path).one_joint
    except ActuatorlabError:
        return False
