"""One self-contained run report for the learned model's heads (issue 9, section 4).

``actuatorlab report-heads MODEL DATA... --robot NAME --train TRAIN --out OUT.html`` evaluates the
force head with its contact gate against the classical force baselines
(:func:`actuatorlab.estimate.force_eval.evaluate_force`, calibrated on TRAIN's free-motion logs)
and the condition head against the window classifiers
(:func:`actuatorlab.estimate.condition.run_condition`, fitted on TRAIN's windows) on the same
evaluated logs, and writes both into one HTML page: force traces (estimate vs label, gate), the
force baseline table, the condition metrics, ROC curves and verdicts. The page is assembled from
the two reports' own body builders (:func:`~actuatorlab.report.force.force_report_body`,
:func:`~actuatorlab.report.condition.condition_report_body`), so it shows exactly what
``estimate-force --report`` and ``condition --report`` show; plotly.js is inlined once.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .condition import condition_report_body
from .force import force_report_body
from .kit import CSS, LOADER, escape, plotly_script, write_page

__all__ = ["write_heads_report"]


def write_heads_report(path: str | Path, force_res: dict[str, Any] | None, cond_res: dict[str, Any] | None, *,
                       title: str = "Learned heads: force and motor condition", model_name: str = "") -> Path:
    """One HTML page with the force part (``force_res``: :func:`evaluate_force`'s result with
    ``keep_outputs=True``) and the condition part (``cond_res``: :func:`run_condition`'s result),
    either may be None (left out). plotly.js inlined; written atomically."""
    path = Path(path)
    body = [f"<h1>{escape(title)}</h1>", f"<p><b>Model:</b> {escape(model_name or '-')}</p>",
            "<p>" + " &middot; ".join(f'<a href="#{a}">{t}</a>' for a, t, r in (
                ("force", "End-effector force", force_res), ("condition", "Motor condition", cond_res))
                if r is not None) + "</p>"]
    if force_res is not None:
        body += ['<section id="force">', *force_report_body(force_res, title="End-effector force"), "</section>"]
    if cond_res is not None:
        body += ['<section id="condition">', *condition_report_body(cond_res, title="Motor-condition detection",
                                                                    model_name=model_name), "</section>"]
    page = "\n".join(["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">', f"<title>{escape(title)}</title>",
                      f"<style>{CSS}</style>", "<script>window.PlotlyConfig = {MathJaxConfig: 'local'};</script>",
                      plotly_script(path, "inline"), "</head><body>", *body, f"<script>{LOADER}</script>",
                      "</body></html>", ""])
    write_page(path, page)
    return path


