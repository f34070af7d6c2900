"""The fit report's diagnosis section: the sensor floor the logs show, the in-sample error against it,
and the regime tests of the residual (:func:`actuatorlab.evaluate.diagnose.diagnose`)."""

from __future__ import annotations

from typing import Any, Mapping

from .kit import escape, fmt, table

__all__ = ["diagnosis_section"]


def diagnosis_section(diag: Mapping[str, Any]) -> str:
    """HTML of a ``diagnosis`` record: the message (red when the warning fires), the floor's terms,
    one row per regime test and one per log."""
    k = 1e3
    u = "mrad" if diag.get("unit", "rad") == "rad" else "mm"
    cls = "warn" if diag.get("fired") else "muted"
    head = f'<p class="{cls}">{"Warning: " if diag.get("fired") else ""}{escape(diag["message"])}.</p>'
    terms = diag.get("floor_terms") or {}
    floor = table(["floor", f"in-sample MAE [{u}]", f"floor [{u}]", "ratio", "limit", f"quantisation [{u}]",
                   f"jitter x speed [{u}]", f"noise [{u}]"],
                  [["pooled", fmt(k * diag["in_sample_mae"], ".3g"), fmt(k * diag["floor"], ".3g"),
                    fmt(diag.get("ratio"), ".3g"), fmt(diag.get("ratio_limit"), "g"),
                    fmt(k * terms.get("quantisation_mae", 0.0), ".3g"), fmt(k * terms.get("jitter_mae", 0.0), ".3g"),
                    fmt(k * terms.get("noise_mae", 0.0), ".3g")]])
    regimes = table(["regime", "eta2", "p", f"amplitude [{u}]", "structured", "where"],
                    [[escape(r["regime"]), fmt(r["eta2"], ".3f"), fmt(r["p_value"], ".3g"),
                      fmt(k * r["amplitude"], ".3g"), "yes" if r["structured"] else "no", escape(r["detail"])]
                     for r in diag.get("regimes") or []], left=1)
    logs = table(["log", "samples", f"encoder step [{u}]", "jitter [ms]", f"floor [{u}]"],
                 [[escape(f["name"]), str(f["n_samples"]), fmt(k * f["quantum"], ".4g"), fmt(k * f["jitter_s"], ".3g"),
                   fmt(k * f["mae"], ".3g")] for f in diag.get("per_log") or []])
    return (head + floor
            + '<p class="muted">Floor: encoder step / 4 (quantisation), sqrt(2/pi) x timestamp jitter x mean speed, '
              "white noise off any lattice; root sum of squares, pooled over samples. A regime is structured when "
              "its bins explain at least eta2_min of the ranked residual (p from circular shifts of its labels) "
              "and its amplitude exceeds 2 floors.</p>"
            + regimes + logs)
