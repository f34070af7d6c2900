"""Evaluation of the force estimators on labelled logs, and its HTML report.

:func:`evaluate_force` calibrates the classical methods on free-motion TRAINING logs (never on the
evaluated ones), runs every method causally over every evaluated log
(:func:`~actuatorlab.sim.force.estimate_log`) and scores it:

* ``force_mae`` [N]: method -> mean over the labelled frames and the three axes of
  ``|f_hat - f|`` (base frame); ``force_mae_in_contact``: the same over the frames in contact
  only (a payload carried or a push acting); ``force_mae_by_task`` (the log's ``excitation`` condition, e.g.
  ``push_hold``, ``lift_hold``, ``no_contact``), ``force_mae_by_split`` (``test``,
  ``heldout/<condition>``);
* ``gate_accuracy``: method -> fraction of labelled frames whose contact decision equals the
  contact label (the log's ``contact`` channel); the decision is the gate for ``learned``
  (``sigmoid(gate) > 0.5``) and ``|f_hat| > 1 N`` for the classical methods (``contact_rule``);
* ``false_positive_contact_rate``: method -> fraction of the frames of the matched no-contact
  trajectories (``excitation == no_contact``: the push trajectories' twins without a push) where
  the method decides "contact" (same rules);
* ``zero_estimate``: the same four MAE figures (``force_mae``, ``force_mae_in_contact``,
  ``force_mae_by_task``, ``force_mae_by_split``) of a constant zero force, i.e. the mean label
  magnitude per axis: the floor a method must beat to say anything about the force. On a split
  of small pushes a method whose gate stays shut scores the same as zero.
"""

from __future__ import annotations

import time
from typing import Any, Sequence

import numpy as np

from ..errors import DataError
from ..robots.loader import Robot
from ..sim.dynamics import ArmDynamics
from ..sim.force import (CLASSICAL, DEFAULT_K_O, ForceLog, estimate_log, fit_calibration, free_motion, make_estimator,
                    read_force_log)
from ..logs import load_logs

__all__ = ["CONTACT_FORCE", "ALL_METHODS", "evaluate_force", "score_force", "zero_estimate_mae"]

#: classical contact decision: |f_hat| above this [N]
CONTACT_FORCE = 1.0
ALL_METHODS = ("learned", "id_linear", "id_friction", "momentum_observer")


def _decide(method: str, out: dict) -> np.ndarray:
    if method == "learned":
        return out["contact"] > 0.5
    return np.linalg.norm(out["force"], axis=-1) > CONTACT_FORCE


def score_force(logs: Sequence[ForceLog], outputs: dict[str, list[dict]]) -> dict[str, Any]:
    """Scores of the module docstring from per-method outputs (one dict per log, :func:`estimate_log`)."""
    res: dict[str, Any] = {"force_mae": {}, "force_mae_in_contact": {}, "force_mae_by_task": {}, "force_mae_by_split": {},
                           "gate_accuracy": {}, "false_positive_contact_rate": {}}
    for m, outs in outputs.items():
        for key, v in _mae_figures(logs, [o["force"] for o in outs]).items():
            res[key][m] = v
        acc_n, acc_d, fp_n, fp_d = 0, 0, 0, 0
        for lg, o in zip(logs, outs):
            if not lg.force_known:
                continue
            dec = _decide(m, o)
            acc_n += int(np.sum(dec == lg.contact))
            acc_d += lg.n
            if lg.task == "no_contact":
                fp_n += int(np.sum(dec))
                fp_d += lg.n
        res["gate_accuracy"][m] = acc_n / acc_d if acc_d else None
        res["false_positive_contact_rate"][m] = fp_n / fp_d if fp_d else None
    res["zero_estimate"] = zero_estimate_mae(logs)
    return res


def _mae_figures(logs: Sequence[ForceLog], forces: Sequence[np.ndarray]) -> dict[str, Any]:
    """``force_mae``, ``force_mae_in_contact``, ``force_mae_by_task``, ``force_mae_by_split`` [N] of
    the estimates ``forces`` (one (T, 3) array per log) on the labelled logs."""
    num, den, c_num, c_den = 0.0, 0, 0.0, 0
    by_task: dict[str, list[float]] = {}
    by_split: dict[str, list[float]] = {}
    for lg, f in zip(logs, forces):
        if not lg.force_known:
            continue
        e = np.abs(f - lg.force)
        num, den = num + float(e.sum()), den + e.size
        c_num, c_den = c_num + float(e[lg.contact].sum()), c_den + e[lg.contact].size
        for key, d in ((lg.task, by_task), (lg.split, by_split)):
            a = d.setdefault(key, [0.0, 0])
            a[0] += float(e.sum())
            a[1] += e.size
    return {"force_mae": num / den if den else None, "force_mae_in_contact": c_num / c_den if c_den else None,
            "force_mae_by_task": {k: v[0] / v[1] for k, v in sorted(by_task.items())},
            "force_mae_by_split": {k: v[0] / v[1] for k, v in sorted(by_split.items())}}


def zero_estimate_mae(logs: Sequence[ForceLog]) -> dict[str, Any]:
    """MAE figures [N] of a constant zero force on the labelled logs (:func:`_mae_figures`'s keys)."""
    return _mae_figures(logs, [np.zeros_like(lg.force) for lg in logs])


def _fingerprint(t) -> tuple:
    """Identity of a log's content: name, length and a hash of its position channels."""
    import hashlib

    h = hashlib.sha256()
    for ch in sorted(c for c in t.channels if c.startswith("position")):
        h.update(np.ascontiguousarray(np.asarray(t[ch], np.float64)).tobytes())
    return t.name, t.n, h.hexdigest()


def evaluate_force(robot: Robot, eval_trajs: list, calib_trajs: list, *, model=None, methods: Sequence[str] = ALL_METHODS,
                   ee_body: str | None = None, k_o: float = DEFAULT_K_O, splits: Sequence[str] | None = None,
                   keep_outputs: bool = False, soft_gate: bool = False) -> dict[str, Any]:
    """Calibrate on the free-motion logs among ``calib_trajs``, run ``methods`` on ``eval_trajs``
    and score them (module docstring). ``model``: a LearnedArm (needed for ``learned``;
    ``soft_gate``: its force times the contact probability everywhere instead of 0 on frames
    called free, :class:`~actuatorlab.sim.force.LearnedForceEstimator`);
    ``splits``: a label per evaluated log (e.g. its folder) for ``force_mae_by_split``. A
    calibration log whose content equals an evaluated one is refused. Returns the JSON-able
    result; with ``keep_outputs`` also ``_logs`` / ``_outputs`` (arrays) for the report."""
    methods = list(methods)
    if not eval_trajs:
        raise DataError(None, "estimate-force: no logs to evaluate")
    evaluated = {_fingerprint(t) for t in eval_trajs}
    overlap = [t.name for t in calib_trajs if _fingerprint(t) in evaluated]
    if overlap:
        raise DataError(None, f"estimate-force: calibration logs overlap the evaluated logs ({overlap[:3]}); "
                              "calibrate on training logs only")
    splits = list(splits) if splits is not None else [""] * len(eval_trajs)
    logs = [read_force_log(robot, t, s) for t, s in zip(eval_trajs, splits)]
    res: dict[str, Any] = {"robot": robot.name, "methods": methods, "n_logs": len(logs),
                           "n_frames": int(sum(lg.n for lg in logs)),
                           "logs": [{"name": lg.name, "split": lg.split, "task": lg.task, "frames": lg.n} for lg in logs],
                           "contact_rule": {m: (("sigmoid(gate) > 0.5" + ("" if soft_gate else "; force 0 elsewhere"))
                                                if m == "learned" else f"|f_hat| > {CONTACT_FORCE:g} N")
                                            for m in methods},
                           "mae_definition": "mean over labelled frames and x/y/z of |f_hat - f| [N], base frame"}
    dyn = cals = None
    if any(m in CLASSICAL for m in methods):
        dyn = ArmDynamics(robot, ee_body=ee_body)
        free = [lg for lg in (read_force_log(robot, t) for t in calib_trajs) if free_motion(lg)]
        if not free:
            raise DataError(None, "estimate-force: the classical methods need free-motion training logs "
                                  "(--calibrate DIR: logs with force_x/y/z labels that are zero, no payload, "
                                  "contact or restricted joint; unlabelled logs are not assumed free)")
        cals = {fr: fit_calibration(dyn, free, friction=fr) for fr in sorted({CLASSICAL[m] for m in methods
                                                                             if m in CLASSICAL})}
        res["calibration"] = {("id_friction" if fr else "id_linear"): c.to_dict() for fr, c in cals.items()}
        res["calibration_logs"] = [lg.name for lg in free]
        res["gain_warnings"] = sorted({w for c in cals.values() for w in c.warnings})
        res["k_o"] = k_o
        res["ee_body"] = dyn.ee_body
    outputs: dict[str, list[dict]] = {}
    timing = {}
    for m in methods:
        if m == "learned":
            kw = {"model": model, "soft_gate": soft_gate}
        else:
            assert cals is not None  # the classical methods were calibrated above
            kw = {"dyn": dyn, "calibration": cals[CLASSICAL[m]], "k_o": k_o}
        est = make_estimator(m, robot, **kw)
        t0 = time.perf_counter()
        outputs[m] = [estimate_log(est, lg) for lg in logs]
        timing[m] = 1e3 * (time.perf_counter() - t0) / max(res["n_frames"], 1)
    res.update(score_force(logs, outputs))
    res["step_ms"] = timing
    if keep_outputs:
        res["_logs"], res["_outputs"] = logs, outputs
    return res








def load_tagged(paths: Sequence) -> tuple[list, list[str]]:
    """Logs of ``paths`` and a split label per log: the folder name (``test``), or
    ``folder/subfolder`` for a folder whose logs sit in subfolders (``heldout/push_-y``); a file:
    its folder's name."""
    from pathlib import Path as _P


    trajs, tags = [], []
    for p in map(_P, paths):
        if not p.is_dir():
            groups = [(p, p.parent.name)]
        else:
            subs = sorted(d for d in p.iterdir() if d.is_dir())
            files = [f for f in p.iterdir() if f.is_file() and not f.name.startswith(".")]
            groups = [(d, f"{p.name}/{d.name}") for d in subs] if subs and not files else [(p, p.name)]
        for q, tag in groups:
            t = load_logs([q])
            trajs += t
            tags += [tag] * len(t)
    return trajs, tags


