"""ROS 2 MCAP and LeRobot importers on files the tests write: channels, units, clocks, causality of
the held commands, robot mapping, and the same real log read through BAM and through a bag."""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path

import numpy as np
import pytest

from actuatorlab.app.cli import main
from actuatorlab.errors import DataError
from actuatorlab.logs import audit_log, detect_format, load_log, load_logs
from actuatorlab.logs.importers.lerobot import normalize_positions, write_lerobot_dataset

mcap_ros2 = pytest.importorskip("mcap_ros2", reason="optional extra [mcap] not installed")
from actuatorlab.logs.importers.mcap_ros2 import JointBag, write_joint_bag  # noqa: E402

EXAMPLE = Path(__file__).resolve().parents[1] / "src" / "actuatorlab" / "examples" / "bam_xl330"
DEG = {"position_unit": "deg", "joint_position_units": {"gripper": "deg"}}
SO101 = ["shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll", "gripper"]


def sha(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


# ----------------------------------------------------------------------------------------------
# MCAP / ROS 2
# ----------------------------------------------------------------------------------------------

def two_joint_bag(path: Path, *, delay: float = 0.003, zero_stamps: bool = False, **kw) -> dict:
    T, dt = 60, 0.01
    t = np.arange(T) * dt + 0.0005
    q = np.stack([np.sin(3 * t), 0.5 * np.cos(2 * t)], axis=1)
    dq = np.stack([3 * np.cos(3 * t), -np.sin(2 * t)], axis=1)
    tc = np.arange(T // 2) * 2 * dt  # commands at 50 Hz, on the state grid's even samples
    qc = np.stack([np.arange(T // 2) * 0.1, -np.arange(T // 2) * 0.1], axis=1)
    write_joint_bag(path, JointBag(["joint1", "joint2"], None if zero_stamps else t, q, velocity=dq,
                                   effort=0.1 * q, log_times=t + delay, commands=qc, command_times=tc, **kw))
    return {"t": t, "q": q, "dq": dq, "tc": tc, "qc": qc}


def test_mcap_joint_state_channels_units_and_robot(tmp_path):
    ref = two_joint_bag(tmp_path / "arm.mcap")
    assert detect_format(tmp_path / "arm.mcap") == "mcap"
    tr = load_log(tmp_path / "arm.mcap")
    for j, k in (("joint1", 0), ("joint2", 1)):
        np.testing.assert_allclose(tr[f"position/{j}"], ref["q"][:, k])
        np.testing.assert_allclose(tr[f"velocity/{j}"], ref["dq"][:, k])
        assert tr.channels[f"position/{j}"].unit == "rad" and tr.channels[f"position/{j}"].kind == "measured"
        assert tr.channels[f"velocity/{j}"].kind == "estimated"
        assert tr.channels[f"effort/{j}"].unit == "N.m"
        assert tr.channels[f"position_target/{j}"].kind == "commanded"
    # header stamps are the time base, relative to the first sample, exact to the nanosecond
    np.testing.assert_allclose(tr.time, ref["t"] - ref["t"][0], atol=1e-9)
    assert tr.setup.extra["time_base"] == "header"
    np.testing.assert_allclose(tr["receive_delay"], 0.003, atol=1e-9)
    assert tr.setup.extra["robot"] == "open_manipulator_x"  # joint1, joint2 belong to that config only
    assert tr.setup.extra["joints"] == ["joint1", "joint2"]


def test_mcap_commands_are_held_never_taken_from_the_future(tmp_path):
    ref = two_joint_bag(tmp_path / "arm.mcap")
    tr = load_log(tmp_path / "arm.mcap")
    t_abs = ref["t"]
    for i, ti in enumerate(t_abs):
        k = np.searchsorted(ref["tc"], ti, side="right") - 1  # last command at or before the sample
        assert tr["position_target/joint1"][i] == pytest.approx(ref["qc"][k, 0])
    # a state sampled 0.5 ms after a command sees it; the sample before does not see the next one
    assert tr["position_target/joint1"][1] == pytest.approx(0.0)
    assert tr["position_target/joint1"][2] == pytest.approx(0.1)


def test_mcap_log_time_base_when_stamps_are_zero(tmp_path):
    ref = two_joint_bag(tmp_path / "z.mcap", zero_stamps=True, command_type="multiarray")
    tr = load_log(tmp_path / "z.mcap")
    assert tr.setup.extra["time_base"] == "log"
    assert "receive_delay" not in tr.data
    np.testing.assert_allclose(tr.time, ref["t"] - ref["t"][0], atol=1e-9)
    assert any("command_joints" in w for w in tr.setup.extra["warnings"])
    with pytest.raises(DataError, match="zero header stamp"):
        load_log(tmp_path / "z.mcap", mapping={"time": "header"})


def test_mcap_log_time_base_gives_latency_and_audit_flags_clock_mismatch(tmp_path):
    two_joint_bag(tmp_path / "a.mcap", delay=0.004)
    tr = load_log(tmp_path / "a.mcap", mapping={"time": "log"})
    assert tr.channels["position/joint1"].latency_s == pytest.approx(0.004, abs=1e-9)
    rep = audit_log(tr)
    assert rep["receive_delay"]["median_s"] == pytest.approx(0.004, abs=1e-9)
    assert not any(i["code"] == "clock_mismatch" for i in rep["issues"])
    two_joint_bag(tmp_path / "b.mcap", delay=-0.002)  # stamped after received: clocks disagree
    rep = audit_log(load_log(tmp_path / "b.mcap"))
    assert any(i["code"] == "clock_mismatch" and i["severity"] == "error" for i in rep["issues"])


def test_mcap_topic_choice_errors_name_the_topics(tmp_path):
    two_joint_bag(tmp_path / "a.mcap")
    with pytest.raises(DataError, match=r"a\.mcap: state topic '/nope' is not in the bag .*/joint_states"):
        load_log(tmp_path / "a.mcap", mapping={"state_topic": "/nope"})
    with pytest.raises(DataError, match="unknown mapping key"):
        load_log(tmp_path / "a.mcap", mapping={"state_topik": "/joint_states"})
    tr = load_log(tmp_path / "a.mcap", mapping={"command_topic": None}, strict=False)
    assert not any(k.startswith("position_target") for k in tr.data)


def test_real_bam_log_reads_the_same_through_a_bag(tmp_path):
    """The first bundled XL330 log written as a ROS 2 bag (JointState + JointTrajectory) and read
    back with the bench setup in the mapping: the same trajectory as the BAM importer's."""
    bam = load_log(sorted(EXAMPLE.glob("*.json"))[0])
    t = bam.time - bam.time[0]
    write_joint_bag(tmp_path / "x.mcap", JointBag(
        ["servo"], t, bam["position"][:, None], velocity=bam["velocity"][:, None],
        commands=bam["position_target"][:, None], command_times=t - 1e-4,
        enable=bam["torque_enable"], enable_times=t - 1e-4))
    mapping = {"setup": {k: v for k, v in bam.setup.to_dict().items() if k != "extra"},
               "conditions": bam.conditions, "enable_topic": "/torque_enable"}
    tr = load_log(tmp_path / "x.mcap", mapping=mapping)
    np.testing.assert_allclose(tr.time, t, atol=2e-9)
    for ch in ("position", "position_target", "velocity", "torque_enable"):
        np.testing.assert_allclose(tr[ch], bam[ch], atol=1e-12)
    assert tr.setup.controller == bam.setup.controller and tr.setup.bench == bam.setup.bench
    assert tr.conditions == bam.conditions


# ----------------------------------------------------------------------------------------------
# LeRobot
# ----------------------------------------------------------------------------------------------

def episodes(rng, lengths=(40, 25), unit="deg", cal=None):
    out, truth = [], []
    for T in lengths:
        q = 0.3 * rng.standard_normal((T, len(SO101)))
        qt = q + 0.01
        conv = lambda x: np.stack([normalize_positions(x[:, i], unit if j != "gripper" or unit in ("deg", "rad")  # noqa: E731
                                                       else "range_0_100", (cal or {}).get(j)) for i, j in enumerate(SO101)], 1)
        out.append({"state": conv(q), "action": conv(qt)})
        truth.append((q, qt))
    return out, truth


@pytest.mark.parametrize("version", ["v3.0", "v2.1"])
def test_lerobot_episodes_in_degrees(tmp_path, version):
    rng = np.random.default_rng(0)
    eps, truth = episodes(rng)
    root = write_lerobot_dataset(tmp_path / "so101_ds", eps, fps=50, joints=SO101, robot_type="so101_follower",
                                 codebase_version=version)
    with pytest.raises(DataError, match="declare \"position_unit\""):
        load_logs(root)
    before = sha(root)
    trajs = load_logs(root, mapping=DEG)
    assert sha(root) == before
    assert [t.n for t in trajs] == [40, 25] and len({t.name for t in trajs}) == 2
    for tr, (q, qt) in zip(trajs, truth):
        np.testing.assert_allclose(tr.time, np.arange(tr.n) / 50.0, atol=1e-12)
        for i, j in enumerate(SO101):
            np.testing.assert_allclose(tr[f"position/{j}"], q[:, i], atol=2e-7 * 180)  # float32 degrees
            np.testing.assert_allclose(tr[f"position_target/{j}"], qt[:, i], atol=2e-7 * 180)
        assert tr.channels["position_target/gripper"].kind == "commanded"
        assert tr.setup.extra["robot"] == "so101" and tr.setup.extra["joints"] == SO101


def test_lerobot_normalised_ranges_with_calibration(tmp_path):
    rng = np.random.default_rng(1)
    cal = {j: {"id": i + 1, "drive_mode": int(j == "elbow_flex"), "homing_offset": 0,
               "range_min": 800 + 10 * i, "range_max": 3200 - 20 * i} for i, j in enumerate(SO101)}
    eps, truth = episodes(rng, lengths=(30,), unit="range_m100_100", cal=cal)
    root = write_lerobot_dataset(tmp_path / "ds", eps, fps=30, joints=SO101, robot_type="so101_follower")
    (tmp_path / "calib.json").write_text(json.dumps(cal))
    (root / "actuatorlab.mapping.json").write_text(json.dumps(
        {"format": "actuatorlab-lerobot-mapping", "position_unit": "range_m100_100",
         "joint_position_units": {"gripper": "range_0_100"}, "calibration": "../calib.json"}))
    (tr,) = load_logs(root)
    q, _ = truth[0]
    step = 2 * math.pi / 4095
    for i, j in enumerate(SO101):  # one float32 normalised step is << an encoder count
        np.testing.assert_allclose(tr[f"position/{j}"], q[:, i], atol=0.02 * step)
    with pytest.raises(DataError, match="'gripper'.*needs the LeRobot calibration"):
        load_logs(root, mapping={"position_unit": "deg"})


def test_lerobot_unknown_robot_extra_features_and_cli_import(tmp_path, capsys):
    rng = np.random.default_rng(2)
    eps, _ = episodes(rng, lengths=(20, 20))
    for e in eps:
        e["columns"] = {"observation.current": rng.integers(0, 200, (20, 6)),
                        "observation.temperature": 30 + rng.integers(0, 5, (20, 6))}
    feats = {f"observation.{k}": {"dtype": "float32", "shape": [6], "names": [f"{j}.{s}" for j in SO101]}
             for k, s in (("current", "cur"), ("temperature", "temp"))}
    root = write_lerobot_dataset(tmp_path / "koch", eps, fps=30, joints=SO101, robot_type="koch_follower",
                                 extra_features=feats)
    tr = load_logs(root, mapping=DEG)[0]
    assert "robot" not in tr.setup.extra and tr.setup.extra["robot_type"] == "koch_follower"
    assert tr.channels["temperature/elbow_flex"].unit == "degC"
    assert tr.channels["lerobot_cur/elbow_flex"].unit == "unknown"  # raw register, scale undeclared
    tr = load_logs(root, mapping={**DEG, "channel_units": {"cur": {"unit": "mA", "scale": 6.5}}})[0]
    assert tr.channels["current/elbow_flex"].unit == "A"
    np.testing.assert_allclose(tr["current/elbow_flex"], eps[0]["columns"]["observation.current"][:, 2] * 6.5e-3,
                               rtol=1e-6)
    # the CLI: one native pair per episode, the dataset untouched
    (root / "actuatorlab.mapping.json").write_text(json.dumps(DEG))
    before = sha(root)
    capsys.readouterr()
    assert main(["import", str(root), "--out", str(tmp_path / "out")]) == 0
    assert sorted(p.name for p in (tmp_path / "out").glob("*.parquet")) == \
        ["koch_episode_000000.parquet", "koch_episode_000001.parquet"]
    assert sha(root) == before
    assert load_log(tmp_path / "out" / "koch_episode_000001.parquet").n == 20
    assert main(["import", str(root / "data" / "chunk-000" / "file-000.parquet"), "--out", str(tmp_path / "o2")]) == 2
    assert "part of the LeRobot dataset" in capsys.readouterr().err


def test_folder_with_every_format_and_audit_cli(tmp_path, capsys):
    """A folder mixing a BAM log, a bag and a LeRobot dataset: each read by its own importer."""
    (tmp_path / "bam.json").write_bytes(sorted(EXAMPLE.glob("*.json"))[0].read_bytes())
    two_joint_bag(tmp_path / "arm.mcap")
    rng = np.random.default_rng(3)
    eps, _ = episodes(rng, lengths=(15,))
    root = write_lerobot_dataset(tmp_path / "ds", eps, fps=50, joints=SO101, robot_type="so101_follower")
    (root / "actuatorlab.mapping.json").write_text(json.dumps(DEG))
    names = sorted(t.setup.extra["source_format"] for t in load_logs(tmp_path))
    assert names == ["bam", "lerobot", "mcap_ros2"]
    capsys.readouterr()
    assert main(["audit", str(tmp_path / "arm.mcap"), "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)[0]
    assert rep["receive_delay"]["median_s"] == pytest.approx(0.003, abs=1e-9)


def test_lerobot_written_by_lerobot_itself(tmp_path):
    """Only where the optional ``lerobot`` package is installed (it pulls torch): two episodes of
    different lengths (v3.0 packs them into one file) with a temperature feature, at 30 fps."""
    lds = pytest.importorskip("lerobot.datasets.lerobot_dataset")
    feats = {k: {"dtype": "float32", "shape": (6,), "names": [f"{j}.pos" for j in SO101]}
             for k in ("observation.state", "action")}
    feats["observation.temperature"] = {"dtype": "float32", "shape": (6,), "names": [f"{j}.temperature" for j in SO101]}
    ds = lds.LeRobotDataset.create(repo_id="local/actuatorlab_test", fps=30, features=feats,
                                   robot_type="so101_follower", root=tmp_path / "ds", use_videos=False)
    qs = []
    for e, n in enumerate((25, 33)):
        q = np.linspace(-30, 30, n, dtype=np.float32)[:, None] * np.ones(6, np.float32) * (e + 1)
        for k in range(n):
            ds.add_frame({"observation.state": q[k], "action": q[k] + 1, "task": "test",
                          "observation.temperature": np.full(6, 30 + e, np.float32)})
        ds.save_episode()
        qs.append(q)
    ds.finalize()
    trs = load_logs(tmp_path / "ds", mapping=DEG)
    assert [t.n for t in trs] == [25, 33]
    for tr, q, e in zip(trs, qs, (0, 1)):
        np.testing.assert_allclose(tr["position/wrist_flex"], np.radians(q[:, 3]), atol=1e-6)
        np.testing.assert_allclose(tr["position_target/gripper"], np.radians(q[:, 5] + 1), atol=1e-6)
        np.testing.assert_allclose(tr["temperature/elbow_flex"], 30 + e)
        assert tr.channels["temperature/elbow_flex"].unit == "degC"
        np.testing.assert_allclose(np.diff(tr.time), 1 / 30, atol=1e-6)
        assert tr.setup.extra["robot"] == "so101"
