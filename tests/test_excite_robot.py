"""Whole-robot excitation design: per-joint safety limits hold by construction, a joint's motion
informs its viscous friction (a holder only its gain), the greedy design beats any repeated
candidate, and a designed set identifies a synthetic per-joint truth better than a naive one."""

from __future__ import annotations

import json

import numpy as np
import pytest

from actuatorlab.app.cli import main
from actuatorlab.excite.backends import RobotBackend, design_robot_setup
from actuatorlab.excite.candidates import FAMILIES, RobotLimits, robot_candidates
from actuatorlab.excite.design import compare_to_naive, design
from actuatorlab.robots import load_robot
from actuatorlab.synth.model_truth import draw_param_sets


def job_config(path, fields: dict) -> str:
    """A ``--config`` file holding ``fields`` (a job's options without a flag)."""
    path.write_text(json.dumps(fields))
    return str(path)

JOINTS = ["shoulder_lift", "elbow_flex"]
NAMES = ["kt", "friction_base", "friction_viscous"]
LIM = RobotLimits()
#: held out of every set: a multi-sine, steps of one joint, sweeps of both
HELD = ("multisine_a0.4_s1", "steps_a0.5@elbow_flex", "reversals_v0.3@all")


@pytest.fixture(scope="module")
def setup():
    base = load_robot("so101")
    r, p = design_robot_setup(base, "m1")
    segs = robot_candidates(r, JOINTS, LIM, segment_s=2.0)
    pool = [s for s in segs if s.name not in HELD]
    return base, r, p, segs, pool


@pytest.fixture(scope="module")
def report(setup):
    _, r, p, _, pool = setup
    return design(RobotBackend(r, tuple(NAMES), tuple(JOINTS), LIM), pool, p, 6.0)


def test_candidates_respect_every_joint_limit(setup):
    _, r, _, segs, _ = setup
    assert {s.tags["family"] for s in segs} == set(FAMILIES)
    assert len({s.name for s in segs}) == len(segs)
    home = np.zeros(r.n_joints)  # so101 qpos0, inside every safe range
    for s in segs:
        assert s.q.shape == (100, r.n_joints)
        np.testing.assert_allclose(s.q[0], home, atol=1e-12, err_msg=s.name)  # from rest at home ...
        np.testing.assert_allclose(s.q[-1], home, atol=1e-12, err_msg=s.name)  # ... back to it
        for j in r.joint_names:
            c = s.q[:, r.index(j)]
            if j not in JOINTS:
                assert np.all(c == 0.0), (s.name, j)  # joints not designed hold home
                continue
            lim = LIM.joint_limits(r, j)
            assert c.min() >= lim.lo - 1e-12 and c.max() <= lim.hi + 1e-12, (s.name, j)
            assert np.max(np.abs(np.diff(c))) / s.dt <= lim.v_max * (1 + 1e-9), (s.name, j)
            assert np.mean(np.abs(np.diff(c)) > 1e-12) <= LIM.duty + 0.15, (s.name, j)
    lim = LIM.joint_limits(r, "elbow_flex")
    assert lim.q_min == pytest.approx(-1.69) and lim.lo == pytest.approx(-1.59)  # MJCF range minus the margin
    assert lim.effort_max == pytest.approx(0.8 * 3.82)
    with pytest.raises(Exception, match="joint"):
        robot_candidates(r, ["elbow"], LIM)


def test_viscous_friction_needs_motion_a_holding_servo_still_shows_its_gain(report):
    """A joint that moves pins its viscous friction far better than one holding still; the holder
    is not uninformative: the coupled load it resists reveals its motor gain (kt)."""
    rows = {c["name"]: c["crlb_relative_stderr"] for c in report["candidates"]}
    for mover, holder in (JOINTS, JOINTS[::-1]):
        for kind in ("sine_a0.6_f0.5", "reversals_v1", "chirp_a0.8"):
            b = rows[f"{kind}@{mover}"]
            assert b[f"friction_viscous@{mover}"] * 5 < b[f"friction_viscous@{holder}"], (kind, mover)
            assert b[f"kt@{holder}"] < 0.01, (kind, mover)


def test_greedy_design_beats_any_repeated_candidate(report):
    assert report["parameters"] == [f"{k}@{j}" for k in NAMES for j in JOINTS]
    assert len(report["selected"]) == 3 and report["design"]["duration_s"] == pytest.approx(6.0)
    assert not set(report["selected"]) & set(HELD)
    best = report["candidates"][0]["logdet"]
    P = len(report["parameters"])
    assert report["design"]["logdet"] >= best + P * np.log(3.0) - 1e-6
    # no candidate alone pins every parameter: the design must combine several
    assert len(set(report["selected"])) >= 2
    assert max(report["design"]["crlb_relative_stderr"].values()) < 0.1


def test_effort_limit_drops_candidates(setup):
    _, r, p, segs, _ = setup
    lim = RobotLimits(effort_share=0.6)
    rep = design(RobotBackend(r, ("kt",), tuple(JOINTS), lim), segs[:12], p, 2.0)
    assert rep["rejected"] and all(x["over_effort"] for x in rep["rejected"])
    cap = 0.6 * 3.82
    for c in rep["candidates"]:
        assert max(c["peak_effort"].values()) <= cap
    for x in rep["rejected"]:
        assert max(x["peak_effort"][j] for j in x["over_effort"]) > cap


@pytest.mark.slow  # two per-joint CMA-ES fits, about 20 s on a shared CPU
def test_designed_set_identifies_a_synthetic_truth_better_than_sines(setup, report):
    """The design starts from the config's nominal values; the truth differs per joint (up to x1.5);
    the fitted logs carry 3 mrad of white position noise (so that information, not the fit budget,
    decides); both sets are fitted per joint with the same CMA-ES budget and seed; held-out
    segments are in neither set. (bench/importers.py --only excite-robot: three truths, four sets.)"""
    base, r, p, segs, _ = setup
    by = {s.name: s for s in segs}
    truth = draw_param_sets(base, "m1", seed=0, spread=0.5, names=tuple(NAMES))
    keep = [r.index(j) for j in r.joint_names if j not in JOINTS]
    for k in truth:  # joints not designed keep their nominal values (the fit keeps them there)
        truth[k][keep] = p[k][keep]
    n = len(report["selected"])
    sines = [by[f"sine_a0.6_f0.5@{JOINTS[i % 2]}"] for i in range(n)]
    backend = RobotBackend(r, tuple(NAMES), tuple(JOINTS), LIM, base=base, max_evals=400, horizon=50)
    rows = compare_to_naive(backend, [by[x] for x in report["selected"]], {"sines": sines},
                            [by[h] for h in HELD], truth, noise=0.003)
    d, s = rows["designed"], rows["sines"]
    assert d["duration_s"] == s["duration_s"] == pytest.approx(6.0)
    assert d["mean_param_rel_error"] < 0.6 * s["mean_param_rel_error"], (d, s)
    assert d["mean_param_rel_error"] < 0.03, d
    assert d["heldout_mae"] < s["heldout_mae"], (d, s)


def test_cli_writes_replayable_command_files(tmp_path):
    out = tmp_path / "ex"
    assert main(["excite", "--robot", "so101", "--budget", "2", "--out", str(out), "--config",
                 job_config(tmp_path / "excite.json", {"joints": ["elbow_flex"], "lerobot": True, "segment_s": 1})]) == 0
    d = json.loads((out / "excitation.json").read_text())
    assert d["format"] == "actuatorlab-excitation" and d["robot"] == "so101" and d["joints"] == ["elbow_flex"]
    assert d["design"]["model"] == "m3+delay+gain" and "R@elbow_flex" not in d["design"]["parameters"]
    assert "kt@elbow_flex" in d["design"]["parameters"]
    lim = d["limits"]["per_joint"]["elbow_flex"]
    for f in d["files"]:
        rows = np.loadtxt(out / f["file"], delimiter=",", skiprows=1)
        head = (out / f["file"]).read_text().splitlines()[0].split(",")
        assert head[0] == "time_s" and head[-1] == "torque_enable" and "target_elbow_flex" in head
        q = rows[:, head.index("target_elbow_flex")]
        assert lim["safe_range"][0] - 1e-9 <= q.min() and q.max() <= lim["safe_range"][1] + 1e-9
        np.testing.assert_allclose(np.diff(rows[:, 0]), 0.02, atol=1e-6)
        lr = np.loadtxt(out / f["lerobot"], delimiter=",", skiprows=1)
        np.testing.assert_allclose(np.radians(lr[:, 2 + 2]), q, atol=1e-6)  # elbow_flex.pos in degrees
    assert main(["excite", "--robot", "so101", "--out", str(out), "--config",
                 job_config(tmp_path / "range.json", {"q_range": [-1, 1]})]) != 0


def test_cli_reads_a_whole_robot_fit(tmp_path):
    """--model-file: the model and fitted (shared) values of an arm_model.json; another robot's
    file is a one-line error."""
    fit = {"format": "actuatorlab-arm-model", "format_version": "1", "robot": "so101", "model": "m1",
           "params": {"kt": {"sts3215": 1.1}, "friction_viscous": {"sts3215": 0.04}}}
    (tmp_path / "arm_model.json").write_text(json.dumps(fit))
    out = tmp_path / "ex"
    assert main(["excite", "--robot", "so101", "--model-file", str(tmp_path / "arm_model.json"), "--config",
                 job_config(tmp_path / "joints.json", {"joints": ["wrist_flex"], "segment_s": 1}), "--budget", "1", "--out", str(out)]) == 0
    d = json.loads((out / "excitation.json").read_text())["design"]
    assert d["model"] == "m1" and d["parameters"] == [f"{k}@wrist_flex" for k in ("kt", "armature", "friction_base",
                                                                                 "friction_viscous")]
    r, p = design_robot_setup(load_robot("so101"), "m1", fit["params"])
    assert p["kt"][r.index("wrist_flex")] == pytest.approx(1.1) and r.groups[r.index("wrist_flex")].joints == ("wrist_flex",)
    fit["robot"] = "open_manipulator_x"
    (tmp_path / "arm_model.json").write_text(json.dumps(fit))
    assert main(["excite", "--robot", "so101", "--model-file", str(tmp_path / "arm_model.json"), "--out", str(out)]) == 2
