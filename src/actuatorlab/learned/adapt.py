"""Online adaptation: fine-tune a trained whole-robot learned actuator to another unit from a few logs.

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
from typing import Any

import equinox as eqx
import jax.numpy as jnp
import numpy as np

from ..errors import ActuatorlabError, DataError, ModelError
from ..identify.arm_fit import fit_arm
from ..logs.format import Trajectory
from ..precision import physics
from .arm import load_arm_model, save_arm_model
from .arm_train import ArmTrainConfig, train_arm

__all__ = ["AdaptConfig", "adapt_arm", "adaptation_logs", "check_adapt_out"]


#: windows per fine-tuning step: 2, as measured (bench/journal/adapt.md); training's default batch
#: (learned.arm_train.DEFAULT_BUDGET) grew to 4 after those runs, which would cost a new compile
ADAPT_BATCH = 2
#: fine-tuning steps when ``AdaptConfig.steps`` is None, by model kind, judged on two units (synth
#: seeds 11 and 12, bench/journal/adapt.md, 2026-12-05): a replacing network 80 steps at lr 3e-4
#: (-28.9 % / -71.0 % test MAE, against -14.0 % / -60.9 % at 40 steps and lr 1e-4); a residual none
#: (80 steps moved its test MAE by -0.8 / 0 points over the base refit, at 7-11 min wall)
DEFAULT_STEPS = {"learned": 80, "residual": 0}


@dataclasses.dataclass(frozen=True)
class AdaptConfig:
    """Settings of :func:`adapt_arm`.

    Fields:
        steps: fine-tuning optimizer steps of the network [-] (default None: :data:`DEFAULT_STEPS`
            of the model's kind, 80 for a replacing network, 0 for a residual; 0: no fine-tuning).
        lr: peak learning rate of the fine-tuning [-] (default 3e-4, training's).
        seed: seed of the batches and of the base refit [-] (default 0).
        max_trajectories: at most this many logs of the new unit are used, evenly spread over them
            by name [-] (default 12).
        n_val: of those, the last this many (every k-th) choose the checkpoint [-] (default 2).
        refit_evals: CMA-ES evaluations of a residual's base refit [-] (default 40; 0: no refit).
        refit_windows: fit windows of the base refit, evenly spread [-] (default 16).
    """

    steps: int | None = None
    lr: float = 3e-4
    seed: int = 0
    max_trajectories: int = 12
    n_val: int = 2
    refit_evals: int = 40
    refit_windows: int = 16


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
    """RUN/arm_model.json of ``run`` (a run folder or the file). OUT equal to RUN or inside it, or
    an OUT that already exists, is a one-line error (nothing is ever written over)."""
    model = run / "arm_model.json" if run.is_dir() else run
    if not model.is_file():
        raise ModelError(f"{run}: no arm_model.json to adapt (give a run folder of `train --robot` or its arm_model.json)")
    if out.resolve() == model.parent.resolve() or model.parent.resolve() in out.resolve().parents:
        raise ActuatorlabError(f"--out {out}: is (inside) the run being adapted; give a new folder (RUN is never changed)")
    if out.exists():
        raise ActuatorlabError(f"--out {out}: already exists; give a new folder (adapt never writes over a run)")
    return model


def _refit_base(robot_name: str, desc: dict, base: dict, logs: list[Trajectory], cfg: AdaptConfig) -> tuple[dict, dict, dict]:
    """(new base description {"model", "params"}, new base parameter sets, fit record) of a
    residual's analytic base refitted on ``logs`` from its current values."""
    start = {k: np.asarray(v, float) for k, v in base.items()}
    f = fit_arm(robot_name, logs, model=desc.get("model"), init=[start], max_evals=int(cfg.refit_evals),
                max_windows=int(cfg.refit_windows), seed=int(cfg.seed))
    rec = {"model": f["model"], "evaluations": f["evaluations"], "wall_s": f["wall_s"],
           "train_mae": f["train_mae"], "params": f["params"]}
    return {"model": f["model"], "params": f["params"]}, {k: jnp.asarray(v, jnp.float64)
                                                          for k, v in f["param_sets"].items()}, rec


def _build(model_path: Path, trajs: list[Trajectory], cfg: AdaptConfig, tmp: Path, progress: bool) -> dict[str, Any]:
    """Adapt the model of ``model_path`` into the (new, empty) folder ``tmp``; returns the saved dict."""
    t_wall, t_cpu = _time.perf_counter(), _time.process_time()
    robot, m0, d0 = load_arm_model(model_path)
    robot_name = d0["robot"]
    tr, va = adaptation_logs(trajs, cfg)
    used = sorted({t.name for t in tr + va})
    desc = d0.get("base")
    model, refit = m0, None
    if m0.residual and cfg.refit_evals > 0:
        desc, base, refit = _refit_base(robot_name, desc or {}, m0.base, tr + [t for t in va if t not in tr], cfg)
        model = eqx.tree_at(lambda m: m.base, m0, base)
    training: dict[str, Any] = {"steps": 0}
    steps = int(DEFAULT_STEPS[d0["kind"]] if cfg.steps is None else cfg.steps)
    if steps > 0:
        opts = ArmTrainConfig(arch=m0.arch, residual=desc if m0.residual else None,
                              teacher=None if m0.residual else desc, steps=steps, seed=int(cfg.seed),
                              budget={"lr": float(cfg.lr), "eval_every": max(1, steps // 4), "batch": ADAPT_BATCH})
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


@physics
def adapt_arm(run: str | Path, trajs: list[Trajectory], cfg: AdaptConfig = AdaptConfig(), *, out: str | Path,
              progress: bool = False) -> dict[str, Any]:
    """Adapt the learned or residual model of RUN (a run folder or its arm_model.json) to the unit
    that recorded ``trajs`` (module docstring) and write OUT/arm_model.json + weights (and the
    fine-tuning's metrics.jsonl and checkpoints). OUT is written atomically and must not exist;
    RUN is only read. Returns the saved dict, with ``adaptation`` (logs used, base refit, wall and
    CPU seconds)."""
    run, out = Path(run), Path(out)
    model_path = check_adapt_out(run, out)
    made = [p for p in (out.parent, *out.parent.parents) if not p.exists()]
    tmp = out.parent / f".{out.name}.adapt-{os.getpid()}"
    out.parent.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    try:
        d = _build(model_path, list(trajs), cfg, tmp, progress)
        os.replace(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        for p in made:  # folders made for OUT only (innermost first), when left empty
            if p.is_dir() and not any(p.iterdir()):
                p.rmdir()
        raise
    return d
