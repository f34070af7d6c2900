"""The HTML kit of every actuatorlab report: one stylesheet, plotly.js inlined once (or beside the page)
with figures loaded lazily, escaping, number formats, tables, and atomic page writes."""

from __future__ import annotations

import base64
import html
import json
import math
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence
import numpy as np
from actuatorlab.errors import ModelError
from ..files import atomic_write


CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:0 auto;max-width:1200px;
padding:1.5rem;color:#222;line-height:1.4}
h1{margin-bottom:.2rem}h2{border-bottom:1px solid #ddd;padding-bottom:.2rem;margin-top:2rem}
table{border-collapse:collapse;margin:.5rem 0;font-size:.9rem}
th,td{border:1px solid #ddd;padding:.25rem .6rem;text-align:right}
th{background:#f4f4f4}td.l,th.l{text-align:left}
.cards{display:flex;flex-wrap:wrap;gap:.75rem}
.card{border:1px solid #ddd;border-radius:6px;padding:.5rem .9rem;min-width:9rem}
.card .v{font-size:1.25rem;font-weight:600}.card .k{font-size:.8rem;color:#666}
.muted{color:#666;font-size:.85rem}.warn{color:#b00}
.fig{width:100%;min-height:360px}
"""


LOADER = """
document.querySelectorAll('script.actuatorlab-figure').forEach(function (s) {
  var f = JSON.parse(s.textContent);
  Plotly.newPlot(s.dataset.target, f.data, f.layout,
                 {responsive: true, displaylogo: false});
});
"""


def _typed(a: np.ndarray) -> dict[str, str] | list:
    """plotly.js typed-array spec ({"dtype", "bdata"}) for numeric arrays, list otherwise."""
    if a.dtype.kind not in "fiub":
        return [_jsonable(x) for x in a.tolist()]
    dtype = "f4" if a.dtype.kind == "f" else "i4"
    spec = {"dtype": dtype, "bdata": base64.b64encode(a.astype("<" + dtype).tobytes()).decode()}
    if a.ndim > 1:
        spec["shape"] = ", ".join(str(d) for d in a.shape)
    return spec


def _jsonable(x: Any) -> Any:
    if isinstance(x, np.ndarray):
        return _typed(x)
    if isinstance(x, Mapping):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    if isinstance(x, (np.floating, float)):
        x = float(x)
        return x if math.isfinite(x) else None
    if isinstance(x, np.integer):
        return int(x)
    if isinstance(x, np.bool_):
        return bool(x)
    return x


def figure_script(fig: Any, target: str) -> str:
    """Figure -> ``<div>`` + ``<script type="application/json">`` drawn by the loader."""
    payload = json.dumps(_jsonable(fig.to_plotly_json()), separators=(",", ":"), allow_nan=False)
    payload = payload.replace("</", "<\\/")  # never close the script element early
    return (
        f'<div id="{target}" class="fig"></div>\n'
        f'<script type="application/json" class="actuatorlab-figure" data-target="{target}">'
        f"{payload}</script>\n"
    )


def decimation(n: int, max_points: int) -> np.ndarray:
    """Indices of a uniform-stride decimation of n samples to at most max_points."""
    stride = max(1, math.ceil(n / max(1, max_points)))
    return np.arange(0, n, stride)


def escape(x: Any) -> str:
    return html.escape(str(x))


def fmt(x: Any, spec: str = ".4g") -> str:
    if x is None:
        return "-"
    try:
        v = float(x)
    except (TypeError, ValueError):
        return escape(x)
    return format(v, spec) if math.isfinite(v) else escape(v)


def as_float(x: Any) -> float | None:
    """float(x), or None when x is None or not a finite number."""
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def pct(x: float | None) -> str:
    return "-" if x is None else f"{100.0 * x:.2f} %"


def table(header: Sequence[str], rows: Iterable[Sequence[str]], left: int = 1) -> str:
    """HTML table; cells are already-escaped strings; the first ``left`` columns left-aligned."""
    cls = lambda i: ' class="l"' if i < left else ""  # noqa: E731
    out = ["<table><thead><tr>"]
    out += [f"<th{cls(i)}>{h}</th>" for i, h in enumerate(header)]
    out.append("</tr></thead><tbody>")
    for row in rows:
        out.append("<tr>" + "".join(f"<td{cls(i)}>{c}</td>" for i, c in enumerate(row)) + "</tr>")
    out.append("</tbody></table>")
    return "".join(out)


def plotly_script(path: Path, mode: str) -> str:
    """The ``<script>`` that loads plotly.js: inlined, or a sibling file written once per folder."""
    import plotly.offline

    js = plotly.offline.get_plotlyjs()
    if mode == "inline":
        return f"<script>{js}</script>"
    if mode != "sibling":
        raise ModelError(f"plotly_js must be 'sibling' or 'inline', got {mode!r}")
    name = f"plotly-{plotly.offline.get_plotlyjs_version()}.min.js"
    target = path.parent / name
    if not (target.is_file() and target.stat().st_size == len(js.encode("utf-8"))):
        write_page(target, js)
    return f'<script src="{name}"></script>'


def write_page(path: Path, text: str) -> None:
    atomic_write(path, text)
