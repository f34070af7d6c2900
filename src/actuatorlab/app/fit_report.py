"""The one-joint fit's HTML report (``actuatorlab fit``, ``evaluate``): the parameter table and the
sections of the selection, the calibration, the uncertainty and the timestep sensitivity around
:func:`actuatorlab.report.fit.write_report`."""

from __future__ import annotations

from pathlib import Path

from ..identify.calibrate import describe, describe_judgement
from ..identify.boxes import describe_widening
from ..report.diagnosis import diagnosis_section
from ..report.fit import write_report

__all__ = ["param_rows", "html_table", "write_fit_report"]


def param_rows(model_dict: dict) -> list[dict]:
    """Free parameters for the report's table; ``stderr`` is the resampled (jackknife) standard
    error when there is one (it survives autocorrelated residuals), else the Jacobian one."""
    rows = []
    for name, e in model_dict["parameters"].items():
        if e.get("free"):
            se = e.get("stderr_resampled") if e.get("stderr_resampled") is not None else e.get("stderr")
            rows.append({"name": name, "value": e["value"], "unit": e["unit"], "stderr": se,
                         "stderr_jacobian": e.get("stderr"),
                         "stderr_resampled": e.get("stderr_resampled"),
                         "poorly_determined": e.get("poorly_determined"),
                         "determined": e.get("determined"),
                         "mae_change_minus": (e.get("sensitivity") or [None, None])[0],
                         "mae_change_plus": (e.get("sensitivity") or [None, None])[1],
                         "lower": e.get("lower"), "upper": e.get("upper"), "free": True})
    return rows


def html_table(rows: list[dict], cols: list[str]) -> str:
    """An HTML table of ``rows`` (dicts) over the columns ``cols`` (floats to 4 digits)."""
    def fmt(v):
        if isinstance(v, float):
            return f"{v:.4g}"
        return "" if v is None else str(v)

    head = "".join(f"<th>{c}</th>" for c in cols)
    body = "".join("<tr>" + "".join(f"<td>{fmt(r.get(c))}</td>" for c in cols) + "</tr>" for r in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def write_fit_report(out: Path, d: dict, fit, results, summary, ident, selection) -> None:
    """RUN/report.html of a one-joint fit: ``d`` the model dict, ``fit`` its FitResult, ``results``
    and ``summary`` its replays, ``ident`` the Jacobian standard errors, ``selection`` the family
    selection's record (None for one model)."""
    extra = {}
    if d.get("diagnosis"):
        extra["Diagnosis: the in-sample error against the sensor floor"] = diagnosis_section(d["diagnosis"])
    widened = (selection or {}).get("boxes_widened") or (d.get("fit") or {}).get("boxes_widened")
    if widened:
        text = describe_widening(widened)
        extra["Boxes widened (the fit on the edge of the profile's box)"] = f"<p>{text[0].upper() + text[1:]}.</p>"
    if selection:
        groups = selection.get("groups") or []
        extra["Nested models (selection by held-out condition groups)"] = (
            f"<p>{selection['rule']}</p>" + html_table(
                [{**r, "losses": r.get("losses")} for r in selection["table"]],
                ["model", "parent", "n_free", "train_mae", "validation_mae", "gain_vs_parent", "wins", "losses",
                 "sign_p", "earns_place", "selected"]))
        if groups:
            models = [r["model"] for r in selection["table"]]
            extra["Held-out MAE per condition group"] = html_table(groups, ["group"] + models)
        cal = selection.get("calibration")
        if selection.get("calibration_judged"):
            extra["Calibration judged"] = f"<p>{describe_judgement(selection['calibration_judged'])}.</p>"
        if cal:
            text = describe(cal)
            extra["Free-swing calibration (armature and encoder offset)"] = (
                f"<p>{text[0].upper() + text[1:]}.</p>"
                + html_table([{"parameter": k, "lower": v[0], "upper": v[1]} for k, v in cal["bounds"].items()],
                              ["parameter", "lower", "upper"])
                + "<p>Runs: " + ", ".join(cal["runs"]) + "</p>")
    if d.get("uncertainty"):
        u = d["uncertainty"]
        extra["Parameter uncertainty: resampled vs Jacobian"] = (
            f"<p>{u['method']}. The parameter table's std. error is the resampled one; parameters whose "
            f"resampled spread exceeds {100 * u['flag_fraction']:.0f} % of their value are flagged: "
            f"{', '.join(u['flagged']) or 'none'}. The Jacobian errors assume independent residuals.</p>"
            + html_table(param_rows(d), ["name", "value", "unit", "stderr_jacobian", "stderr_resampled",
                                           "poorly_determined"]))
    sens = (d.get("identifiability") or {}).get("sensitivity")
    if sens:
        extra["What these logs determine: each parameter moved alone"] = (
            f"<p>Each free parameter moved alone by -+{100 * sens['step']:g} % of its value, the others at "
            f"the optimum: the relative change of the in-sample position MAE. Within -+"
            f"{100 * sens['min_change']:g} % on a side, these logs do not determine it to "
            f"{100 * sens['step']:g} % (refitting the others could only lower the change): "
            f"{', '.join(sens['not_determined']) or 'none'}. Lowered by more than {100 * sens['min_change']:g} %: "
            f"the search stopped short along {', '.join(sens.get('improvable') or []) or 'none'}.</p>"
            + html_table(param_rows(d), ["name", "value", "unit", "mae_change_minus", "mae_change_plus",
                                           "determined"]))
    if d.get("timestep_sensitivity"):
        extra["Timestep sensitivity"] = html_table(
            [{**v, "dt": k, "dt_s": v["dt"]} for k, v in d["timestep_sensitivity"].items()],
            ["dt", "dt_s", "position_mae", "ratio_to_dt", "refit_position_mae", "max_abs_relative_change"])
    write_report(out / "report.html", results, title=f"actuatorlab fit: {fit.model}", model_name=fit.model,
                 parameters=param_rows(d), identifiability=ident, summary=summary, extra_sections=extra,
                 envelope=d.get("envelope"))
