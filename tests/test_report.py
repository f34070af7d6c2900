"""The HTML report: offline, contains the data, written atomically, reasonably small."""

from __future__ import annotations

import base64
import json
import os
import re
from pathlib import Path

import numpy as np
import pytest

from actuatorlab.errors import ModelError
from actuatorlab.evaluate.metrics import LogResult, summarize
from actuatorlab.report.fit import write_report

PARAMETERS = [
    {"name": "kt", "value": 0.61, "unit": "N.m/A", "stderr": 0.012, "lower": 0.1, "upper": 2.0,
     "free": True},
    {"name": "friction_stribeck", "value": 0.05, "unit": "N.m", "stderr": None, "lower": 0.0,
     "upper": 0.5, "free": True},
    {"name": "armature", "value": 0.004, "unit": "kg.m^2", "stderr": None, "lower": None,
     "upper": None, "free": False},
]
IDENT = {
    "names": ["kt", "friction_stribeck"],
    "correlation": [[1.0, -0.97], [-0.97, 1.0]],
    "flagged_pairs": [["kt", "friction_stribeck", -0.97]],
}


def make_log(i: int, n: int = 1200, dt: float = 0.01) -> LogResult:
    rng = np.random.default_rng(i)
    t = np.arange(n) * dt
    target = 0.8 * np.sign(np.sin(2 * np.pi * 0.4 * t + i))
    q = 0.8 * np.sin(2 * np.pi * 0.4 * t + i) + 1e-3 * rng.standard_normal(n)
    q_sim = q + 0.01 * np.sin(3 * t)
    te = np.ones(n)
    te[n // 2 : n // 2 + 100] = 0.0
    dq = np.gradient(q, t)
    return LogResult(
        name=f"log_{i:02d}", unit="rad", t=t, q_meas=q, q_sim=q_sim, dq_meas=dq, dq_sim=dq,
        q_target=target, torque_enable=te, mask=np.ones(n, dtype=bool),
        motor_torque_sim=np.cos(t), external_torque_sim=-np.sin(q), q_onestep=q + 1e-4,
        conditions={"load": f"{i % 3}", "excitation": "square"},
    )


def figures(text: str) -> dict[str, dict]:
    """data-target -> figure dict of every embedded figure."""
    blobs = re.findall(
        r'<script type="application/json" class="actuatorlab-figure" data-target="([^"]+)">'
        r"(.*?)</script>", text, flags=re.S,
    )
    return {k: json.loads(v) for k, v in blobs}


def decode(arr) -> np.ndarray:
    if isinstance(arr, dict):
        return np.frombuffer(base64.b64decode(arr["bdata"]), dtype="<" + arr["dtype"])
    return np.asarray(arr, dtype=float)


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    results = [make_log(i) for i in range(11)]
    out = tmp_path_factory.mktemp("report") / "sub" / "report.html"
    path = write_report(
        out, results, title="XL330 identification", model_name="m4_stribeck",
        parameters=PARAMETERS, identifiability=IDENT, summary=summarize(results),
        extra_sections={"Model comparison": "<table><tr><td>m1 vs m4</td></tr></table>"},
        plotly_js="inline", max_points=2000,
    )
    return path, results


def test_report_is_self_contained_and_offline(report):
    path, _ = report
    text = path.read_text(encoding="utf-8")
    assert text.startswith("<!DOCTYPE html>")
    assert not re.search(r"<script[^>]*\bsrc\s*=", text, flags=re.I)
    assert not re.search(r"""<link[^>]*href\s*=\s*["']?https?://""", text, flags=re.I)
    import plotly.offline

    head = plotly.offline.get_plotlyjs()[:300]
    assert text.count(head) == 1  # plotly.js inlined exactly once


def test_report_contains_parameters_identifiability_and_sections(report):
    text = report[0].read_text(encoding="utf-8")
    for word in ("m4_stribeck", "XL330 identification", "kt", "friction_stribeck", "armature",
                 "N.m/A", "fixed", "Model comparison", "m1 vs m4", "-0.970", "near_reversal"):
        assert word in text, word
    assert "0.61 &plusmn; 0.012" in text
    figs = figures(text)
    assert "fig-regimes" in figs
    heat = [f for k, f in figs.items() if k.startswith("fig-corr")]
    assert len(heat) == 1 and heat[0]["data"][0]["type"] == "heatmap"
    np.testing.assert_allclose(decode(heat[0]["data"][0]["z"]).reshape(2, 2), IDENT["correlation"],
                               rtol=1e-6)


def test_report_contains_plot_data_of_every_log(report):
    path, results = report
    figs = figures(path.read_text(encoding="utf-8"))
    logs = [figs[f"fig-log-{i}"] for i in range(len(results))]
    assert len(logs) == 11
    r = results[3]
    traces = {tr["name"]: tr for tr in logs[3]["data"]}
    assert {"command", "measured", "simulated (rollout)", "rollout error (sim - meas)",
            "one-step error"} <= set(traces)
    meas = decode(traces["measured"]["y"])
    np.testing.assert_allclose(meas, r.q_meas.astype(np.float32), rtol=0, atol=1e-7)
    err = decode(traces["rollout error (sim - meas)"]["y"])
    np.testing.assert_allclose(err, (r.q_sim - r.q_meas).astype(np.float32), atol=1e-7)
    assert traces["measured"]["x0"] == 0.0 and traces["measured"]["dx"] == pytest.approx(0.01)
    assert "log_03" in json.dumps(logs[3]["layout"]["title"])
    # torque-off span shaded in both subplots
    assert len(logs[3]["layout"]["shapes"]) == 2


def test_report_size_stays_reasonable(report):
    size = report[0].stat().st_size
    print(f"report size for 11 logs x 1200 samples: {size / 1e6:.2f} MB")
    assert size < 6e6


def test_reports_of_a_folder_share_one_sibling_plotly_js(report, tmp_path):
    """Default: plotly.js written once next to the reports and loaded relatively (offline, no CDN)."""
    import plotly.offline

    _, results = report
    a = write_report(tmp_path / "a.html", results, model_name="m")
    js = sorted(p.name for p in tmp_path.iterdir() if p.suffix == ".js")
    assert len(js) == 1 and js[0].startswith("plotly-")
    mtime = (tmp_path / js[0]).stat().st_mtime_ns
    b = write_report(tmp_path / "b.html", results[:2], model_name="m")
    assert (tmp_path / js[0]).stat().st_mtime_ns == mtime  # not rewritten
    assert (tmp_path / js[0]).read_text(encoding="utf-8") == plotly.offline.get_plotlyjs()
    for page in (a, b):
        text = page.read_text(encoding="utf-8")
        assert re.findall(r'<script src="([^"]+)"', text) == [js[0]]
        assert "http" not in "".join(re.findall(r"<(?:script|link)[^>]*>", text))
    # the same 11 logs: the page alone is a small fraction of the inlined one
    print(f"11 logs: inline {report[0].stat().st_size / 1e6:.2f} MB, sibling page {a.stat().st_size / 1e6:.3f} MB")
    assert a.stat().st_size < 0.15 * report[0].stat().st_size


def test_long_logs_are_decimated_to_max_points(tmp_path):
    r = make_log(0, n=5000, dt=0.001)
    path = write_report(tmp_path / "r.html", [r], model_name="m", max_points=2000)
    trace = figures(path.read_text(encoding="utf-8"))["fig-log-0"]["data"][1]
    y = decode(trace["y"])
    assert 1000 < y.size <= 2000
    np.testing.assert_allclose(y, r.q_meas[:: int(np.ceil(5000 / 2000))].astype(np.float32),
                               atol=1e-7)
    assert trace["dx"] == pytest.approx(0.003)


def test_written_atomically_and_no_temp_files_left(tmp_path, monkeypatch):
    r = make_log(1, n=300)
    path = write_report(tmp_path / "r.html", [r], model_name="first", plotly_js="inline")
    assert sorted(os.listdir(tmp_path)) == ["r.html"]
    before = path.read_bytes()

    def fail(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", fail)
    with pytest.raises(OSError, match="disk full"):
        write_report(tmp_path / "r.html", [r], model_name="second", plotly_js="inline")
    monkeypatch.undo()
    assert sorted(os.listdir(tmp_path)) == ["r.html"]  # temp file cleaned up
    assert path.read_bytes() == before  # old report intact


def test_bad_identifiability_and_parameters_raise(tmp_path):
    r = make_log(2, n=100)
    with pytest.raises(ModelError, match="correlation matrix has shape"):
        write_report(tmp_path / "r.html", [r], model_name="m",
                     identifiability={"names": ["a", "b", "c"], "correlation": [[1.0]]})
    with pytest.raises(ModelError, match="needs 'name' and 'value'"):
        write_report(tmp_path / "r.html", [r], model_name="m", parameters=[{"value": 1.0}])
    assert not list(Path(tmp_path).iterdir())
