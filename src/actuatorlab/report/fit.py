"""A self-contained, offline HTML report of one model replayed on a set of logs.

The report opens without network access: plotly.js is loaded once per page, either from a
sibling file ``plotly-VERSION.min.js`` that every report of the folder shares (default; the
page itself then weighs tens to hundreds of kB) or inlined in the ``<head>`` (``plotly_js=
"inline"``: one self-contained file, about 4.8 MB more), and every figure is a JSON blob drawn by
a few lines of script. Content: model and data, pooled metrics (rollout vs one-step),
per-log table, error by regime, parameter table with uncertainties, the parameter correlation
heatmap with flagged pairs, caller-supplied extra sections, the operating-envelope coverage
(training ranges and planes, per-log share outside and where the error comes from), and one figure per log (measured vs
simulated position and the command, the error underneath, torque-off spans shaded).

Arrays are sent to the browser as base64 float32 (plotly.js typed-array spec) and decimated by a
uniform stride to at most ``max_points`` samples per trace; metrics always use every sample.
"""

from __future__ import annotations

import dataclasses
import html
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from actuatorlab.errors import ModelError
from actuatorlab.evaluate.metrics import REGIMES, LogResult, summarize
from .kit import CSS, LOADER, decimation, escape, figure_script, as_float, fmt, pct, plotly_script, table, write_page

__all__ = ["ReportOptions", "write_report"]

_MEASURED = "#222222"
_SIMULATED = "#1f77b4"
_COMMAND = "#999999"
_ONESTEP = "#ff7f0e"
_OUTSIDE = "#ff9900"
_MAX_SHADED_SPANS = 200




# --------------------------------------------------------------------------------------------
# JSON encoding of figures
# --------------------------------------------------------------------------------------------








# --------------------------------------------------------------------------------------------
# Figures
# --------------------------------------------------------------------------------------------




def _xaxis_args(t: np.ndarray) -> dict[str, Any]:
    """x0/dx for a uniform time base (halves the data), explicit x otherwise."""
    if t.size >= 2:
        dt = np.diff(t)
        step = float(np.median(dt))
        if step > 0 and np.all(np.abs(dt - step) <= 1e-6 * step):
            return {"x0": float(t[0]), "dx": step}
    return {"x": t.astype(np.float64)}


def _spans(flag: np.ndarray, t: np.ndarray) -> list[tuple[float, float]]:
    """Contiguous [t_start, t_end] spans where flag is true."""
    if not flag.any():
        return []
    d = np.diff(np.concatenate([[0], flag.astype(np.int8), [0]]))
    starts, ends = np.flatnonzero(d == 1), np.flatnonzero(d == -1) - 1
    return [(float(t[a]), float(t[b])) for a, b in zip(starts, ends)]


def _log_figure(r: LogResult, metrics: Mapping[str, Any], max_points: int,
                outside: np.ndarray | None = None) -> Any:
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    idx = decimation(r.n, max_points)
    t = r.t[idx]
    m = r.mask[idx]
    xa = _xaxis_args(t)

    def y(a: np.ndarray) -> np.ndarray:
        return np.where(m, a[idx], np.nan).astype(np.float32)

    fig = make_subplots(
        rows=2, cols=1, shared_xaxes=True, row_heights=[0.65, 0.35], vertical_spacing=0.05
    )
    line = dict(width=1.2)
    fig.add_trace(
        go.Scatter(name="command", y=y(r.q_target), mode="lines",
                   line=dict(color=_COMMAND, width=1, dash="dash"), **xa), row=1, col=1
    )
    fig.add_trace(
        go.Scatter(name="measured", y=y(r.q_meas), mode="lines",
                   line=dict(color=_MEASURED, **line), **xa), row=1, col=1
    )
    fig.add_trace(
        go.Scatter(name="simulated (rollout)", y=y(r.q_sim), mode="lines",
                   line=dict(color=_SIMULATED, **line), **xa), row=1, col=1
    )
    fig.add_trace(
        go.Scatter(name="rollout error (sim - meas)", y=y(r.q_sim - r.q_meas), mode="lines",
                   line=dict(color=_SIMULATED, width=1), **xa), row=2, col=1
    )
    if r.q_onestep is not None:
        fig.add_trace(
            go.Scatter(name="one-step error", y=y(r.q_onestep - r.q_meas), mode="lines",
                       line=dict(color=_ONESTEP, width=1), **xa), row=2, col=1
        )
    if r.winding_temperature_sim is not None:  # +thermal: the model's winding on a right-hand axis
        fig.add_trace(
            go.Scatter(name="winding temperature (model)", y=y(r.winding_temperature_sim), mode="lines",
                       line=dict(color=_COMMAND, width=1, dash="dot"), xaxis="x2", yaxis="y3", **xa)
        )
        fig.update_layout(yaxis3=dict(title=dict(text="winding [degC]"), overlaying="y2", anchor="x2",
                                      side="right", showgrid=False))
    off = _spans((r.torque_enable <= 0.5) & r.mask, r.t)
    for a, b in off[:_MAX_SHADED_SPANS]:
        fig.add_vrect(x0=a, x1=b, fillcolor="#d62728", opacity=0.08, line_width=0,
                      layer="below", row="all", col=1)
    out_spans = []
    if outside is not None and outside.shape == r.mask.shape and not outside.all():
        out_spans = _spans(outside & r.mask, r.t)
        for a, b in out_spans[:_MAX_SHADED_SPANS]:
            fig.add_vrect(x0=a, x1=b, fillcolor=_OUTSIDE, opacity=0.15, line_width=0,
                          layer="below", row="all", col=1)
    cond = ", ".join(f"{k}={v}" for k, v in sorted(r.conditions.items()))
    mae = metrics.get("position_mae")
    title = f"{r.name}" + (f" ({cond})" if cond else "")
    if mae is not None:
        title += f" - rollout MAE {mae:.4g} {r.unit}"
    shaded = (["red: torque off"] if off else []) + (["orange: outside the envelope"] if out_spans else [])
    if shaded:
        title += " - shaded " + ", ".join(shaded)
    fig.update_layout(
        template="none",
        title=dict(text=html.escape(title), font=dict(size=14)),
        height=460,
        margin=dict(l=70, r=20, t=50, b=40),
        legend=dict(orientation="h", y=1.02, x=1, xanchor="right", yanchor="bottom"),
        hovermode="x unified",
    )
    fig.update_yaxes(title_text=f"position [{r.unit}]", row=1, col=1)
    fig.update_yaxes(title_text=f"error [{r.unit}]", zeroline=True, row=2, col=1)
    fig.update_xaxes(title_text="time [s]", row=2, col=1)
    return fig


def _regime_figure(summary: Mapping[str, Any]) -> Any:
    import plotly.graph_objects as go

    unit = summary.get("unit", "")
    regimes = summary.get("regimes", {})
    names = [k for k in REGIMES if k in regimes] + [k for k in regimes if k not in REGIMES]
    maes = [regimes[k]["position_mae"] for k in names]
    text = [
        f"n={regimes[k]['n_samples']}, {100 * (regimes[k]['fraction'] or 0):.1f} %" for k in names
    ]
    fig = go.Figure(
        go.Bar(x=names, y=[np.nan if v is None else v for v in maes], text=text,
               textposition="outside", marker_color=_SIMULATED, name="regime MAE")
    )
    overall = summary.get("position_mae")
    if overall is not None:
        fig.add_hline(y=overall, line_dash="dash", line_color=_MEASURED,
                      annotation_text=f"all samples {overall:.4g} {unit}")
    fig.update_layout(
        template="none", height=360, margin=dict(l=70, r=20, t=30, b=60),
        yaxis_title=f"rollout MAE [{unit}]", showlegend=False,
    )
    return fig


def _correlation_figure(names: Sequence[str], corr: np.ndarray) -> Any:
    import plotly.graph_objects as go

    n = len(names)
    heat = go.Heatmap(
        z=corr, x=list(names), y=list(names), zmin=-1, zmax=1, colorscale="RdBu_r",
        colorbar=dict(title="corr"),
        hovertemplate="%{y} / %{x}: %{z:.3f}<extra></extra>",
    )
    if n <= 16:
        heat.update(texttemplate="%{z:.2f}", textfont=dict(size=10))
    fig = go.Figure(heat)
    side = max(360, min(900, 40 * n + 160))
    fig.update_layout(
        template="none", height=side, width=side + 120, margin=dict(l=140, r=20, t=30, b=140),
        yaxis=dict(autorange="reversed"),
    )
    return fig


# --------------------------------------------------------------------------------------------
# HTML pieces
# --------------------------------------------------------------------------------------------












def _cards(summary: Mapping[str, Any]) -> str:
    u = summary.get("unit", "")

    def length(v: float | None) -> str:
        if v is None:
            return "-"
        s = f"{v:.4g} {u}"
        return s + (f" ({math.degrees(v):.3g}&deg;)" if u == "rad" else "")

    items = [
        ("rollout MAE", length(summary.get("rollout_mae"))),
        ("one-step MAE", length(summary.get("onestep_mae"))),
        ("RMSE", length(summary.get("position_rmse"))),
        ("relative error", pct(summary.get("position_relative_error"))),
        ("max |error|", length(summary.get("position_max_abs_error"))),
        ("velocity MAE", fmt(summary.get("velocity_mae")) + f" {u}/s"),
    ]
    if summary.get("effort_relative_error") is not None:
        items.append(("effort relative error", pct(summary.get("effort_relative_error"))))
    return '<div class="cards">' + "".join(
        f'<div class="card"><div class="v">{v}</div><div class="k">{escape(k)}</div></div>'
        for k, v in items
    ) + "</div>"


def _per_log_table(summary: Mapping[str, Any]) -> str:
    u = escape(summary.get("unit", ""))
    rows = []
    for d in summary.get("per_log", []):
        cond = ", ".join(f"{k}={v}" for k, v in sorted(d.get("conditions", {}).items()))
        rows.append([
            escape(d["log"]), escape(cond), str(d["n"]), fmt(d["position_mae"]), fmt(d.get("onestep_mae")),
            fmt(d["position_rmse"]), pct(d["position_relative_error"]),
            pct(d.get("effort_relative_error")),
        ])
    rows.append([
        "<b>all (pooled)</b>", "", str(summary.get("n_samples", "")),
        fmt(summary.get("position_mae")), fmt(summary.get("onestep_mae")),
        fmt(summary.get("position_rmse")), pct(summary.get("position_relative_error")),
        pct(summary.get("effort_relative_error")),
    ])
    header = ["log", "conditions", "samples", f"rollout MAE [{u}]", f"one-step MAE [{u}]",
              f"RMSE [{u}]", "rel. error", "effort rel. error"]
    return table(header, rows, left=2)


def _regime_table(summary: Mapping[str, Any]) -> str:
    u = escape(summary.get("unit", ""))
    rows = [
        [escape(k), fmt(d["position_mae"]), str(d["n_samples"]), pct(d["fraction"])]
        for k, d in summary.get("regimes", {}).items()
    ]
    return table(["regime", f"rollout MAE [{u}]", "samples", "share"], rows)


def _parameter_table(parameters: Sequence[Mapping[str, Any]]) -> str:
    rows = []
    for i, p in enumerate(parameters):
        if "name" not in p or "value" not in p:
            raise ModelError(f"parameter entry {i} needs 'name' and 'value', got keys {sorted(p)}")
        value, se = p["value"], p.get("stderr")
        lo, hi, free = p.get("lower"), p.get("upper"), bool(p.get("free", True))
        v, s, fl, fh = (as_float(x) for x in (value, se, lo, hi))
        rel = abs(s / v) if s is not None and v else None
        note = ""
        if free and v is not None and fl is not None and fh is not None:
            span = fh - fl
            tol = 1e-3 * span if math.isfinite(span) and span > 0 else 0.0
            if v <= fl + tol or v >= fh - tol:
                note = '<span class="warn">at bound</span>'
        if rel is not None and rel > 0.5:
            note += (" " if note else "") + '<span class="warn">poorly determined</span>'
        rows.append([
            escape(p["name"]),
            fmt(value) + ("" if se is None else f" &plusmn; {fmt(se, '.2g')}"),
            "-" if rel is None else f"{100 * rel:.1f} %",
            escape(p.get("unit", "")),
            fmt(lo), fmt(hi),
            "free" if free else "fixed",
            note,
        ])
    header = ["parameter", "value &plusmn; std. error", "rel. std. error", "unit", "lower",
              "upper", "free / fixed", "note"]
    return table(header, rows)


def _identifiability_section(ident: Mapping[str, Any] | None, figs: list[str]) -> str:
    if not ident:
        return '<p class="muted">No identifiability analysis was provided.</p>'
    names = [str(n) for n in ident.get("names", [])]
    corr = np.asarray(ident.get("correlation", []), dtype=np.float64)
    if corr.shape != (len(names), len(names)):
        raise ModelError(
            f"identifiability: correlation matrix has shape {corr.shape}, "
            f"expected ({len(names)}, {len(names)}) for names {names}"
        )
    parts = []
    if names:
        target = f"fig-corr-{len(figs)}"
        figs.append(figure_script(_correlation_figure(names, corr), target))
        parts.append(figs[-1])
    flagged = ident.get("flagged_pairs", []) or []
    if flagged:
        rows = [[escape(a), escape(b), f"{float(c):+.3f}"] for a, b, c in flagged]
        parts.append("<p>Strongly correlated parameter pairs (only their combination is "
                     "determined by the data):</p>")
        parts.append(table(["parameter", "parameter", "correlation"], rows, left=2))
    else:
        parts.append('<p class="muted">No strongly correlated parameter pairs were flagged.</p>')
    return "\n".join(parts)


def _data_description(results: Sequence[LogResult]) -> str:
    n = sum(int(r.mask.sum()) for r in results)
    duration = sum(float(r.t[-1] - r.t[0]) for r in results if r.n)
    conds: dict[str, set[str]] = {}
    for r in results:
        for k, v in r.conditions.items():
            conds.setdefault(str(k), set()).add(str(v))
    cond = "; ".join(f"{escape(k)}: {escape(', '.join(sorted(v)))}" for k, v in sorted(conds.items()))
    names = ", ".join(escape(r.name) for r in results)
    return (
        f"<p><b>Data:</b> {len(results)} logs, {n} samples, {duration:.1f} s"
        + (f"; {cond}" if cond else "")
        + f'.<br><span class="muted">Logs: {names}</span></p>'
    )


def _plane_figure(plane: Mapping[str, Any], envelope: Mapping[str, Any], checks: Sequence[Any] = (),
                  max_points: int = 300) -> Any:
    """Occupancy of a 2-D envelope plane (training) as a heatmap, with the samples of the checked
    logs on top (at most ``max_points`` per log, uniform stride; outside in this plane or a range
    of its axes: orange)."""
    import plotly.graph_objects as go

    xe = np.asarray(plane["x_edges"], float)
    ye = np.asarray([np.nan if v is None else v for v in plane["y_edges"]], float)
    occ = np.array([[c == "1" for c in row] for row in plane["occupied"]], dtype=np.float32)
    dims = envelope.get("dimensions", {})
    ux = dims.get(plane["x"], {}).get("unit", "")
    uy = dims.get(plane["y"], {}).get("unit", "")
    fig = go.Figure(go.Heatmap(
        z=occ.T, x=0.5 * (xe[1:] + xe[:-1]), y=0.5 * (ye[1:] + ye[:-1]), zmin=0, zmax=1,
        colorscale=[[0, "#ffffff"], [1, "#c6dbef"]], showscale=False,
        hovertemplate="%{x:.3g}, %{y:.3g}: %{z}<extra>seen in training</extra>"))
    for i, c in enumerate(checks):
        x, y = c.signals.get(plane["x"]), c.signals.get(plane["y"])
        if x is None or y is None:
            continue
        idx = decimation(c.n, max_points)
        out = np.zeros(c.n, bool)
        for k in (plane["x"], plane["y"], _plane_name(plane, envelope)):
            if k in c.outside:
                out |= c.outside[k]
        out = out[idx]
        fig.add_trace(go.Scatter(
            x=x[idx].astype(np.float32), y=y[idx].astype(np.float32), mode="markers", name=escape(c.log),
            marker=dict(size=3, color=out.astype(np.float32), cmin=0, cmax=1, opacity=0.5,
                        colorscale=[[0, _MEASURED], [1, _OUTSIDE]]),
            hovertemplate=f"{escape(c.log)}<br>%{{x:.3g}}, %{{y:.3g}}<extra></extra>", showlegend=False))
    fig.update_layout(template="none", height=360, width=520, margin=dict(l=70, r=20, t=40, b=50),
                      title=dict(text=f"{escape(plane['x'])} x {escape(plane['y'])} (shaded: seen in training)",
                                 font=dict(size=13)),
                      xaxis_title=f"{plane['x']} [{ux}]", yaxis_title=f"{plane['y']} [{uy}]")
    return fig


def _plane_name(plane: Mapping[str, Any], envelope: Mapping[str, Any]) -> str:
    return next((k for k, v in envelope.get("planes", {}).items() if v is plane), "")


def _envelope_section(envelope: Mapping[str, Any] | None, summary: Mapping[str, Any],
                      figs: list[str], checks: Sequence[Any] = ()) -> str:
    """Training envelope (ranges, regimes, conditions, planes) and the coverage of every log."""
    if not envelope:
        return ('<p class="muted">The model file records no operating envelope (fitted before '
                "envelopes were recorded): coverage of these logs cannot be checked.</p>")
    parts = ['<p class="muted">Region covered by the training logs (docs/model_file.md): 1-D '
             "ranges are the 0.1-99.9 % quantiles widened by 5 % of their span (at least one sensor "
             "step); 2-D planes mark the cells that held training samples (plus one neighbouring "
             "cell; dots: samples of the logs of this report, orange where outside); rest_saturated: "
             "positions where the joint was held still with a saturated controller (stall).</p>"]
    rows = []
    for name, d in envelope.get("dimensions", {}).items():
        rows.append([escape(name), escape(d.get("unit", "")), fmt(d.get("lower")), fmt(d.get("upper")),
                     fmt(d.get("min")), fmt(d.get("max"))])
    parts.append(table(["dimension", "unit", "lower", "upper", "training min", "training max"], rows))
    reg = envelope.get("regimes", {})
    if reg:
        parts.append("<p>Training samples: " + ", ".join(f"{escape(k)} {pct(v)}" for k, v in reg.items())
                     + f" (rest: |velocity| &le; {fmt(envelope.get('settings', {}).get('rest_speed'), '.3g')}"
                     " for the whole rest window).</p>")
    conds = envelope.get("conditions", {})
    if conds:
        checked = set(envelope.get("checked_conditions", []))
        parts.append("<p>Conditions seen in training: " + "; ".join(
            f"{escape(k)}{'' if k in checked else ' (not checked)'}: {escape(', '.join(v))}" for k, v in conds.items())
            + ".</p>")
    planes = [p for p in envelope.get("planes", {}).values() if p.get("filter") != "rest_saturated"]
    for i, plane in enumerate(planes):
        target = f"fig-envelope-{i}"
        figs.append(figure_script(_plane_figure(plane, envelope, checks), target))
        parts.append(f'<div style="display:inline-block;width:49%">{figs[-1]}</div>')
    per_log = summary.get("per_log", [])
    if any(d.get("envelope") for d in per_log):
        dims = []
        for d in per_log:
            for k in (d.get("envelope_outside_dimensions") or {}):
                if k not in dims:
                    dims.append(k)
        rows = []
        for d in per_log:
            ev = d.get("envelope") or {}
            fr = d.get("envelope_outside_dimensions") or {}
            err = ev.get("error") or {}
            conc = [(k, v) for k, v in (err.get("by_dimension") or {}).items() if v["concentrated"]]
            rows.append([escape(d["log"]), pct(d.get("envelope_outside_fraction"))]
                        + [pct(fr.get(k)) if fr.get(k) else "" for k in dims]
                        + ["<br>".join(f'<span class="warn">{escape(k)}: {pct(v["error_share"])} of the error on '
                                       f'{pct(v["sample_share"])} of the samples</span>' for k, v in conc) or "no"])
        rows.append(["<b>all (pooled)</b>", pct(summary.get("envelope_outside_fraction"))]
                    + [pct((summary.get("envelope_outside_dimensions") or {}).get(k)) for k in dims] + [""])
        parts.append("<p>Share of each log's samples outside the envelope, by dimension (a sample can be "
                     "outside in several), and the dimensions its position error comes from (outside samples "
                     "carry &ge; 20 % of the error with &ge; 2x the MAE of the others):</p>")
        parts.append(table(["log", "outside (any)"] + [escape(k) for k in dims] + ["error from outside"], rows))
        warnings = summary.get("envelope_warnings") or []
        if warnings:
            parts.append("<ul>" + "".join(f'<li class="warn">{escape(w)}</li>' for w in warnings) + "</ul>")
        else:
            parts.append('<p class="muted">No log has its error concentrated outside the envelope.</p>')
    return "\n".join(parts)




# --------------------------------------------------------------------------------------------
# Public
# --------------------------------------------------------------------------------------------




@dataclass(frozen=True)
class ReportOptions:
    """What :func:`write_report` shows besides the logs.

    Fields:
        model_name: name of the evaluated model, shown in the header.
        title: page title.
        parameters: one dict per parameter with keys ``name``, ``value``, ``unit``, ``stderr``
            (None if unknown), ``lower``, ``upper``, ``free`` (bool).
        identifiability: None or {"names": [p...], "correlation": (P, P) list of lists,
            "flagged_pairs": [[a, b, corr], ...]}.
        summary: a :func:`~actuatorlab.evaluate.metrics.summarize` dict; computed from
            ``results`` when None.
        extra_sections: section title -> trusted HTML fragment (e.g. a model-comparison or
            timestep-sensitivity table), inserted as is.
        max_points: (int) at most this many samples per plotted trace (uniform stride).
        envelope: the model's operating envelope (the ``envelope`` of model.json, see
            :mod:`actuatorlab.evaluate.envelope`); None: the coverage section says it is
            unavailable. Per-log coverage is read from ``summary`` (``envelope_*`` keys of
            :func:`actuatorlab.app.jobs.run_evaluate`) when present.
        envelope_checks: :class:`~actuatorlab.evaluate.envelope.EnvelopeCheck` per log; their
            outside samples are shaded in the log figures.
        plotly_js: "sibling" (default): plotly.js is written once as ``plotly-VERSION.min.js``
            next to the report (kept if already there) and loaded by a relative ``<script src>``,
            so every report of a folder shares it and each page stays small; "inline": embedded
            in the page (one self-contained file, about 4.8 MB larger). Both work offline.
    """

    model_name: str
    title: str = "Actuator model report"
    parameters: Sequence[Mapping[str, Any]] = ()
    identifiability: Mapping[str, Any] | None = None
    summary: Mapping[str, Any] | None = None
    extra_sections: Mapping[str, str] | None = None
    max_points: int = 1000
    envelope: Mapping[str, Any] | None = None
    envelope_checks: Sequence[Any] | None = None
    plotly_js: str = "sibling"


def write_report(path: str | Path, results: Sequence[LogResult], options: ReportOptions | None = None,
                 **fields: Any) -> Path:
    """Write a self-contained HTML report (no network needed to view it) and return its path.

    Args:
        path: output file (parents are created); written atomically (temporary file in the same
            directory, then ``os.replace``), so readers never see a partial report.
        results: the replayed logs (:class:`LogResult`), one figure each.
        options: what else to show (:class:`ReportOptions`).
        fields: :class:`ReportOptions` fields as keywords (``model_name=...``), on top of ``options``.

    Raises:
        ModelError: a parameter entry lacks ``name``/``value`` or the correlation matrix does not
            match its names.
    """
    opts = ReportOptions(**fields) if options is None else dataclasses.replace(options, **fields)
    path = Path(path)
    results = list(results)
    summary = summarize(results) if opts.summary is None else opts.summary
    write_page(path, _page(path, results, summary, opts))
    return path


def _page(path: Path, results: list[LogResult], summary: Mapping[str, Any], opts: ReportOptions) -> str:
    """The report's HTML page."""
    title, model_name, parameters, identifiability = opts.title, opts.model_name, opts.parameters, \
        opts.identifiability
    extra_sections, max_points, envelope, envelope_checks = opts.extra_sections, opts.max_points, opts.envelope, \
        opts.envelope_checks
    per_log = {d["log"]: d for d in summary.get("per_log", [])}

    figs: list[str] = []
    body: list[str] = [
        f"<h1>{escape(title)}</h1>",
        f"<p><b>Model:</b> {escape(model_name)}</p>",
        _data_description(results),
        "<h2>Summary</h2>",
        '<p class="muted">Rollout: closed-loop simulation of the whole log from its initial '
        "state. One-step: prediction one sample ahead from the measured state. Pooled numbers "
        "weight samples, not logs.</p>",
        _cards(summary),
        _per_log_table(summary),
        "<h2>Error by regime</h2>",
        '<p class="muted">near_reversal: within the reversal window of a sign change of the '
        "measured velocity; low/high speed: below 10 % / above 50 % of the log's 95th-percentile "
        "speed (by default); static: torque on and nearly still; stall: static with the controller "
        "at &ge; 95 % of its limit (logged duty or controller output, else the firmware law on the "
        "measured position); driving/backdriving: the simulated motor delivers/absorbs power; "
        "torque_disabled: joint free.</p>",
    ]
    figs.append(figure_script(_regime_figure(summary), "fig-regimes"))
    body += [figs[-1], _regime_table(summary)]
    if summary.get("regime_warnings"):
        body.append("<ul>" + "".join(f'<li class="warn">{escape(w)}</li>' for w in summary["regime_warnings"]) + "</ul>")
    body.append("<h2>Parameters</h2>")
    body.append(_parameter_table(parameters) if parameters
                else '<p class="muted">No parameters were provided.</p>')
    body.append("<h2>Identifiability</h2>")
    body.append(_identifiability_section(identifiability, figs))
    for sec_title, fragment in (extra_sections or {}).items():
        body += [f"<h2>{escape(sec_title)}</h2>", str(fragment)]
    body.append("<h2>Operating envelope coverage</h2>")
    body.append(_envelope_section(envelope, summary, figs, envelope_checks or ()))
    outside = {c.log: c.signal_outside for c in (envelope_checks or [])}
    body.append("<h2>Logs</h2>")
    for i, r in enumerate(results):
        fig = _log_figure(r, per_log.get(r.name, {}), max_points, outside.get(r.name))
        figs.append(figure_script(fig, f"fig-log-{i}"))
        body.append(figs[-1])

    page = "\n".join([
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{escape(title)}</title>",
        f"<style>{CSS}</style>",
        "<script>window.PlotlyConfig = {MathJaxConfig: 'local'};</script>",
        plotly_script(path, opts.plotly_js),
        "</head><body>",
        *body,
        f"<script>{LOADER}</script>",
        "</body></html>",
        "",
    ])
    return page
