"""The motor-condition detection report (actuatorlab condition --report, docs/condition.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Any
import numpy as np
from ..estimate.condition_windows import METHODS, STRIDE, WINDOW
from .kit import CSS, LOADER, escape, figure_script, fmt, plotly_script, table, write_page


def write_condition_report(path: str | Path, res: dict[str, Any], *, title: str = "Motor-condition detection",
                           model_name: str = "", max_logs: int = 12, plotly_js: str = "sibling") -> Path:
    """Self-contained HTML report: metrics table, ROC curves per method, per-log verdicts and the
    learned per-frame scores (first ``max_logs`` logs). Reuses :mod:`actuatorlab.report.fit`'s
    page pieces (plotly.js loaded once: a shared sibling file or inlined)."""

    path = Path(path)
    body = condition_report_body(res, title=title, model_name=model_name, max_logs=max_logs)
    page = "\n".join(["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">', f"<title>{escape(title)}</title>",
                      f"<style>{CSS}</style>", plotly_script(path, plotly_js), "</head><body>", *body,
                      f"<script>{LOADER}</script>", "</body></html>", ""])
    write_page(path, page)
    return path


def condition_report_body(res: dict[str, Any], *, title: str = "Motor-condition detection", model_name: str = "",
                          max_logs: int = 12) -> list[str]:
    """The HTML body parts of :func:`write_condition_report` (heading, metrics table, ROC figure
    ``fig-roc``, verdicts, per-frame score figures ``fig-log-<i>``), for pages that combine several
    reports (``report-heads``)."""
    import plotly.graph_objects as go


    rows = []
    for name in METHODS:
        if name in res:
            m = res[name]
            rows.append([escape(name), *[fmt(m.get(k), ".3f") for k in ("accuracy", "precision", "recall", "auc")],
                         str(m["n_windows"]), str(m["n_restricted"])])
    body = [f"<h1>{escape(title)}</h1>", f"<p><b>Model:</b> {escape(model_name or '-')}; {res['n_logs']} evaluated logs; "
            f"windows of {WINDOW} control steps, stride {STRIDE}; restricted = positive.</p>",
            "<h2>Window-level metrics</h2>",
            table(["method", "accuracy", "precision", "recall", "AUC", "window x channel", "restricted"], rows),
            '<p class="muted">learned: window score = 1 - mean per-frame condition score (causal, one frame at a '
            "time); baselines fitted per channel on the training logs' windows only.</p>"]
    fams = sorted({f for name in METHODS if name in res for f in (res[name].get("by_excitation") or {})})
    if fams:
        meths = [n for n in METHODS if n in res]
        frow = []
        for f in fams:
            b = [res[n]["by_excitation"].get(f, {}) for n in meths]
            frow.append([escape(f), f"{b[0].get('n_windows', 0)} ({b[0].get('n_restricted', 0)})",
                         *[f"{fmt(x.get('recall'), '.2f')} / {fmt(x.get('auc'), '.3f')}" for x in b]])
        body += [f"<h2>By excitation family ({escape(', '.join(res.get('restricted_channels', [])))})</h2>",
                 table(["family", "windows (restricted)", *[f"{escape(n)}: recall / AUC" for n in meths]], frow),
                 '<p class="muted">Window rows of the logs of each excitation family, on the channels restricted '
                 "in some evaluated log; a family whose logs are all normal has no recall or AUC.</p>"]
    figs = []
    fig = go.Figure()
    for name, r in res.get("roc", {}).items():
        if r is not None:
            auc = res[name].get("auc")
            fig.add_trace(go.Scatter(x=np.asarray(r["fpr"]), y=np.asarray(r["tpr"]), mode="lines",
                                     name=f"{name} (AUC {fmt(auc, '.3f')})"))
    fig.add_trace(go.Scatter(x=[0, 1], y=[0, 1], mode="lines", line=dict(dash="dot", color="#999"), name="chance"))
    fig.update_layout(xaxis_title="false positive rate", yaxis_title="true positive rate", height=460,
                      margin=dict(l=50, r=20, t=30, b=40))
    figs.append(figure_script(fig, "fig-roc"))
    body += ["<h2>ROC curves</h2>", figs[-1]]
    if res.get("logs"):
        chans = res["channels"]
        calib = res.get("calibration") or {}
        smooth_txt = (f" of the scores smoothed over {fmt(calib['smooth_s'])} s (calibration: "
                      f"{escape(str(calib.get('source', '')))})" if calib.get("smooth_s") else "")
        vr = [[escape(d["log"]), *[("<b>R</b> " if d["label"][c] else "") + escape(d["verdict"][c])
                               + f" ({d['score_last'][c]:.2f})" for c in chans]] for d in res["logs"]]
        body += ["<h2>Per-log verdicts (learned head)</h2>",
                 f'<p class="muted">Mean condition score (1 = normal) of the last {fmt(calib.get("verdict_s", 5.0))} s'
                 f'{smooth_txt}; below {fmt(calib.get("verdict_threshold", 0.5), ".3f")}: restricted. '
                 "<b>R</b>: labelled restricted.</p>", table(["log", *map(escape, chans)], vr)]
        cv = calib.get("val") or {}
        if cv.get("window_recall_loo") is not None:
            body.append(f'<p class="muted">Window threshold {fmt(calib.get("window_threshold"), ".3f")}: recall '
                        f'{fmt(cv.get("window_recall"), ".3f")} on its {cv.get("n_logs")} calibration logs, '
                        f'{fmt(cv["window_recall_loo"], ".3f")} (precision {fmt(cv.get("window_precision_loo"), ".3f")}) '
                        "on a calibration log left out of the choice; logs with motion the calibration logs lack "
                        "can do worse.</p>")
        al = (res.get("learned") or {}).get("alarms")
        if al:
            ra, na = al["restricted"], al["normal"]
            body.append(f'<p class="muted">Per-frame alarm (smoothed score below {fmt(al["threshold"], ".3f")} after '
                        f'a {fmt(al.get("warmup_s"), ".2f")} s warm-up'
                        + (f', raised after {fmt(al["hold_s"], ".2f")} s below it' if al.get("hold_s") else "")
                        + f', as <code>ConditionMonitor</code> raises it '
                        f'online): {ra["detected"]} of {ra["n"]} restricted '
                        f'channels alarmed, first alarm {fmt(ra["first_alarm_s"]["median"], ".2f")} s after the start (median; '
                        f'max {fmt(ra["first_alarm_s"]["max"], ".2f")} s), alarmed {fmt(ra["alarm_time_fraction"], ".2f")}'
                        f' of their time; {na["with_alarm"]} of {na["n"]} normal channels ever alarmed, '
                        f'{fmt(na["alarm_time_fraction"], ".4f")} of their time, '
                        f'{fmt(na["false_alarms_per_hour"], ".1f")} alarm onsets per hour.</p>')
        body.append("<h2>Per-frame condition scores</h2>")
        for i, d in enumerate(res["logs"][:max_logs]):
            fs = d.get("frame_scores")
            if fs is None:
                continue
            f = go.Figure()
            for c, ch in enumerate(chans):
                f.add_trace(go.Scatter(y=np.asarray(fs[:, c], np.float32), x0=0.0, dx=d["dt"], mode="lines",
                                       name=ch))
            f.update_layout(title=d["log"], yaxis_title="score (1 = normal)", xaxis_title="time [s]", height=260,
                            yaxis_range=[-0.05, 1.05], margin=dict(l=50, r=20, t=40, b=40))
            figs.append(figure_script(f, f"fig-log-{i}"))
            body.append(figs[-1])
    return body
