"""The audit catches injected timing, NaN, saturation and causality problems and stays quiet on
real logs that have none."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from actuatorlab.logs import Channel, Setup, Trajectory, audit_log, estimate_lag, load_log, render_audit

SHARED = Path(__file__).resolve().parents[2] / "shared"
BAM = SHARED / "data" / "bam"
EMPS = SHARED / "data" / "emps" / "DATA_EMPS.mat"
XL_RAW = sorted((BAM / "xl330" / "raw").glob("*.json")) if BAM.exists() else []
ALL_BAM = sorted(BAM.rglob("*.json")) if BAM.exists() else []
needs_bam = pytest.mark.skipif(not XL_RAW, reason="shared BAM data not available")


def _codes(report: dict, severity: str) -> list[str]:
    return [i["code"] for i in report["issues"] if i["severity"] == severity]


def _sin_sin(kp: int = 800) -> Trajectory:
    for p in XL_RAW:
        t = load_log(p)
        if t.conditions["excitation"] == "sin_sin" and t.conditions["gain"] == f"kp{kp}":
            return t
    raise AssertionError("no such log")


def _synthetic(n: int = 400, dt: float = 0.01, delay: int = 5) -> Trajectory:
    t = np.arange(n) * dt
    r = np.sin(2 * np.pi * 0.7 * t) + 0.3 * np.sin(2 * np.pi * 2.1 * t)
    q = np.concatenate([np.zeros(delay), r[:-delay]]) * 0.9
    return Trajectory("syn", t, {"position_target": r, "position": q},
                      {"position_target": Channel("rad", "commanded"), "position": Channel("rad", "measured")},
                      Setup("test"))


@needs_bam
def test_clean_real_log_report() -> None:
    traj = _sin_sin(800)
    rep = audit_log(traj)
    json.dumps(rep, allow_nan=False)  # strict JSON
    assert _codes(rep, "error") == []
    tm = rep["timing"]
    assert tm["sample_rate_hz"] == pytest.approx(188, abs=3)
    assert 0.05e-3 < tm["dt_std_s"] < 0.5e-3 and tm["dt_max_s"] < 8e-3
    assert rep["gaps"]["count"] == 0 and rep["timestamps"]["duplicated"]["count"] == 0
    assert all(v == 0 for v in rep["nan_counts"].values())
    # kp800 sin_sin drives the XL330 into its PWM limit: about a quarter of the samples at |duty| = 1
    sat = rep["saturation"]["pwm_duty"]
    assert sat["level"] == 1.0 and 0.15 < sat["fraction"] < 0.35
    assert "saturation" in _codes(rep, "warning")
    assert [d["channel"] for d in rep["derived_channels"]] == ["velocity"]
    lag = rep["causality"]
    assert 0.02 < lag["lag_s"] < 0.3 and lag["peak_correlation"] > 0.5
    assert all(e["delay_s"] > 0 for e in lag["onsets"]["events"])


@needs_bam
@pytest.mark.parametrize("path", ALL_BAM, ids=lambda p: f"{p.parent.parent.name}-{p.parent.name}-{p.stem}")
def test_no_false_causality_error_on_real_logs(path: Path) -> None:
    """up_and_down / lift_and_drop give a negative increment cross-correlation (gravity-limited
    response), but the onset check shows the response follows its command."""
    rep = audit_log(load_log(path))
    assert _codes(rep, "error") == [], rep["issues"]


@pytest.mark.skipif(not EMPS.exists(), reason="shared EMPS data not available")
def test_emps_report() -> None:
    rep = audit_log(load_log(EMPS))
    assert _codes(rep, "error") == [] and rep["timing"]["uniform"]
    assert rep["timing"]["sample_rate_hz"] == pytest.approx(1000, rel=1e-4)
    assert rep["saturation"]["controller_output"]["n_samples"] == 0  # peak 4.33 V is touched once, not a plateau
    assert 0 < rep["causality"]["lag_s"] < 0.02


def test_duplicate_timestamp_injected() -> None:
    traj = _synthetic()
    t = traj.time.copy()
    t[100] = t[99]
    rep = audit_log(traj.replace(time=t))
    d = rep["timestamps"]["duplicated"]
    assert d["count"] == 1 and d["samples"] == [100] and d["times_s"] == [pytest.approx(0.99)]
    assert "duplicate_timestamps" in _codes(rep, "error")


def test_non_monotonic_and_gap_injected() -> None:
    traj = _synthetic()
    t = traj.time.copy()
    t[200], t[201] = t[201], t[200]
    t[300:] += 0.2  # a 0.21 s hole
    rep = audit_log(traj.replace(time=t))
    assert rep["timestamps"]["non_monotonic"]["samples"] == [201]
    assert "non_monotonic_timestamps" in _codes(rep, "error")
    gaps = rep["gaps"]["list"]
    assert [g["sample"] for g in gaps if g["dt_s"] > 0.1] == [300]
    assert gaps[-1]["t_before_s"] == pytest.approx(2.99) and gaps[-1]["dt_s"] == pytest.approx(0.21)
    assert "gap" in _codes(rep, "warning")


def test_nan_injected() -> None:
    traj = _synthetic()
    q = traj["position"].copy()
    q[[50, 60]] = np.nan
    traj = traj.with_channel("position", q, traj.channels["position"])
    traj = traj.with_channel("temperature", np.where(np.arange(traj.n) == 7, np.nan, 30.0),
                             Channel("degC", "measured", "none"))
    rep = audit_log(traj)
    assert rep["nan_counts"]["position"] == 2 and rep["nan_counts"]["temperature"] == 1
    assert rep["nan_counts"]["time"] == 0 and rep["nan_counts"]["position_target"] == 0
    msgs = [(i["severity"], i["message"]) for i in rep["issues"] if i["code"] == "nan"]
    assert ("error", "2 NaN/inf value(s) in position") in msgs
    assert ("warning", "1 NaN/inf value(s) in temperature") in msgs
    assert rep["causality"]["lag_s"] is not None  # NaN samples are left out, the check still runs


def test_estimate_lag_synthetic() -> None:
    traj = _synthetic(delay=7)
    lag = estimate_lag(traj.time, traj["position_target"], traj["position"])
    assert lag["lag_samples"] == pytest.approx(7, abs=0.3) and lag["lag_s"] == pytest.approx(0.07, abs=0.003)
    lead = estimate_lag(traj.time, traj["position"], traj["position_target"])  # swapped: response leads
    assert lead["lag_samples"] == pytest.approx(-7, abs=0.3)


@needs_bam
@pytest.mark.parametrize("kp", [100, 800])
def test_command_shifted_to_lead_response_is_flagged(kp: int) -> None:
    traj = _sin_sin(kp)
    good = audit_log(traj)
    assert "causality" not in _codes(good, "error")
    # delay the command by 0.3 s (the log now shows the pendulum moving before it is told to)
    shift = 0.3
    r = np.interp(traj.time - shift, traj.time, traj["position_target"])
    bad = traj.with_channel("position_target", r, traj.channels["position_target"])
    rep = audit_log(bad)
    assert "causality" in _codes(rep, "error")
    c = rep["causality"]
    assert c["lag_s"] < 0 and c["lag_s"] < good["causality"]["lag_s"] - 0.2
    assert min(e["delay_s"] for e in c["onsets"]["events"]) < -0.05


def test_negative_latency_flagged() -> None:
    traj = _synthetic()
    traj = traj.with_channel("position", traj["position"], Channel("rad", "measured", latency_s=-0.002))
    rep = audit_log(traj)
    assert "negative_latency" in _codes(rep, "error")
    assert rep["latency"]["position"] == -0.002


def test_saturation_detectors() -> None:
    n = 300
    t = np.arange(n) * 1e-3
    u = np.clip(6 * np.sin(2 * np.pi * 3 * t), -4.0, 4.0)  # clipped at 4 V
    duty = np.clip(1.5 * np.sin(2 * np.pi * 3 * t), -1, 1)
    q = np.minimum(np.sin(2 * np.pi * 1 * t), 0.6)  # a stop at 0.6 rad
    traj = Trajectory("sat", t, {"position": q, "controller_output": u, "pwm_duty": duty},
                      {"position": Channel("rad", "measured"), "controller_output": Channel("V", "commanded", "none"),
                       "pwm_duty": Channel("1", "measured", "none")}, Setup("test"))
    rep = audit_log(traj)
    s = rep["saturation"]
    assert s["controller_output"]["level"] == 4.0
    assert s["controller_output"]["n_samples"] == int(np.sum(np.abs(u) == 4.0))
    assert s["pwm_duty"]["n_samples"] == int(np.sum(np.abs(duty) >= 1 - 1e-3))
    at_stop = int(np.sum(q == 0.6))  # plus at most the one sample within a resolution step of it
    assert at_stop <= s["position"]["ends"]["max"]["longest_run_samples"] <= at_stop + 1
    assert _codes(rep, "warning").count("saturation") == 2
    assert "position_range_end" in _codes(rep, "info")
    # unclipped signals: nothing
    ok = traj.with_channel("controller_output", 6 * np.sin(2 * np.pi * 3 * t), traj.channels["controller_output"])
    assert audit_log(ok)["saturation"]["controller_output"]["n_samples"] == 0


def test_render_audit_lines() -> None:
    traj = _synthetic()
    t = traj.time.copy()
    t[10] = t[9]
    lines = render_audit(audit_log(traj.replace(time=t)))
    assert all(isinstance(x, str) for x in lines)
    text = "\n".join(lines)
    assert "100.0 Hz" in text and "duplicate_timestamps" in text and "[bold red]error" in text
    from rich.console import Console

    console = Console(record=True, width=200)
    for line in lines:
        console.print(line)
    assert "1 duplicated" in console.export_text()


def test_audit_of_strict_false_file(tmp_path: Path) -> None:
    entries = [{"timestamp": 0.01 * k, "position": 0.1 * np.sin(k / 5), "goal_position": 0.1 * np.sin((k + 2) / 5),
                "torque_enable": True} for k in range(40)]
    entries[12]["timestamp"] = entries[11]["timestamp"]
    p = tmp_path / "dup.json"
    p.write_text(json.dumps({"motor": "xl330", "kp": 100, "entries": entries}))
    from actuatorlab.errors import DataError

    with pytest.raises(DataError, match="sample 12"):
        load_log(p)
    rep = audit_log(load_log(p, strict=False))
    assert rep["timestamps"]["duplicated"]["samples"] == [12]


def test_audit_cli_exit_code_says_whether_a_log_is_unusable(tmp_path: Path) -> None:
    """`actuatorlab audit` exits 1 when a log has an error-severity issue (here a duplicated stamp),
    0 when it has none: the code a script or CI job reads (click returns it under standalone_mode=False)."""
    from actuatorlab.app.cli import main

    entries = [{"timestamp": 0.01 * k, "position": 0.1 * np.sin(k / 5), "goal_position": 0.1 * np.sin((k + 2) / 5),
                "torque_enable": True} for k in range(40)]
    good = tmp_path / "good.json"
    good.write_text(json.dumps({"motor": "xl330", "kp": 100, "entries": entries}))
    entries[12]["timestamp"] = entries[11]["timestamp"]
    bad = tmp_path / "dup.json"
    bad.write_text(json.dumps({"motor": "xl330", "kp": 100, "entries": entries}))
    assert main(["audit", str(bad)]) == 1
    assert main(["audit", str(good)]) == 0
