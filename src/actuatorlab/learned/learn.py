"""The one training algorithm of learned actuators, one joint or a whole robot.

:func:`learn` runs the same two phases whatever the simulator (docs/learned.md, docs/learned_arm.md):

1. **Warm start** (:func:`~actuatorlab.learned.distill.distill`): the network learns, teacher-forced
   on the training logs' measured frames and without the simulator, the effort of a fitted
   analytic model (the teacher). The (window, target) pairs come from the problem
   (:attr:`Problem.distill_data`): a replacing network learns the teacher's whole effort, a
   residual one the teacher's effort minus its base's.
2. **Through the simulator**: windows restarted from measured states, their length growing along
   a :class:`Curriculum`, the loss of the closed-loop rollout differentiated through the simulator
   (BPTT), the generic loop of :func:`~actuatorlab.learned.trainer.train` (optimiser, EMA,
   validation by closed-loop replay, checkpoints, exact resume). A warm-started model is
   validated at step 0 too, so the kept checkpoint is never worse on validation than the warm start.

What differs between one joint and a robot is the simulator and its data, given as a
:class:`Problem`: the one-joint scan of a bench (:mod:`actuatorlab.learned.joint`, fast on a CPU)
or MJX for a robot (:mod:`actuatorlab.learned.arm`). The teacher of a run is stored in
RUN/config.json (``meta["teacher"]``); :func:`check_resume_teacher` refuses a resume with another.
"""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

from ..errors import ModelError
from .distill import DistillConfig, distill
from .trainer import CHECKPOINT_NAME, TrainConfig, TrainResult, train

__all__ = ["Curriculum", "Problem", "learn", "run_meta", "stored_teacher", "check_resume_teacher"]


@dataclasses.dataclass(frozen=True)
class Curriculum:
    """Window lengths of the training stages and the share of the steps each stage gets.

    Fields:
        lengths: window length of each stage [control steps], e.g. (64, 96, 128).
        fractions: share of the run's steps per stage [-] (normalised; default equal shares).
    """

    lengths: tuple[int, ...]
    fractions: tuple[float, ...] | None = None

    def __post_init__(self):
        if not self.lengths or any(int(L) < 1 for L in self.lengths):
            raise ModelError(f"curriculum: window lengths must be >= 1 control step, got {self.lengths}")
        if self.fractions is not None and (len(self.fractions) < len(self.lengths)
                                           or any(f < 0 for f in self.fractions)):
            raise ModelError(f"curriculum: one non-negative fraction per stage, got {self.fractions}")

    def ends(self, steps: int) -> np.ndarray:
        """(stages,) the step at which each stage ends [-] (the last one at ``steps``)."""
        fr = np.ones(len(self.lengths)) if self.fractions is None else \
            np.asarray(self.fractions, float)[:len(self.lengths)]
        return np.round(np.cumsum(fr / fr.sum()) * steps).astype(int)

    def stage(self, step: int, steps: int) -> int:
        """Index of the stage that optimizer step ``step`` of a ``steps``-step run trains in."""
        return min(int(np.searchsorted(self.ends(steps), step, side="right")), len(self.lengths) - 1)


@dataclasses.dataclass(frozen=True)
class Problem:
    """What a simulator gives :func:`learn` (pure functions over the model being trained).

    Fields:
        loss: ``loss(model, batch) -> (loss, aux)``, the closed-loop rollout loss of a batch of
            windows through the simulator (compiled once per batch shape).
        batch: ``batch(stage, step) -> windows``: the training windows of optimizer step ``step``
            in curriculum stage ``stage`` (a pure function of both, for an exact resume).
        validate: ``validate(model) -> {"val": MAE, ...}``, closed-loop replay of validation data.
        trainable: filter spec of the trained leaves (:func:`~actuatorlab.learned.trainer.train`).
        distill_data: ``distill_data(model) -> (windows (N, H+1, F), targets (N, C), weights
            (N, C))``: the teacher's effort at measured frames in the network's output units; None:
            no warm start (no teacher, or nothing to learn from it).
        torque: ``torque(model, window (H+1, F)) -> (C,)``, the network's normalized effort.
        distill: the warm start's :class:`~actuatorlab.learned.distill.DistillConfig` (None: none).
        warm: what the caller knows of the warm start (its teacher), completed by :func:`learn`.
    """

    loss: Callable[[Any, Any], Any]
    batch: Callable[[int, int], Any]
    validate: Callable[[Any], dict] | None
    trainable: Any
    distill_data: Callable[[Any], tuple] | None = None
    torque: Callable[[Any, Any], Any] | None = None
    distill: DistillConfig | None = None
    warm: dict | None = None


def learn(out: str | Path | None, model, problem: Problem, tcfg: TrainConfig, curriculum: Curriculum, *,
          resume: bool = False, progress: bool = True, meta: dict | None = None,
          on_validate=None) -> TrainResult:
    """Warm start (phase 1, when ``problem.distill_data`` and ``problem.distill`` are given and the
    run is not resumed from a checkpoint), then training through the simulator (phase 2) along
    ``curriculum``. Returns the TrainResult; its ``warm_start``: ``problem.warm`` completed with the
    distillation's info and wall time. ``on_validate``: :func:`~actuatorlab.learned.trainer.train`'s."""
    warm = dict(problem.warm or {})
    distill_cfg = problem.distill
    started = resume and out is not None and (Path(out) / CHECKPOINT_NAME).exists()
    if problem.distill_data is not None and distill_cfg is not None and not started:
        if problem.torque is None:
            raise ModelError("learn: a warm start needs the problem's torque function")
        t0 = time.perf_counter()
        x, y, w = problem.distill_data(model)
        model, info = distill(model, problem.torque, x, y, w, distill_cfg, filter_spec=problem.trainable)
        warm.update(info, wall_s=time.perf_counter() - t0)
    steps = int(tcfg.steps)

    def batch_fn(step: int):
        return problem.batch(curriculum.stage(step, steps), step)

    res = train(out, model, problem.loss, batch_fn, tcfg, val_fn=problem.validate, resume=resume, progress=progress,
                meta=meta, filter_spec=problem.trainable, on_validate=on_validate)
    res.warm_start = warm
    return res


def run_meta(out: Path, resume: bool) -> dict | None:
    """The caller's meta of the run being resumed (RUN/config.json; None: no run to resume)."""
    cp = Path(out) / "config.json"
    if not resume or not cp.is_file():
        return None
    try:
        return json.loads(cp.read_text()).get("meta") or {}
    except json.JSONDecodeError:
        return None  # the trainer reports an unreadable configuration


def stored_teacher(out: Path, resume: bool) -> dict | None:
    """The teacher ({"model", "params"} or {"model", "parameters"}) of the run being resumed (None:
    no run or no teacher)."""
    return (run_meta(out, resume) or {}).get("teacher")


def check_resume_teacher(out: Path, resume: bool, teacher_desc: dict | None) -> None:
    """``--resume`` with a teacher other than the run's is refused (one line)."""
    cp = Path(out) / "config.json"
    if not resume or not cp.is_file():
        return
    old = stored_teacher(out, resume)
    if json.loads(json.dumps(old, default=str)) != json.loads(json.dumps(teacher_desc, default=str)):
        raise ModelError(f"{cp}: cannot resume with a different teacher (the run was warm-started from another "
                         "analytic model; give the same --init or start a new run)")
