"""Fit the nested family and let each extension earn its place on validation data.

The given logs are split once into a fitting part and a validation part (:func:`split_validation`);
held-out data given elsewhere (``compare --holdout``) is never seen here. Every model of the ladder
is fitted on the fitting part starting from the optima of the models it contains (so its training
error is never worse than theirs). A model *earns its place* when its validation MAE is at least
``min_gain`` (relative) below that of every eligible model it contains (m1 is always eligible).
The selected model is the eligible one with the lowest validation MAE, refitted on all the given
logs starting from its fitting-part optimum.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable

import numpy as np

from ..precision import physics
from ..errors import DataError
from ..logs.format import Trajectory
from ..models.registry import contains, get_model
from ..sim.rollout import make_batches
from .fit import FitResult, ParamSpace, fit_model, profile_for

__all__ = ["split_validation", "time_split", "LADDERS", "ladder_for", "SelectionResult", "fit_family",
           "BUDGETS"]

LADDERS: dict[str, tuple[str, ...]] = {
    "servo": ("m1", "m2", "m3", "m4", "m5", "m6", "g1", "g2", "g1+delay"),
    "drive": ("m1", "m1+offset", "m2+offset", "m1+offset+delay"),
}

#: name -> (CMA evaluations per start, starts, gradient steps)
BUDGETS: dict[str, tuple[int, int, int]] = {
    "quick": (1500, 2, 0),
    "default": (4000, 2, 60),
    "thorough": (12000, 3, 200),
}


def ladder_for(trajs) -> tuple[str, ...]:
    """The default ladder for these logs; firmwares whose gain units are not documented (Feetech)
    get the free gain scale (``+gain``) on every model."""
    ladder = LADDERS[profile_for(trajs)]
    if any(getattr(t, "setup", None) is not None and t.setup.controller == "feetech_pwm" for t in trajs):
        ladder = tuple(m + "+gain" if "gain" not in m.split("+") else m for m in ladder)
    return ladder


def time_split(tr: Trajectory, fraction: float = 0.7) -> tuple[Trajectory, Trajectory]:
    """Cut one log in time: the first ``fraction`` for fitting, the rest for validation."""
    k = int(round(tr.n * fraction))
    if k < 10 or tr.n - k < 10:
        raise DataError(tr.source_file or tr.name, f"log too short ({tr.n} samples) to split in time")

    def cut(sl, suffix):
        return replace(tr, name=f"{tr.name}{suffix}", time=tr.time[sl],
                       data={c: v[sl] for c, v in tr.data.items()})

    return cut(slice(0, k), "[:%d%%]" % round(100 * fraction)), cut(slice(k, None), "[%d%%:]" % round(100 * fraction))


def _fingerprint(trajs, ladder, seed, budget, min_gain, dt) -> str:
    h = hashlib.sha256()
    for t in trajs:
        h.update(t.name.encode())
        h.update(np.ascontiguousarray(t.time).tobytes())
        for c in sorted(t.data):
            h.update(c.encode())
            h.update(np.ascontiguousarray(t.data[c]).tobytes())
    h.update(json.dumps([list(ladder), seed, budget, min_gain, dt, BUDGETS[budget]]).encode())
    return h.hexdigest()


def _load_checkpoint(path, key) -> dict:
    if path is None or not Path(path).is_file():
        return {}
    try:
        d = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError):
        return {}
    return d.get("models", {}) if d.get("key") == key else {}


def _save_checkpoint(path, key, done) -> None:
    if path is not None:
        from .modelfile import atomic_write_text

        atomic_write_text(path, json.dumps({"key": key, "models": done}, default=float))


def _restore(entry: dict, model: str, batches) -> FitResult:
    spec = get_model(model)
    space = ParamSpace.build(spec, batches, profile_for(batches))
    return FitResult(spec.name, spec, space, space.theta_from(entry["params"]), entry["train_mae"],
                     entry["evaluations"], entry["wall_s"], profile_for(batches), batches[0].dt,
                     entry.get("history", []), objective=entry.get("objective", entry["train_mae"]),
                     effort_weight=entry.get("effort_weight", 0.0))


def split_validation(trajs: list[Trajectory], every: int = 4) -> tuple[list[Trajectory], list[Trajectory]]:
    """Deterministic split of the given logs into (fit, validation).

    Three or more logs: sorted by (excitation, gain, name), every ``every``-th log (starting with
    the 3rd) validates, so validation spans excitation families. One or two logs: each is cut in
    time, 70 % / 30 % (:func:`time_split`).
    """
    if not trajs:
        raise DataError(None, "no logs given")
    if len(trajs) < 3:
        pairs = [time_split(t) for t in trajs]
        return [a for a, _ in pairs], [b for _, b in pairs]
    order = sorted(trajs, key=lambda t: (t.conditions.get("excitation", ""), t.conditions.get("gain", ""), t.name))
    val = [t for i, t in enumerate(order) if i % every == 2]
    fit = [t for i, t in enumerate(order) if i % every != 2]
    return fit, val


@dataclass
class SelectionResult:
    selected: str
    fits: dict[str, FitResult]
    table: list[dict]
    final: FitResult
    fit_names: list[str]
    val_names: list[str]
    extras: dict = field(default_factory=dict)


@physics
def fit_family(trajs: list[Trajectory], ladder: tuple[str, ...] | None = None, *, seed: int = 0,
               budget: str = "default", min_gain: float = 0.02, dt: float | None = None,
               progress: Callable[[str, str, float], None] | None = None,
               checkpoint: str | Path | None = None) -> SelectionResult:
    """Fit every model of ``ladder`` on the fitting part and select on the validation part.

    checkpoint: a JSON file updated (atomically) after every model; a rerun with the same logs and
    options resumes from it instead of refitting the models already done.
    """
    from ..evaluate.metrics import summarize
    from ..evaluate.replay import replay_batches

    ladder = tuple(ladder or ladder_for(trajs))
    for m in ladder:
        get_model(m)
    evals, starts, grad = BUDGETS[budget]
    fit_part, val_part = split_validation(trajs)
    fb = make_batches(fit_part, dt)
    dt = fb[0].dt
    vb = make_batches(val_part, dt)
    fits: dict[str, FitResult] = {}
    table: list[dict] = []
    val_mae: dict[str, float] = {}
    eligible: dict[str, bool] = {}
    key = _fingerprint(trajs, ladder, seed, budget, min_gain, dt)
    done = _load_checkpoint(checkpoint, key)
    for i, m in enumerate(ladder):
        inner = [x for x in fits if contains(m, x)]
        if m in done:  # resume: same logs and options, this model was already fitted
            r = _restore(done[m], m, fb)
            if progress:
                progress(m, "resumed", 1.0)
        else:
            cb = (lambda stage, d, total, _m=m: progress(_m, stage, d / total)) if progress else None
            r = fit_model(fb, m, seed=seed + i, max_evals=evals, n_starts=starts, grad_steps=grad,
                          init=[fits[x].params for x in inner], progress=cb)
            done[m] = {"params": r.params, "train_mae": r.train_mae, "evaluations": r.evaluations,
                       "wall_s": r.wall_s, "history": r.history, "objective": r.objective,
                       "effort_weight": r.effort_weight}
            _save_checkpoint(checkpoint, key, done)
        fits[m] = r
        v = summarize(replay_batches(m, r.params, vb))["position_mae"]
        val_mae[m] = float("inf") if v is None else float(v)
        ref = [x for x in inner if eligible[x]]
        parent = min(ref, key=lambda x: val_mae[x]) if ref else None
        gain = None if parent is None else 1.0 - val_mae[m] / val_mae[parent]
        eligible[m] = bool(np.isfinite(val_mae[m])) and (parent is None or gain >= min_gain)
        table.append({"model": m, "parent": parent, "train_mae": r.train_mae, "validation_mae": val_mae[m],
                      "gain_vs_parent": gain, "earns_place": eligible[m],
                      "n_free": len(r.space.names), "wall_s": r.wall_s})
    selected = min((m for m in ladder if eligible[m]), key=lambda m: val_mae[m])
    all_b = make_batches(trajs, dt)
    final = fit_model(all_b, selected, seed=seed + 100, max_evals=max(evals // 2, 200), n_starts=1,
                      grad_steps=grad, init=fits[selected].params,
                      progress=(lambda s, d, t: progress(selected + " (all data)", s, d / t)) if progress else None)
    for row in table:
        row["selected"] = row["model"] == selected
    return SelectionResult(selected, fits, table, final, [t.name for t in fit_part], [t.name for t in val_part])
