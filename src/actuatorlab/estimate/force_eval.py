"""Evaluation of the force estimators on labelled logs, and its HTML report.

:func:`evaluate_force` calibrates the classical methods on free-motion TRAINING logs (never on the
evaluated ones), runs every method causally over every evaluated log
(:func:`~actuatorlab.estimate.force.estimate_log`) and scores it:

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
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from ..errors import DataError
from ..robots.loader import Robot
from .dynamics import ArmDynamics
from .force import (CLASSICAL, DEFAULT_K_O, ForceLog, estimate_log, fit_calibration, free_motion, make_estimator,
                    read_force_log)

__all__ = ["CONTACT_FORCE", "ALL_METHODS", "evaluate_force", "score_force", "zero_estimate_mae", "write_force_report",
           "force_report_body"]

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
    called free, :class:`~actuatorlab.estimate.force.LearnedForceEstimator`);
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
        kw = ({"model": model, "soft_gate": soft_gate} if m == "learned"
              else {"dyn": dyn, "calibration": cals[CLASSICAL[m]], "k_o": k_o})
        est = make_estimator(m, robot, **kw)
        t0 = time.perf_counter()
        outputs[m] = [estimate_log(est, lg) for lg in logs]
        timing[m] = 1e3 * (time.perf_counter() - t0) / max(res["n_frames"], 1)
    res.update(score_force(logs, outputs))
    res["step_ms"] = timing
    if keep_outputs:
        res["_logs"], res["_outputs"] = logs, outputs
    return res


def write_force_report(path: str | Path, res: dict[str, Any], *, title: str = "End-effector force estimation",
                       max_points: int = 600, max_logs: int = 12) -> Path:
    """Self-contained HTML (plotly.js inlined once): the baseline table, MAE by task and split,
    gate accuracy and false-positive rates, calibration warnings, and per log the force traces
    (estimate of every method vs label, per axis) with the learned gate. Written atomically."""
    from ..evaluate.report import _CSS, _LOADER, _e, _plotly_script, _write_atomic

    path = Path(path)
    body = force_report_body(res, title=title, max_points=max_points, max_logs=max_logs)
    page = "\n".join(["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
                      f"<title>{_e(title)}</title>", f"<style>{_CSS}</style>",
                      "<script>window.PlotlyConfig = {MathJaxConfig: 'local'};</script>",
                      _plotly_script(path, "inline"), "</head><body>", *body, f"<script>{_LOADER}</script>",
                      "</body></html>", ""])
    _write_atomic(path, page)
    return path


def force_report_body(res: dict[str, Any], *, title: str = "End-effector force estimation", max_points: int = 600,
                      max_logs: int = 12) -> list[str]:
    """The HTML body parts of :func:`write_force_report` (heading, tables, force-trace figures with
    ids ``fig-force-<i>``), for pages that combine several reports (``report-heads``)."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    from ..evaluate.report import _decimation, _e, _figure_script, _g, _pct, _table

    methods = res["methods"]
    body = [f"<h1>{_e(title)}</h1>",
            f"<p><b>Robot:</b> {_e(res['robot'])} &middot; {res['n_logs']} logs, {res['n_frames']} frames"
            f" &middot; MAE: {_e(res['mae_definition'])}</p>", "<h2>Baselines</h2>"]
    rows = [[_e(m), _g(res["force_mae"][m], ".3f"), _g(res["force_mae_in_contact"][m], ".3f"), _pct(res["gate_accuracy"][m]),
             _pct(res["false_positive_contact_rate"][m]), _e(res["contact_rule"][m]), _g(res["step_ms"][m], ".3f")]
            for m in methods]
    z = res.get("zero_estimate") or {}
    if z:
        rows.append(["<i>zero force (reference)</i>", _g(z.get("force_mae"), ".3f"), _g(z.get("force_mae_in_contact"), ".3f"),
                     "-", "-", "never", "-"])
    body.append(_table(["method", "force MAE [N]", "MAE in contact [N]", "contact accuracy", "false-positive contact rate",
                        "contact rule", "ms / frame"], rows))
    for key, what in (("force_mae_by_task", "task"), ("force_mae_by_split", "split")):
        keys = sorted({k for m in methods for k in res[key][m]})
        body += [f"<h2>Force MAE by {what} [N]</h2>",
                 _table([what] + [_e(m) for m in methods] + (["zero force (reference)"] if z else []),
                        [[_e(k)] + [_g(res[key][m].get(k), ".3f") for m in methods]
                         + ([_g((z.get(key) or {}).get(k), ".3f")] if z else []) for k in keys])]
    if res.get("gain_warnings"):
        body += ["<h2>Calibration warnings</h2>", "<ul>" + "".join(f"<li>{_e(w)}</li>" for w in res["gain_warnings"])
                 + "</ul>"]
    if res.get("calibration"):
        body.append("<h2>Calibration (free-motion training logs)</h2>")
        for name, c in res["calibration"].items():
            body.append(f"<p><b>{_e(name)}</b> ({c['n_samples']} samples)</p>")
            keys = ["gain", "raw_gain", "offset", "coulomb", "static", "viscous", "stribeck_velocity", "play_width", "rms"]
            body.append(_table(["joint"] + keys, [[_e(j)] + [_g(c[k][i], ".4g") for k in keys]
                                                  for i, j in enumerate(c["joints"])]))
    logs, outs = res.get("_logs") or [], res.get("_outputs") or {}
    figs = []
    body.append("<h2>Force traces</h2>")
    colors = {"learned": "#d62728", "id_linear": "#1f77b4", "id_friction": "#2ca02c", "momentum_observer": "#9467bd"}
    order = sorted(range(len(logs)), key=lambda i: (logs[i].task not in ("push_hold", "lift_hold", "no_contact",
                                                                         "pick_place"), i))[:max_logs]
    for i in order:
        lg = logs[i]
        sel = _decimation(lg.n, max_points)
        t = lg.time[sel]
        fig = make_subplots(rows=4, cols=1, shared_xaxes=True, vertical_spacing=0.03,
                            subplot_titles=("force x [N]", "force y [N]", "force z [N]", "contact"))
        for a in range(3):
            fig.add_trace(go.Scatter(x=t, y=lg.force[sel, a], name="label", line=dict(color="black"),
                                     showlegend=a == 0, legendgroup="label"), row=a + 1, col=1)
            for m in methods:
                fig.add_trace(go.Scatter(x=t, y=outs[m][i]["force"][sel, a], name=m, showlegend=a == 0,
                                         legendgroup=m, line=dict(color=colors.get(m), width=1)), row=a + 1, col=1)
        fig.add_trace(go.Scatter(x=t, y=lg.contact[sel].astype(float), name="contact label",
                                 line=dict(color="black", dash="dot")), row=4, col=1)
        if "learned" in outs:
            fig.add_trace(go.Scatter(x=t, y=outs["learned"][i]["contact"][sel], name="learned gate",
                                     line=dict(color=colors["learned"])), row=4, col=1)
        fig.update_layout(height=720, title=f"{lg.name} ({lg.split}, {lg.task})", margin=dict(l=50, r=20, t=60, b=30))
        figs.append(_figure_script(fig, f"fig-force-{i}"))
        body.append(figs[-1])
    return body


def _write_csv(path: str | Path, res: dict[str, Any]) -> Path:
    import io

    from ..identify.modelfile import atomic_write_text

    methods = res["methods"]
    buf = io.StringIO()
    buf.write(",".join(["log", "time"] + [f"{m}/{c}" for m in methods for c in ("force_x", "force_y", "force_z",
                                                                             "contact")]) + "\n")
    for i, lg in enumerate(res["_logs"]):
        cols = [np.column_stack([res["_outputs"][m][i]["force"], res["_outputs"][m][i]["contact"]]) for m in methods]
        block = np.concatenate(cols, axis=1)
        for k in range(lg.n):
            buf.write(f"{lg.name},{lg.time[k]:.6g}," + ",".join(f"{v:.6g}" for v in block[k]) + "\n")
    atomic_write_text(Path(path), buf.getvalue())
    return Path(path)


def load_tagged(paths: Sequence) -> tuple[list, list[str]]:
    """Logs of ``paths`` and a split label per log: the folder name (``test``), or
    ``folder/subfolder`` for a folder whose logs sit in subfolders (``heldout/push_-y``); a file:
    its folder's name."""
    from pathlib import Path as _P

    from ..logs import load_logs

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


def run_estimate_force(model_path, data: Sequence, *, robot: str, calibrate: Sequence = (),
                       methods: Sequence[str] | None = None, ee_body: str | None = None, k_o: float = DEFAULT_K_O,
                       report: str | Path | None = None, out: str | Path | None = None,
                       soft_gate: bool = False) -> dict[str, Any]:
    """``actuatorlab estimate-force``: load MODEL (a learned RUN/arm_model.json; ``None`` or
    ``"-"``: no learned method) and the logs DATA, calibrate the classical methods on the
    free-motion logs of ``calibrate`` (training logs: a folder or files; never the evaluated logs),
    evaluate (:func:`evaluate_force`), optionally write the HTML report and ``out``: a CSV of the
    per-frame estimates (log, time, then ``<method>/force_x|y|z`` [N] and ``<method>/contact``
    per method), written atomically. Logs without force labels are estimated, not scored.
    ``soft_gate``: the learned force times its contact probability on every frame (the default
    reports 0 on frames the gate calls free; :func:`evaluate_force`)."""
    from ..errors import ActuatorlabError, UnknownNameError
    from ..learned.arm import load_arm_model
    from ..logs import load_logs
    from ..precision import physics_precision
    from ..robots.loader import load_robot

    learned = model_path is not None and str(model_path) != "-"
    methods = list(methods or [m for m in ALL_METHODS if learned or m != "learned"])
    for m in methods:
        if m not in ALL_METHODS:
            raise UnknownNameError("force estimation method", m, list(ALL_METHODS))
    if "learned" in methods and not learned:
        raise ActuatorlabError("estimate-force: method 'learned' needs MODEL (a RUN/arm_model.json)")
    if any(m in CLASSICAL for m in methods) and not calibrate:
        raise ActuatorlabError("estimate-force: the classical methods need --calibrate TRAIN (free-motion training "
                               "logs, e.g. DIR/train of a synth dataset); or choose --methods learned")
    with physics_precision():
        r = load_robot(robot)
        model = load_arm_model(model_path, robot)[1] if learned else None
        trajs, splits = load_tagged(data)
        cal = load_logs(list(calibrate)) if calibrate else []
        res = evaluate_force(r, trajs, cal, model=model, methods=methods, ee_body=ee_body, k_o=k_o, splits=splits,
                             keep_outputs=report is not None or out is not None, soft_gate=soft_gate)
    res["model"] = str(model_path) if learned else None
    if report is not None:
        res["report"] = str(write_force_report(report, res))
    if out is not None:
        res["out"] = str(_write_csv(out, res))
    return {k: v for k, v in res.items() if not k.startswith("_")}
