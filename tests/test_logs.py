"""Importers on the real shared logs, the native format round trip, CSV mappings and resampling."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import numpy as np
import pytest

from actuatorlab.errors import DataError
from actuatorlab.logs import (
    FORMAT_VERSION,
    Channel,
    Setup,
    Trajectory,
    decode_dynamixel_pwm,
    detect_format,
    infer_dt,
    load_log,
    load_logs,
    load_native,
    resample_uniform,
    save_trajectory,
)

SHARED = Path(__file__).resolve().parents[2] / "shared"
BAM = SHARED / "data" / "bam"
EMPS = SHARED / "data" / "emps" / "DATA_EMPS.mat"
DATA = Path(__file__).resolve().parent / "data"

XL_RAW = sorted((BAM / "xl330" / "raw").glob("*.json")) if BAM.exists() else []
XL_PROC = sorted((BAM / "xl330" / "processed").glob("*.json")) if BAM.exists() else []
STS_RAW = sorted((BAM / "sts3250" / "raw").glob("*.json")) if BAM.exists() else []

needs_bam = pytest.mark.skipif(not XL_RAW, reason="shared BAM data not available")
needs_emps = pytest.mark.skipif(not EMPS.exists(), reason="shared EMPS data not available")

TWO_PI_4096 = 2 * math.pi / 4096


def _raw_json(path: Path) -> dict:
    return json.loads(path.read_text())


def _int16(x) -> np.ndarray:
    """Independent decode: reinterpret the uint16 bits as int16."""
    return np.asarray(x, dtype=np.int64).astype(np.uint16).view(np.int16).astype(np.float64)


# --------------------------------------------------------------------------- BAM xl330 raw
@needs_bam
@pytest.mark.parametrize("path", XL_RAW, ids=lambda p: p.stem)
def test_xl330_raw_channels_units_and_decode(path: Path) -> None:
    doc = _raw_json(path)
    traj = load_log(path)
    n = len(doc["entries"])
    assert traj.n == n and 1100 <= n <= 1520
    assert set(traj.data) == {"position_target", "position", "velocity", "torque_enable", "supply_voltage",
                              "temperature", "pwm_duty"}
    for name, x in traj.data.items():
        assert x.shape == (n,) and x.dtype == np.float64, name
    ch = traj.channels
    assert (ch["position"].unit, ch["position"].kind, ch["position"].side) == ("rad", "measured", "output")
    assert ch["position"].source == "encoder 4096 counts/rev"
    assert (ch["position_target"].unit, ch["position_target"].kind) == ("rad", "commanded")
    assert (ch["velocity"].unit, ch["velocity"].kind) == ("rad/s", "estimated")
    assert (ch["torque_enable"].kind, ch["supply_voltage"].side, ch["supply_voltage"].unit) == ("commanded", "none", "V")
    assert (ch["pwm_duty"].unit, ch["pwm_duty"].kind) == ("1", "measured")
    assert ch["temperature"].unit == "degC"
    # values: raw time base kept as is (midpoints of bus reads, non-uniform), position on the 4096 grid
    t = np.array([e["timestamp"] for e in doc["entries"]])
    np.testing.assert_array_equal(traj.time, t)
    assert np.all(np.diff(traj.time) > 0)
    counts = traj["position"] / TWO_PI_4096
    np.testing.assert_allclose(counts, np.round(counts), atol=1e-6)
    # PWM decode against an independent int16 reinterpretation of the uint16 register
    load = np.array([e["load"] for e in doc["entries"]])
    np.testing.assert_array_equal(traj["pwm_duty"], _int16(load) / 885.0)
    assert np.all(np.abs(traj["pwm_duty"]) <= 1.0)
    # setup and conditions
    s = traj.setup
    assert (s.actuator, s.joint_type, s.controller) == ("xl330", "revolute", "dynamixel_pwm")
    assert s.gains == {"kp": float(doc["kp"])} and s.supply_voltage == pytest.approx(7.4)
    assert s.bench == {"mass": 0.49, "length": 0.1, "arm_mass": 0.0}
    assert traj.conditions == {"load": "0.49kg@0.1m", "gain": f"kp{doc['kp']}", "excitation": doc["trajectory"],
                               "session": "2026-01-15"}
    med = infer_dt(traj)
    expected = 3.5e-3 if doc["trajectory"] == "lift_and_drop" else 5.3e-3
    assert med == pytest.approx(expected, abs=0.15e-3)


@needs_bam
def test_pwm_register_wraps_to_negative_values() -> None:
    assert decode_dynamixel_pwm(np.array([65535]))[0] == pytest.approx(-1 / 885)
    np.testing.assert_allclose(decode_dynamixel_pwm(np.array([0, 885, 64651, 65534, 1])),
                               [0.0, 1.0, -1.0, -2 / 885, 1 / 885])
    # a real raw file with register 65535 somewhere
    hits = 0
    for path in XL_RAW:
        loads = np.array([e["load"] for e in _raw_json(path)["entries"]])
        idx = np.flatnonzero(loads == 65535)
        if idx.size:
            traj = load_log(path)
            np.testing.assert_allclose(traj["pwm_duty"][idx], -1 / 885)
            hits += idx.size
    assert hits > 0


@needs_bam
def test_decoded_duty_has_both_signs_on_sin_sin() -> None:
    sin_sin = [p for p in XL_RAW if _raw_json(p)["trajectory"] == "sin_sin"]
    assert len(sin_sin) == 3
    for p in sin_sin:
        d = load_log(p)["pwm_duty"]
        assert d.min() < -0.3 and d.max() > 0.3, p.name  # the naive uint16/885 would never be negative
        assert abs(np.mean(np.sign(d[np.abs(d) > 0.05]))) < 0.5  # roughly balanced


@needs_bam
def test_lift_and_drop_torque_disabled_part() -> None:
    p = next(p for p in XL_RAW if _raw_json(p)["trajectory"] == "lift_and_drop")
    traj = load_log(p)
    te = traj["torque_enable"]
    assert set(np.unique(te)) == {0.0, 1.0}
    t_off = traj.time[np.argmax(te < 0.5)]
    assert 1.9 < t_off < 2.1
    assert np.all(te[traj.time > t_off] == 0.0)


# --------------------------------------------------------------------------- BAM xl330 processed
@needs_bam
@pytest.mark.parametrize("path", XL_PROC, ids=lambda p: p.stem)
def test_xl330_processed_pwm_recomputed_from_raw(path: Path) -> None:
    traj = load_log(path)
    raw = load_log(path.parent.parent / "raw" / path.name)
    assert traj.n in (1200, 1201) and traj.setup.extra["processed"] is True
    np.testing.assert_allclose(np.diff(traj.time), 0.005, atol=1e-9)
    assert traj.conditions == raw.conditions and traj.setup.gains == raw.setup.gains
    # pwm_duty = raw duty of the last raw sample at or before each processed time
    idx = np.searchsorted(raw.time, traj.time, side="right") - 1
    idx = np.clip(idx, 0, None)
    np.testing.assert_array_equal(traj["pwm_duty"], raw["pwm_duty"][idx])
    assert "zero-order hold" in traj.channels["pwm_duty"].source
    assert 0 < traj.channels["pwm_duty"].latency_s < 0.006  # mean age of the held raw sample
    # the interpolated 'load' is kept only as load_raw, flagged as unusable
    assert "do not use" in traj.channels["load_raw"].description
    assert any("position_target was linearly interpolated" in w for w in traj.setup.extra["warnings"])


@needs_bam
def test_processed_load_is_wrong_where_sign_changes() -> None:
    """The reason pwm_duty is recomputed: decoding the interpolated processed load gives nonsense."""
    p = next(p for p in XL_PROC if _raw_json(p)["trajectory"] == "sin_sin")
    traj = load_log(p)
    naive = traj["load_raw"]
    # values interpolated across the wrap land mid-range, far from any valid register value
    mid = (naive > 2000) & (naive < 63500)
    assert mid.sum() >= 1
    assert np.all(np.abs(traj["pwm_duty"]) <= 1.0)


@needs_bam
def test_processed_without_raw_sibling_omits_pwm(tmp_path: Path) -> None:
    src = XL_PROC[0]
    (tmp_path / "processed").mkdir()
    dst = tmp_path / "processed" / src.name
    shutil.copy(src, dst)
    traj = load_log(dst)
    assert "pwm_duty" not in traj.data
    assert any(w.startswith("pwm_duty omitted") and "not found" in w for w in traj.setup.extra["warnings"])
    # with the raw sibling present it comes back
    (tmp_path / "raw").mkdir()
    shutil.copy(src.parent.parent / "raw" / src.name, tmp_path / "raw" / src.name)
    assert "pwm_duty" in load_log(dst).data


# --------------------------------------------------------------------------- BAM sts3250
@needs_bam
@pytest.mark.parametrize("path", STS_RAW, ids=lambda p: p.stem)
def test_sts3250_no_invented_pwm(path: Path) -> None:
    traj = load_log(path)
    assert "pwm_duty" not in traj.data
    assert np.all(traj["load_raw"] == 0.0)
    assert "not recorded" in traj.channels["load_raw"].description
    s = traj.setup
    assert (s.actuator, s.controller, s.gains, s.supply_voltage) == ("sts3250", "feetech_pwm", {"kp": 32.0}, 12.0)
    assert s.bench == {"mass": 1.13, "length": 0.12, "arm_mass": 0.0}
    assert traj.conditions["load"] == "1.13kg@0.12m" and traj.conditions["session"] == "2024-10-26"
    assert 270 <= traj.n <= 360
    assert 0.014 < infer_dt(traj) < 0.021


# --------------------------------------------------------------------------- EMPS
@needs_emps
def test_emps_import() -> None:
    traj = load_log(EMPS)
    assert traj.n == 24841 and set(traj.data) == {"position", "position_target", "controller_output"}
    assert traj.time[0] == 0.0 and infer_dt(traj) == pytest.approx(1e-3, rel=1e-4)
    c = traj.channels
    assert (c["position"].unit, c["position"].kind, c["position"].side) == ("m", "measured", "motor")
    assert "50000 counts/rev" in c["position"].source
    assert (c["position_target"].unit, c["position_target"].kind) == ("m", "commanded")
    assert (c["controller_output"].unit, c["controller_output"].kind) == ("V", "commanded")
    assert 0.24 < traj["position"].max() < 0.25 and abs(traj["controller_output"]).max() == pytest.approx(4.3257, abs=1e-3)
    s = traj.setup
    assert (s.actuator, s.joint_type, s.controller, s.supply_voltage) == ("emps", "prismatic", "emps_cascade", None)
    assert s.gains == pytest.approx({"kp": 160.18, "kv": 243.45})
    assert s.bench["gtau"] == pytest.approx(35.1507, abs=1e-4)
    assert traj.conditions["excitation"] == "emps_reference" and traj.conditions["session"] == "DATA_EMPS"


def _write_emps_like(path: Path, T: int = 200, **extra) -> None:
    import scipy.io

    t = np.arange(T) * 1e-3
    qg = 0.1 * (1 - np.cos(2 * np.pi * t))
    scipy.io.savemat(path, {"t": t[:, None], "qm": (qg * 0.99)[:, None], "qg": qg[:, None],
                            "vir": np.sin(t)[:, None], "gtau": np.array([[35.0]]), "kp": np.array([[160.0]]),
                            "kv": np.array([[240.0]]), **extra})


def test_emps_extra_variables_kept(tmp_path: Path) -> None:
    T = 200
    p = tmp_path / "DATA_EMPS_PULSES.mat"
    pulses = np.zeros(T)
    pulses[50:60] = 120.0
    _write_emps_like(p, T, pulses_N=pulses[:, None], mystery=np.arange(T)[None, :], offset=np.array([[2.5]]))
    traj = load_log(p)
    assert traj.channels["pulses_N"] == Channel("N", "measured", "output", source="pulses_N",
                                                description=traj.channels["pulses_N"].description)
    np.testing.assert_array_equal(traj["pulses_N"], pulses)
    assert traj.channels["mystery"].unit == "unknown"
    np.testing.assert_array_equal(traj["mystery"], np.arange(T))
    assert traj.setup.extra["offset"] == 2.5
    assert traj.conditions["session"] == "DATA_EMPS_PULSES"


# --------------------------------------------------------------------------- detection, folders
@needs_bam
def test_detection_is_by_content(tmp_path: Path) -> None:
    p = tmp_path / "renamed.log"
    shutil.copy(XL_RAW[0], p)
    assert detect_format(p) == "bam"
    assert load_log(p).n == load_log(XL_RAW[0]).n
    if EMPS.exists():
        q = tmp_path / "emps.bin"
        shutil.copy(EMPS, q)
        assert detect_format(q) == "emps"
    save_trajectory(load_log(XL_RAW[0]), tmp_path / "native")
    assert detect_format(tmp_path / "native.parquet") == "native" == detect_format(tmp_path / "native.json")
    assert detect_format(DATA / "servo_example.csv") == "csv"


@needs_bam
def test_load_logs_folder_recursive_sorted() -> None:
    trajs = load_logs(BAM / "xl330")
    assert len(trajs) == 22
    files = [Path(t.source_file) for t in trajs]
    assert files == sorted(files)
    assert sum(t.setup.extra["processed"] for t in trajs) == 11


def test_load_logs_skips_mappings_and_sidecars(tmp_path: Path) -> None:
    shutil.copy(DATA / "servo_example.csv", tmp_path / "a.csv")
    shutil.copy(DATA / "servo_example.mapping.json", tmp_path / "mapping.json")
    save_trajectory(load_log(tmp_path / "a.csv"), tmp_path / "sub" / "b")
    (tmp_path / "sub" / "config.json").write_text('{"optimizer": "cma"}')  # an unrelated JSON
    trajs = load_logs(tmp_path)
    assert [Path(t.source_file).name for t in trajs] == ["a.csv", "a.csv"]  # the native copy keeps its source
    assert trajs[0].n == trajs[1].n == 20
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "notes.json").write_text('{"a": 1}')
    with pytest.raises(DataError, match="no supported log files") as e:
        load_logs(tmp_path / "empty")
    assert e.value.path == str(tmp_path / "empty")


# --------------------------------------------------------------------------- native round trip
def _assert_same(a: Trajectory, b: Trajectory) -> None:
    assert a.name == b.name and a.source_file == b.source_file
    np.testing.assert_array_equal(a.time, b.time)
    assert list(a.channels) == list(b.channels) and a.channels == b.channels
    for k in a.data:
        np.testing.assert_array_equal(a.data[k], b.data[k])
    assert a.setup == b.setup and a.conditions == b.conditions


@pytest.mark.parametrize("which", ["xl330_raw", "xl330_processed", "sts3250", "emps", "csv"])
def test_native_round_trip(which: str, tmp_path: Path) -> None:
    src = {"xl330_raw": XL_RAW[:1], "xl330_processed": XL_PROC[:1], "sts3250": STS_RAW[:1],
           "emps": [EMPS] if EMPS.exists() else [], "csv": [DATA / "servo_example.csv"]}[which]
    if not src:
        pytest.skip("shared data not available")
    traj = load_log(src[0])
    out = save_trajectory(traj, tmp_path)
    assert out == tmp_path / f"{traj.name}.parquet" and out.with_suffix(".json").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([out.name, out.with_suffix(".json").name])
    side = json.loads(out.with_suffix(".json").read_text())
    assert side["format"] == "actuatorlab-trajectory" and side["format_version"] == FORMAT_VERSION
    assert side["n_samples"] == traj.n and len(side["parquet_sha256"]) == 64
    _assert_same(load_native(out), traj)
    _assert_same(load_native(out.with_suffix(".json")), traj)
    _assert_same(load_log(out), traj)


def test_save_overwrites_atomically(tmp_path: Path) -> None:
    traj = load_log(DATA / "servo_example.csv")
    p = save_trajectory(traj, tmp_path / "x.json")
    assert p == tmp_path / "x.parquet"
    traj2 = traj.replace(conditions={**traj.conditions, "session": "second"})
    save_trajectory(traj2, tmp_path / "x")
    assert load_native(p).conditions["session"] == "second"
    assert sorted(q.name for q in tmp_path.iterdir()) == ["x.json", "x.parquet"]  # no temp files left


def test_native_keeps_nan_with_strict_false(tmp_path: Path) -> None:
    traj = load_log(DATA / "servo_example.csv")
    temp = traj["temperature"].copy()
    temp[3] = np.nan
    traj = traj.with_channel("temperature", temp, traj.channels["temperature"])
    back = load_native(save_trajectory(traj, tmp_path))
    assert np.isnan(back["temperature"][3]) and np.isfinite(back["temperature"]).sum() == 19


# --------------------------------------------------------------------------- CSV + mapping
def test_csv_mapping_unit_conversion() -> None:
    traj = load_log(DATA / "servo_example.csv")
    assert traj.n == 20
    np.testing.assert_allclose(traj.time, np.arange(20) * 0.010)
    np.testing.assert_allclose(traj["position_target"][1], 9.271 * math.pi / 180)
    np.testing.assert_allclose(traj["position"][3], 9.271 * math.pi / 180)
    np.testing.assert_allclose(traj["velocity"][2], 157.080 * 2 * math.pi / 60)  # rpm -> rad/s
    np.testing.assert_allclose(traj["current"][:2], [0.120, 0.125])  # mA -> A
    np.testing.assert_array_equal(traj["torque_enable"], [1.0] * 18 + [0.0] * 2)
    units = {k: c.unit for k, c in traj.channels.items()}
    assert units == {"position_target": "rad", "position": "rad", "velocity": "rad/s", "current": "A",
                     "supply_voltage": "V", "temperature": "degC", "torque_enable": "bool"}
    assert traj.channels["position"].source.startswith("magnetic encoder") and "deg -> rad" in traj.channels["position"].source
    assert traj.channels["velocity"].kind == "estimated"
    assert traj.setup == Setup(actuator="example_servo", joint_type="revolute", controller="pd",
                               gains={"kp": 20.0, "kd": 0.5}, supply_voltage=12.0,
                               bench={"mass": 0.2, "length": 0.05, "arm_mass": 0.0},
                               extra=traj.setup.extra)
    assert traj.setup.extra["non_numeric_columns_not_imported"] == ["comment"]
    assert traj.conditions == {"load": "0.2kg@0.05m", "gain": "kp20", "excitation": "sine_5hz", "session": "example"}


def test_csv_prismatic_mm_scale_offset_and_mapping_lookup(tmp_path: Path) -> None:
    t = np.arange(15) * 2.0  # ms
    rows = ["t,ref_mm,enc_counts,extra_col"] + [f"{a},{10 + k},{1000 + 40 * k},{k * k}" for k, a in enumerate(t)]
    (tmp_path / "lin.csv").write_text("\n".join(rows) + "\n")
    mapping = {
        "time": {"column": "t", "unit": "ms"},
        "channels": {"position_target": {"column": "ref_mm", "unit": "mm"},
                     "position": {"column": "enc_counts", "unit": "mm", "scale": 0.025, "offset": -25.0}},
        "setup": {"actuator": "linear_stage", "joint_type": "prismatic"},
    }
    (tmp_path / "mapping.json").write_text(json.dumps(mapping))
    traj = load_log(tmp_path / "lin.csv")  # found as mapping.json in the folder
    np.testing.assert_allclose(traj.time, t * 1e-3)
    np.testing.assert_allclose(traj["position"], ((1000 + 40 * np.arange(15)) * 0.025 - 25.0) * 1e-3)
    np.testing.assert_allclose(traj["position_target"], (10 + np.arange(15)) * 1e-3)
    assert traj.channels["position"].unit == "m" and traj.channels["position_target"].kind == "commanded"
    np.testing.assert_array_equal(traj["csv_extra_col"], np.arange(15) ** 2)
    assert traj.conditions["session"] == "lin"
    # an explicit mapping (dict or file) wins over the folder's mapping.json
    other = {**mapping, "conditions": {"excitation": "ramp"}}
    assert load_log(tmp_path / "lin.csv", mapping=other).conditions["excitation"] == "ramp"
    (tmp_path / "other.json").write_text(json.dumps(other))
    assert load_logs([tmp_path / "lin.csv"], mapping=tmp_path / "other.json")[0].conditions["excitation"] == "ramp"


# --------------------------------------------------------------------------- resampling
@needs_bam
def test_resample_commanded_is_causal_zero_order_hold() -> None:
    traj = load_log(XL_RAW[0])
    dt = 0.005
    uni = resample_uniform(traj, dt)
    g = uni.time
    np.testing.assert_allclose(np.diff(g), dt, rtol=1e-9)
    assert g[0] == traj.time[0] and traj.time[-1] - dt < g[-1] <= traj.time[-1]
    # samples stamped up to 1e-3 dt after a grid time count as simultaneous (timestamp jitter)
    idx = np.searchsorted(traj.time, g + 1e-3 * dt, side="right") - 1
    assert np.all(traj.time[idx] <= g + 1e-3 * dt)
    np.testing.assert_array_equal(uni["position_target"], traj["position_target"][idx])
    np.testing.assert_array_equal(uni["torque_enable"], traj["torque_enable"][idx])
    np.testing.assert_allclose(uni["position"], np.interp(g, traj.time, traj["position"]))
    # changing a future command sample never changes earlier resampled commands
    k = traj.n // 2
    cmd = traj["position_target"].copy()
    cmd[k] += 1.0
    uni2 = resample_uniform(traj.with_channel("position_target", cmd, traj.channels["position_target"]), dt)
    before = g < traj.time[k]
    np.testing.assert_array_equal(uni2["position_target"][before], uni["position_target"][before])
    assert np.any(uni2["position_target"][~before] != uni["position_target"][~before])
    for name, c in uni.channels.items():
        assert c.latency_s == traj.channels[name].latency_s
        assert c.source.startswith(traj.channels[name].source)
    assert "zero-order hold" in uni.channels["position_target"].source
    assert "linear interpolation" in uni.channels["position"].source
    assert uni.setup.extra["resampled_dt_s"] == dt


def test_resample_step_command_exact() -> None:
    t = np.array([0.0, 0.004, 0.0105, 0.013, 0.021, 0.03, 0.036, 0.04, 0.05, 0.06])
    cmd = (t >= 0.0105).astype(float)
    meas = 2 * t
    traj = Trajectory("step", t, {"position_target": cmd, "position": meas},
                      {"position_target": Channel("rad", "commanded"), "position": Channel("rad", "measured")},
                      Setup("test"))
    uni = resample_uniform(traj, 0.01)
    np.testing.assert_allclose(uni.time, [0.0, 0.01, 0.02, 0.03, 0.04, 0.05, 0.06])
    np.testing.assert_array_equal(uni["position_target"], [0, 0, 1, 1, 1, 1, 1])  # 0.0105 > 0.01: not yet
    np.testing.assert_allclose(uni["position"], 2 * uni.time)
    assert infer_dt(traj) == pytest.approx(np.median(np.diff(t)))
