"""A generic training loop for learned actuators (one joint and whole robots).

:func:`train` minimises ``loss_fn(params, batch)`` over the differentiable leaves of ``params``
(floating-point arrays, :func:`equinox.is_inexact_array`; everything else, e.g. activation
functions or integer buffers, is held fixed) with

* optax AdamW, learning rate: linear warm-up from 0 to ``lr`` over ``warmup`` steps, then a
  cosine decay to ``lr * final_lr_ratio`` at ``steps`` (:func:`optax.warmup_cosine_decay_schedule`);
  weight decay on matrices only (ndim >= 2; biases, norms and embeddings' offsets are not decayed),
* global-norm gradient clipping (:func:`optax.clip_by_global_norm`) before the update,
* raw and exponential-moving-average (EMA) parameters; the EMA decay ramps up as
  ``min(ema_decay, (1 + k) / (10 + k))`` so early averages are not dominated by the
  initialisation,
* ``batch_fn(step) -> batch`` which must be a pure function of the step (draw random windows
  with ``jax.random.fold_in(key, step)``): then a resumed run sees the same batches and
  reproduces the uninterrupted loss curve bit for bit,
* a checkpoint every ``checkpoint_every`` steps (raw and EMA parameters, optimizer state, step,
  best validation so far), written atomically (temporary file + ``os.replace``), with a SHA-256
  of the payload so a corrupt or truncated file is a one-line :class:`~actuatorlab.errors.ModelError`,
* a run folder::

      RUN/config.json       TrainConfig, caller's meta, package version, git revision
      RUN/metrics.jsonl     one JSON object per step (loss, grad_norm, lr, wall_s, aux terms)
                            and per validation ({"step", "val", ...})
      RUN/checkpoint.ckpt   the latest checkpoint (exact resume)
      RUN/best.ckpt         EMA parameters with the lowest validation loss (when val_fn is given)

Only the training step is compiled (:func:`equinox.filter_jit`); validation runs on the EMA
parameters. Numerics are the caller's: parameters keep their dtype (learned networks float32),
the optimizer state follows them.
"""

from __future__ import annotations

import hashlib
import io
import json
import math
import time
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Callable

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax

from ..errors import ModelError
from ..files import atomic_write, git_revision
from .. import __version__

__all__ = ["TrainConfig", "TrainResult", "train", "make_optimizer", "load_checkpoint",
           "CHECKPOINT_NAME", "BEST_NAME"]

CHECKPOINT_NAME = "checkpoint.ckpt"
BEST_NAME = "best.ckpt"
_MAGIC = b"ACTUATORLAB-CKPT 1\n"
# fields that may change between a run and its resumption without changing the loss curve
_RESUMABLE_CHANGES = ("checkpoint_every", "eval_every", "time_limit_s")


@dataclass(frozen=True)
class TrainConfig:
    """Optimisation settings of one run (stored in RUN/config.json).

    Fields:
        steps: number of optimizer steps [-] (default 2000).
        lr: peak learning rate reached after warm-up [-] (default 1e-3).
        weight_decay: AdamW decoupled weight decay on matrices [1/step, scaled by lr] (default 1e-4).
        warmup: linear warm-up steps [-] (default 100; clamped to steps - 1).
        final_lr_ratio: learning rate at the last step / lr [-] (default 0.05).
        clip_norm: global gradient-norm clip [-] (default 1.0; 0 disables).
        ema_decay: decay of the EMA parameters per step [-] (default 0.999).
        checkpoint_every: steps between checkpoints [-] (default 200; the last step always saves).
        eval_every: steps between validations of the EMA parameters [-] (default 100; the last
            step always validates when ``val_fn`` is given).
        seed: the run's seed [-] (default 0), recorded; the caller derives its keys from it.
        schedule: "warmup_cosine" (default: the warm-up + cosine decay above) or "constant"
            (``lr`` at every step; warmup and final_lr_ratio unused).
        decay: "matrices" (default: weight decay on leaves with ndim >= 2) or "all".
        eval_at_start: also validate the initial parameters (step 0) [-] (default False).
        time_limit_s: wall-clock budget of one :func:`train` call [s] (default None: none). The
            call stops after the step during which it ran out (compilation counts), validates,
            checkpoints and returns with ``TrainResult.stopped = "time_limit"``; the learning-rate
            schedule stays the one of ``steps``. A resumed run gets the limit again.

    ``ema_decay`` = 0 keeps no average: the EMA parameters are the raw ones (validation and the
    best checkpoint then select among the raw parameters).
    """

    steps: int = 2000
    lr: float = 1e-3
    weight_decay: float = 1e-4
    warmup: int = 100
    final_lr_ratio: float = 0.05
    clip_norm: float = 1.0
    ema_decay: float = 0.999
    checkpoint_every: int = 200
    eval_every: int = 100
    seed: int = 0
    schedule: str = "warmup_cosine"
    decay: str = "matrices"
    eval_at_start: bool = False
    time_limit_s: float | None = None

    def __post_init__(self):
        if self.steps < 1:
            raise ModelError(f"TrainConfig: steps must be >= 1, got {self.steps}")
        if not (self.lr > 0 and math.isfinite(self.lr)):
            raise ModelError(f"TrainConfig: lr must be a positive number, got {self.lr}")
        if not 0.0 <= self.ema_decay < 1.0:
            raise ModelError(f"TrainConfig: ema_decay must be in [0, 1), got {self.ema_decay}")
        if self.checkpoint_every < 1 or self.eval_every < 1:
            raise ModelError("TrainConfig: checkpoint_every and eval_every must be >= 1")
        if self.schedule not in ("warmup_cosine", "constant"):
            raise ModelError(f"TrainConfig: schedule must be warmup_cosine or constant, got {self.schedule!r}")
        if self.decay not in ("matrices", "all"):
            raise ModelError(f"TrainConfig: decay must be matrices or all, got {self.decay!r}")
        if self.time_limit_s is not None and not (self.time_limit_s > 0 and math.isfinite(self.time_limit_s)):
            raise ModelError(f"TrainConfig: time_limit_s must be a positive number of seconds, got {self.time_limit_s}")

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "TrainConfig":
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in known})


@dataclass
class TrainResult:
    """What :func:`train` returns.

    params: raw parameters after the last step; ema: their EMA; best: the EMA parameters with the
    lowest validation loss (the final EMA when no ``val_fn``); best_step, best_val: where and what
    (None without validation); steps: steps done in total; wall_s [s]: wall time of this call's
    steps (excluding compilation of the first step); s_per_1k_steps [s]: its rate; compile_s [s]:
    the first step of this call (compilation + one step); metrics: every per-step record of the
    run (resumed ones included); run_dir: the run folder; warm_start: what the warm start did
    (:func:`actuatorlab.learned.learn.learn`; None: not run through it); stopped: why the call
    ended before ``cfg.steps`` ("time_limit"; None: it did not).
    """

    params: Any
    ema: Any
    best: Any
    best_step: int | None
    best_val: float | None
    steps: int
    wall_s: float
    s_per_1k_steps: float | None
    compile_s: float
    metrics: list[dict] = field(default_factory=list)
    run_dir: Path | None = None
    warm_start: dict | None = None
    stopped: str | None = None


def make_optimizer(cfg: TrainConfig):
    """optax chain: global-norm clipping, then AdamW over the learning-rate schedule
    (``cfg.schedule``; a constant rate is passed to AdamW as a number)."""
    if cfg.schedule == "constant":
        lr, sched = cfg.lr, optax.constant_schedule(cfg.lr)
    else:
        warmup = int(min(cfg.warmup, max(cfg.steps - 1, 0)))
        lr = sched = optax.warmup_cosine_decay_schedule(
            init_value=0.0, peak_value=cfg.lr, warmup_steps=warmup, decay_steps=max(cfg.steps, warmup + 1),
            end_value=cfg.lr * cfg.final_lr_ratio)

    def decay_mask(p):
        return jax.tree.map(lambda x: x.ndim >= 2, p)

    parts = [optax.clip_by_global_norm(cfg.clip_norm)] if cfg.clip_norm > 0 else []
    mask = decay_mask if cfg.decay == "matrices" else None
    parts.append(optax.adamw(lr, weight_decay=cfg.weight_decay, mask=mask))
    return optax.chain(*parts), sched


# ---------------------------------------------------------------------------------------------
# checkpoints: magic line, one JSON header line, then eqx.tree_serialise_leaves bytes


def _write_ckpt(path: Path, tree, header: dict) -> None:
    buf = io.BytesIO()
    eqx.tree_serialise_leaves(buf, tree)
    payload = buf.getvalue()
    head = dict(header, sha256=hashlib.sha256(payload).hexdigest(), n_bytes=len(payload))
    data = _MAGIC + (json.dumps(head) + "\n").encode() + payload
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
    tmp.replace(path)


def _read_ckpt(path: Path, like):
    """(tree shaped like ``like``, header) or a one-line ModelError naming the file."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise ModelError(f"{path}: cannot read checkpoint ({e.strerror})") from None
    if not raw.startswith(_MAGIC):
        raise ModelError(f"{path}: not an actuatorlab checkpoint (bad magic line)")
    rest = raw[len(_MAGIC):]
    nl = rest.find(b"\n")
    try:
        head = json.loads(rest[:nl].decode()) if nl >= 0 else None
    except (UnicodeDecodeError, json.JSONDecodeError):
        head = None
    if not isinstance(head, dict) or "sha256" not in head:
        raise ModelError(f"{path}: corrupt checkpoint (unreadable header)")
    payload = rest[nl + 1:]
    if len(payload) != head.get("n_bytes") or hashlib.sha256(payload).hexdigest() != head["sha256"]:
        raise ModelError(f"{path}: corrupt or truncated checkpoint (checksum mismatch: "
                         f"{len(payload)} of {head.get('n_bytes')} bytes)")
    try:
        tree = eqx.tree_deserialise_leaves(io.BytesIO(payload), like)
    except Exception as e:  # shape/dtype/structure mismatch with the model being trained
        raise ModelError(f"{path}: checkpoint does not match the model being trained "
                         f"({e.__class__.__name__}: {str(e).splitlines()[0] if str(e) else ''})") from None
    return tree, head


def load_checkpoint(path, like):
    """Read a checkpoint written by :func:`train` into the structure ``like`` (e.g. the
    ``params`` passed to :func:`train` for ``best.ckpt``). Returns (tree, header)."""
    return _read_ckpt(Path(path), like)


# ---------------------------------------------------------------------------------------------


def _scalar(x) -> float:
    return float(np.asarray(x))


def _jsonable(d: dict) -> dict:
    return {k: (_scalar(v) if not isinstance(v, (str, bool, int, type(None), dict, list)) else v)
            for k, v in d.items()}


def _split_loss(out):
    if isinstance(out, tuple) and len(out) == 2:
        return out[0], out[1]
    return out, {}


def _resume(run_dir: Path, cfg: TrainConfig, state):
    """(state, start, best_val, best_step, history) read from RUN/checkpoint.ckpt; metrics.jsonl is
    cut back to the checkpoint's step. The configuration must match (except _RESUMABLE_CHANGES)."""
    config_path, metrics_path = run_dir / "config.json", run_dir / "metrics.jsonl"
    if config_path.exists():
        try:
            old = TrainConfig.from_dict(json.loads(config_path.read_text())["train"])
        except (json.JSONDecodeError, KeyError, TypeError) as e:
            raise ModelError(f"{config_path}: unreadable run configuration ({e.__class__.__name__})") from None
        diffs = [f.name for f in fields(TrainConfig) if f.name not in _RESUMABLE_CHANGES
                 and getattr(old, f.name) != getattr(cfg, f.name)]
        if diffs:
            raise ModelError(f"{config_path}: cannot resume with a different configuration ("
                             + ", ".join(f"{n}: {getattr(old, n)} -> {getattr(cfg, n)}" for n in diffs) + ")")
    state, head = _read_ckpt(run_dir / CHECKPOINT_NAME, state)
    start = int(head["step"])
    history = []
    if metrics_path.exists():
        for line in metrics_path.read_text().splitlines():
            try:
                rec = json.loads(line)
            except json.JSONDecodeError:
                continue  # a line cut by the interruption
            if rec.get("step", 0) <= start:
                history.append(rec)
    atomic_write(metrics_path, "".join(json.dumps(r) + "\n" for r in history))
    return state, start, head.get("best_val"), head.get("best_step"), history


def _progress_bar(progress, start: int, steps: int):
    """A started rich progress bar on stderr and its task, or (None, None)."""
    if progress is not True or start >= steps:
        return None, None
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    bar = Progress(TextColumn("[bold]train"), BarColumn(), MofNCompleteColumn(),
                   TextColumn("loss {task.fields[loss]}"), TextColumn("val {task.fields[val]}"),
                   TimeRemainingColumn(), console=Console(stderr=True), transient=False)
    bar.start()
    return bar, bar.add_task("train", total=steps, completed=start, loss="-", val="-")


def _make_step(loss_fn, opt, decay: float):
    """The compiled training step (diff, ema, opt_state, batch, k, static) -> (diff, ema, opt_state,
    loss, grad norm, aux); with ``decay`` = 0 the EMA is the raw parameters. ``static`` (the
    parameters that are not trained) is an argument: its arrays are traced inputs, not constants of
    the program, so a run whose frozen arrays differ (a residual's refitted analytic base, another
    normalizer) compiles the same program and finds it in the persistent compilation cache."""

    @eqx.filter_jit
    def step_fn(diff, ema, opt_state, batch, k, static):
        def f(d):
            return _split_loss(loss_fn(eqx.combine(d, static), batch))

        (loss, aux), grads = eqx.filter_value_and_grad(f, has_aux=True)(diff)
        gnorm = optax.tree.norm(grads)
        updates, opt_state = opt.update(grads, opt_state, diff)
        diff = eqx.apply_updates(diff, updates)
        if decay == 0.0:
            return diff, diff, opt_state, loss, gnorm, aux
        kf = k.astype(jnp.float32)
        d = jnp.minimum(decay, (1.0 + kf) / (10.0 + kf))
        ema = jax.tree.map(lambda e, p: (d * e + (1.0 - d) * p).astype(p.dtype), ema, diff)
        return diff, ema, opt_state, loss, gnorm, aux

    return step_fn


class _Run:
    """The mutable state of one :func:`train` call: the run folder's files (none when ``run_dir``
    is None: the best parameters are then kept in memory), the history and the best validation."""

    def __init__(self, run_dir: Path | None, val_fn, static, on_validate=None):
        self.dir, self.val_fn, self.static, self.on_validate = run_dir, val_fn, static, on_validate
        self.history: list[dict] = []
        self.best_val: float | None = None
        self.best_step: int | None = None
        self.best_tree = None

    def record(self, rec: dict, f=None) -> None:
        self.history.append(rec)
        if f is not None:
            f.write(json.dumps(rec) + "\n")
            f.flush()
        elif self.dir is not None:
            with open(self.dir / "metrics.jsonl", "a") as mf:
                mf.write(json.dumps(rec) + "\n")

    def validate(self, step: int, ema) -> float:
        model = eqx.combine(ema, self.static)
        v = self.val_fn(model)
        rec = dict(v) if isinstance(v, dict) else {"val": v}
        rec = {"step": step, **_jsonable(rec)}
        self.record(rec)
        if self.best_val is None or rec["val"] < self.best_val:
            self.best_val, self.best_step = float(rec["val"]), step
            if self.dir is None:
                self.best_tree = ema
            else:
                _write_ckpt(self.dir / BEST_NAME, ema, {"step": step, "val": self.best_val, "kind": "best-ema"})
        if self.on_validate is not None:
            self.on_validate(step, model, float(rec["val"]))
        return rec["val"]

    def best(self, ema):
        if self.val_fn is None:
            return ema
        if self.dir is None:
            return ema if self.best_tree is None else self.best_tree
        return _read_ckpt(self.dir / BEST_NAME, ema)[0] if (self.dir / BEST_NAME).exists() else ema


def _open_run(run_dir: Path | None, cfg: TrainConfig, state, resume: bool, run: _Run, meta, n_leaves: int):
    """Create or resume the run folder; returns (state, first step)."""
    start = 0
    if run_dir is None:
        return state, start
    ckpt_path = run_dir / CHECKPOINT_NAME
    if ckpt_path.exists() and not resume:
        raise ModelError(f"{ckpt_path}: the run folder already holds a checkpoint; resume it or choose "
                         "another output folder")
    if resume and ckpt_path.exists():
        state, start, run.best_val, run.best_step, run.history = _resume(run_dir, cfg, state)
    else:
        run_dir.mkdir(parents=True, exist_ok=True)
        atomic_write(run_dir / "metrics.jsonl", "")
    atomic_write(run_dir / "config.json", json.dumps(
        {"train": cfg.to_dict(), "meta": meta or {}, "package_version": __version__,
         "git_revision": git_revision(), "trained_leaves": n_leaves}, indent=2, default=str) + "\n")
    return state, start


def train(run_dir, params, loss_fn: Callable, batch_fn: Callable[[int], Any], cfg: TrainConfig, *,
          val_fn: Callable[[Any], Any] | None = None, resume: bool = False, progress: bool | Callable = True,
          meta: dict | None = None, filter_spec=eqx.is_inexact_array,
          on_validate: Callable[[int, Any, float], None] | None = None) -> TrainResult:
    """Train ``params`` (a pytree, e.g. an equinox module) and write the run folder.

    Args:
        run_dir: run folder (created); must not hold a checkpoint unless ``resume``. None: no
            files at all (no checkpoints, no resume; the best parameters are kept in memory).
        params: initial parameters; leaves selected by ``filter_spec`` are trained.
        loss_fn: ``loss_fn(params, batch) -> loss`` or ``(loss, aux)`` with ``aux`` a dict of
            scalars (logged in metrics.jsonl); must be jittable.
        batch_fn: ``batch_fn(step) -> batch`` (a pytree of arrays), a pure function of ``step``
            for an exact resume; called once per step, in order.
        cfg: :class:`TrainConfig`.
        val_fn: ``val_fn(ema_params) -> float`` or a dict with key ``"val"`` (lower is better),
            called every ``eval_every`` steps and at the end (and at step 0 with
            ``cfg.eval_at_start``); the best EMA parameters are saved to RUN/best.ckpt. It may
            score a large set chunk by chunk: it runs outside the compiled step.
        resume: continue from RUN/checkpoint.ckpt (exactly: the same config is required, except
            checkpoint_every / eval_every); without a checkpoint the run starts from scratch.
        progress: True draws a rich progress bar on stderr; a callable is called as
            ``progress(step, steps, loss)`` after every step; False: nothing.
        meta: caller's description of the run (model, data, ...), stored in config.json.
        filter_spec: which leaves are trained (default: floating-point arrays).
        on_validate: called as ``on_validate(step, ema_params, val)`` after each validation (a
            time-to-quality curve, say); the parameters are the full model (immutable arrays).

    A non-finite loss stops the run with a ModelError naming the step and the last checkpoint.
    """
    run_dir = None if run_dir is None else Path(run_dir)
    diff, static = eqx.partition(params, filter_spec)
    if not jax.tree.leaves(diff):
        raise ModelError("train: params have no differentiable (floating-point array) leaves")
    opt, sched = make_optimizer(cfg)
    t_call = time.perf_counter()
    run = _Run(run_dir, val_fn, static, on_validate)
    (diff, ema, opt_state), start = _open_run(run_dir, cfg, (diff, diff, opt.init(diff)), resume, run, meta,
                                              int(sum(x.size for x in jax.tree.leaves(diff))))
    step_fn = _make_step(loss_fn, opt, float(cfg.ema_decay))
    ckpt_path = None if run_dir is None else run_dir / CHECKPOINT_NAME
    if val_fn is not None and cfg.eval_at_start and start == 0:
        run.validate(0, ema)
    bar, task = _progress_bar(progress, start, cfg.steps)
    t_first, t0, compile_s, stopped, done = None, None, 0.0, None, start
    try:
        with (open(run_dir / "metrics.jsonl", "a") if run_dir is not None else _NoFile()) as mf:
            for step in range(start, cfg.steps):
                ts = time.perf_counter()
                diff, ema, opt_state, loss, gnorm, aux = step_fn(diff, ema, opt_state, batch_fn(step),
                                                                 jnp.asarray(step, jnp.int32), static)
                lv = _scalar(loss)
                if t0 is None:
                    compile_s, t0, t_first = time.perf_counter() - ts, time.perf_counter(), step + 1
                if not math.isfinite(lv):
                    last = ckpt_path if ckpt_path is not None and ckpt_path.exists() else "none"
                    raise ModelError(f"{run_dir or 'train'}: loss became {lv} at step {step + 1}; the last good "
                                     f"checkpoint is {last}")
                run.record({"step": step + 1, "loss": lv, "grad_norm": _scalar(gnorm), "lr": _scalar(sched(step)),
                            "wall_s": time.perf_counter() - ts, **_jsonable(aux)}, mf if run_dir is not None else None)
                done = step + 1
                if cfg.time_limit_s is not None and done < cfg.steps and time.perf_counter() - t_call >= cfg.time_limit_s:
                    stopped = "time_limit"
                last = done == cfg.steps or stopped is not None
                if val_fn is not None and (done % cfg.eval_every == 0 or last):
                    val = run.validate(done, ema)
                    if bar is not None:
                        bar.update(task, val=f"{val:.4g}")
                if ckpt_path is not None and (done % cfg.checkpoint_every == 0 or last):
                    _write_ckpt(ckpt_path, (diff, ema, opt_state), {"step": done, "best_val": run.best_val,
                                                                   "best_step": run.best_step, "kind": "train"})
                if bar is not None:
                    bar.update(task, completed=done, loss=f"{lv:.4g}")
                elif callable(progress):
                    progress(done, cfg.steps, lv)
                if stopped is not None:
                    break
    finally:
        if bar is not None:
            bar.stop()
    wall = (time.perf_counter() - t0) if t0 is not None else 0.0
    n_timed = (done - t_first) if t_first is not None else 0
    return TrainResult(params=eqx.combine(diff, static), ema=eqx.combine(ema, static),
                       best=eqx.combine(run.best(ema), static), best_step=run.best_step, best_val=run.best_val,
                       steps=done, wall_s=wall, s_per_1k_steps=(1000.0 * wall / n_timed) if n_timed > 0 else None,
                       compile_s=compile_s, metrics=run.history, run_dir=run_dir, stopped=stopped)


class _NoFile:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False
