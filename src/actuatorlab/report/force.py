"""The end-effector force estimation report (actuatorlab estimate-force --report, docs/force.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .kit import CSS, LOADER, decimation, escape, figure_script, fmt, pct, plotly_script, table, write_page


def write_force_report(path: str | Path, res: dict[str, Any], *, title: str = "End-effector force estimation",
                       max_points: int = 600, max_logs: int = 12) -> Path:
    """Self-contained HTML (plotly.js inlined once): the baseline table, MAE by task and split,
    gate accuracy and false-positive rates, calibration warnings, and per log the force traces
    (estimate of every method vs label, per axis) with the learned gate. Written atomically."""

    path = Path(path)
    body = force_report_body(res, title=title, max_points=max_points, max_logs=max_logs)
    page = "\n".join(["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
                      f"<title>{escape(title)}</title>", f"<style>{CSS}</style>",
                      "<script>window.PlotlyConfig = {MathJaxConfig: 'local'};</script>",
                      plotly_script(path, "inline"), "</head><body>", *body, f"<script>{LOADER}</script>",
                      "</body></html>", ""])
    write_page(path, page)
    return path


def force_report_body(res: dict[str, Any], *, title: str = "End-effector force estimation", max_points: int = 600,
                      max_logs: int = 12) -> list[str]:
    """The HTML body parts of :func:`write_force_report` (heading, tables, force-trace figures with
    ids ``fig-force-<i>``), for pages that combine several reports (``report-heads``)."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots


    methods = res["methods"]
    body = [f"<h1>{escape(title)}</h1>",
            f"<p><b>Robot:</b> {escape(res['robot'])} &middot; {res['n_logs']} logs, {res['n_frames']} frames"
            f" &middot; MAE: {escape(res['mae_definition'])}</p>", "<h2>Baselines</h2>"]
    rows = [[escape(m), fmt(res["force_mae"][m], ".3f"), fmt(res["force_mae_in_contact"][m], ".3f"), pct(res["gate_accuracy"][m]),
             pct(res["false_positive_contact_rate"][m]), escape(res["contact_rule"][m]), fmt(res["step_ms"][m], ".3f")]
            for m in methods]
    z = res.get("zero_estimate") or {}
    if z:
        rows.append(["<i>zero force (reference)</i>", fmt(z.get("force_mae"), ".3f"), fmt(z.get("force_mae_in_contact"), ".3f"),
                     "-", "-", "never", "-"])
    body.append(table(["method", "force MAE [N]", "MAE in contact [N]", "contact accuracy", "false-positive contact rate",
                        "contact rule", "ms / frame"], rows))
    for key, what in (("force_mae_by_task", "task"), ("force_mae_by_split", "split")):
        keys = sorted({k for m in methods for k in res[key][m]})
        body += [f"<h2>Force MAE by {what} [N]</h2>",
                 table([what] + [escape(m) for m in methods] + (["zero force (reference)"] if z else []),
                        [[escape(k)] + [fmt(res[key][m].get(k), ".3f") for m in methods]
                         + ([fmt((z.get(key) or {}).get(k), ".3f")] if z else []) for k in keys])]
    if res.get("gain_warnings"):
        body += ["<h2>Calibration warnings</h2>", "<ul>" + "".join(f"<li>{escape(w)}</li>" for w in res["gain_warnings"])
                 + "</ul>"]
    if res.get("calibration"):
        body.append("<h2>Calibration (free-motion training logs)</h2>")
        for name, c in res["calibration"].items():
            body.append(f"<p><b>{escape(name)}</b> ({c['n_samples']} samples)</p>")
            keys = ["gain", "raw_gain", "offset", "coulomb", "static", "viscous", "stribeck_velocity", "play_width", "rms"]
            body.append(table(["joint"] + keys, [[escape(j)] + [fmt(c[k][i], ".4g") for k in keys]
                                                  for i, j in enumerate(c["joints"])]))
    logs, outs = res.get("_logs") or [], res.get("_outputs") or {}
    figs = []
    body.append("<h2>Force traces</h2>")
    colors = {"learned": "#d62728", "id_linear": "#1f77b4", "id_friction": "#2ca02c", "momentum_observer": "#9467bd"}
    order = sorted(range(len(logs)), key=lambda i: (logs[i].task not in ("push_hold", "lift_hold", "no_contact",
                                                                         "pick_place"), i))[:max_logs]
    for i in order:
        lg = logs[i]
        sel = decimation(lg.n, max_points)
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
        figs.append(figure_script(fig, f"fig-force-{i}"))
        body.append(figs[-1])
    return body
