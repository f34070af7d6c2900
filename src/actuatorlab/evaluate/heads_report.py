"""One self-contained run report for the learned model's heads (issue 9, section 4).

``actuatorlab report-heads MODEL DATA... --robot NAME --train TRAIN --out OUT.html`` evaluates the
force head with its contact gate against the classical force baselines
(:func:`actuatorlab.estimate.force_eval.evaluate_force`, calibrated on TRAIN's free-motion logs)
and the condition head against the window classifiers
(:func:`actuatorlab.evaluate.condition.run_condition`, fitted on TRAIN's windows) on the same
evaluated logs, and writes both into one HTML page: force traces (estimate vs label, gate), the
force baseline table, the condition metrics, ROC curves and verdicts. The page is assembled from
the two reports' own body builders (:func:`~actuatorlab.estimate.force_eval.force_report_body`,
:func:`~actuatorlab.evaluate.condition.condition_report_body`), so it shows exactly what
``estimate-force --report`` and ``condition --report`` show; plotly.js is inlined once.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

__all__ = ["write_heads_report", "run_heads_report"]


def write_heads_report(path: str | Path, force_res: dict[str, Any] | None, cond_res: dict[str, Any] | None, *,
                       title: str = "Learned heads: force and motor condition", model_name: str = "") -> Path:
    """One HTML page with the force part (``force_res``: :func:`evaluate_force`'s result with
    ``keep_outputs=True``) and the condition part (``cond_res``: :func:`run_condition`'s result),
    either may be None (left out). plotly.js inlined; written atomically."""
    from ..estimate.force_eval import force_report_body
    from .condition import condition_report_body
    from .report import _CSS, _LOADER, _e, _plotly_script, _write_atomic

    path = Path(path)
    body = [f"<h1>{_e(title)}</h1>", f"<p><b>Model:</b> {_e(model_name or '-')}</p>",
            "<p>" + " &middot; ".join(f'<a href="#{a}">{t}</a>' for a, t, r in (
                ("force", "End-effector force", force_res), ("condition", "Motor condition", cond_res))
                if r is not None) + "</p>"]
    if force_res is not None:
        body += ['<section id="force">', *force_report_body(force_res, title="End-effector force"), "</section>"]
    if cond_res is not None:
        body += ['<section id="condition">', *condition_report_body(cond_res, title="Motor-condition detection",
                                                                    model_name=model_name), "</section>"]
    page = "\n".join(["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">', f"<title>{_e(title)}</title>",
                      f"<style>{_CSS}</style>", "<script>window.PlotlyConfig = {MathJaxConfig: 'local'};</script>",
                      _plotly_script(path, "inline"), "</head><body>", *body, f"<script>{_LOADER}</script>",
                      "</body></html>", ""])
    _write_atomic(path, page)
    return path


def run_heads_report(model_path, data: Sequence, *, robot: str, train: Sequence, out: str | Path,
                     verdict_s: float = 5.0, seed: int = 0) -> dict[str, Any]:
    """``actuatorlab report-heads``: load the learned model (RUN/arm_model.json), the evaluated logs
    ``data`` and the training logs ``train`` (baseline calibration and fitting only; an overlap
    with ``data`` is refused by both evaluations), evaluate force and condition, write the page
    ``out``. Returns {"report", "force": force JSON (``estimate-force --json``'s keys),
    "condition": condition JSON (``condition --json``'s keys, without ROC points)}."""
    from ..errors import DataError
    from ..estimate.force_eval import evaluate_force, load_tagged
    from ..learned.arm import load_arm_model
    from ..logs import load_logs
    from ..precision import physics_precision
    from .condition import condition_log, public, run_condition

    if not train:
        raise DataError(None, "report-heads needs training logs (--train) for the baselines")
    with physics_precision():
        r, model, md = load_arm_model(model_path, robot)
        trajs, splits = load_tagged(data)
        ttrajs = load_logs(list(train))
        fres = evaluate_force(r, trajs, ttrajs, model=model, splits=splits, keep_outputs=True)
        ch = model.layout.channels
        cres = run_condition(r, [condition_log(r, t, ch) for t in trajs], model=model,
                             train_logs=[condition_log(r, t, ch) for t in ttrajs], seed=seed, verdict_s=verdict_s,
                             calibration=md.get("condition_calibration"))
    path = write_heads_report(out, fres, cres, model_name=str(model_path))
    cond = public(cres)
    cond.pop("roc", None)
    return {"report": str(path), "force": {k: v for k, v in fres.items() if not k.startswith("_")},
            "condition": cond}
