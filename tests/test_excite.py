"""Excitation design: safety limits hold by construction, information ranks the candidates, and a
designed set identifies a synthetic truth better than a naive set of the same length."""

from __future__ import annotations

import json

import numpy as np
import pytest

from actuatorlab.app.cli import main
from actuatorlab.excite.backends import JointBackend
from actuatorlab.excite.candidates import Limits, candidates
from actuatorlab.excite.design import compare_to_naive, design
from actuatorlab.logs.format import Setup


def job_config(path, fields: dict) -> str:
    """A ``--config`` file holding ``fields`` (a job's options without a flag)."""
    path.write_text(json.dumps(fields))
    return str(path)

TRUTH = dict(kt=0.4, R=3.5, armature=0.002, friction_base=0.03, friction_viscous=0.01)
#: what the design starts from: a rough guess, not the truth
NOMINAL = {k: v * f for (k, v), f in zip(TRUTH.items(), (1.3, 0.8, 1.5, 0.7, 2.0))}
LIM = Limits(q_min=-1.5, q_max=1.5, margin=0.1, v_max=3.0, duty=0.8)


def xl330(kp: float) -> Setup:
    return Setup("xl330", "revolute", "dynamixel_pwm", {"kp": kp}, 7.4, {"mass": 0.49, "length": 0.1, "arm_mass": 0.0})


@pytest.fixture(scope="module")
def segs():
    return candidates([xl330(400.0), xl330(800.0)], LIM, dt=0.01, segment_s=2.0)


@pytest.fixture(scope="module")
def report(segs):
    return design(JointBackend("m1", LIM), segs, NOMINAL, 6.0)


def test_every_candidate_respects_the_limits(segs):
    assert len(segs) >= 20 and len({s.name for s in segs}) == len(segs)
    for s in segs:
        assert s.q.min() >= LIM.lo - 1e-12 and s.q.max() <= LIM.hi + 1e-12, s.name
        assert np.max(np.abs(np.diff(s.q))) / s.dt <= LIM.v_max * (1 + 1e-9), s.name
        assert s.q[0] == pytest.approx(LIM.centre)  # starts at rest in the middle of the range
        moving = np.mean(np.abs(np.diff(s.q)) > 1e-12)
        assert moving <= LIM.duty + 0.15, (s.name, moving)  # rests (plus the return) fill the rest
    kinds = {s.tags["kind"] for s in segs}
    assert kinds == {"sine", "chirp", "steps", "reversals", "creep"}
    assert {s.tags["kp"] for s in segs} == {400.0, 800.0}  # gain is a design dimension


def test_limits_that_leave_no_room_are_refused():
    with pytest.raises(Exception, match="leaves no room"):
        Limits(q_min=-0.1, q_max=0.1, margin=0.1)


def test_information_ranks_and_the_design_beats_a_repeated_sine(report):
    names = report["parameters"]
    assert set(names) == set(TRUTH)
    ranked = report["candidates"]
    assert [c["rank"] for c in ranked] == list(range(1, len(ranked) + 1))
    assert ranked[0]["logdet"] > ranked[-1]["logdet"] + 5  # candidates differ by orders of magnitude
    assert ranked[-1]["tags"]["kind"] in ("creep", "sine")  # slow or small motion carries least
    assert len(report["selected"]) == 3 and report["design"]["duration_s"] == pytest.approx(6.0)
    sine = next(c for c in ranked if c["name"] == "sine_a0.6_f0.5_kp400_m0.49")
    # three times the same sine: information x3, so log det + p log 3; the design must beat it
    assert report["design"]["logdet"] > sine["logdet"] + len(names) * np.log(3.0)


#: naive sets of the same length: one sine or chirp repeated (what a first identification runs)
NAIVE = ("sine_a0.6_f0.5_kp400_m0.49", "sine_a0.25_f1.5_kp400_m0.49", "chirp_a0.8_kp400_m0.49")


@pytest.mark.slow  # four quick fits, about 20 s on a shared CPU
def test_designed_set_predicts_held_out_motion_better_than_naive_sets(segs, report):
    """The design is made from a rough guess (NOMINAL), the logs from the truth; each set is
    fitted with the same quick budget. Held-out: segments none of the sets contains."""
    by = {s.name: s for s in segs}
    designed = [by[n] for n in report["selected"]]
    held = [by[n] for n in ("steps_a0.5_kp800_m0.49", "reversals_v0.5_kp400_m0.49", "chirp_a0.3_kp400_m0.49")]
    assert not (set(report["selected"]) | set(NAIVE)) & {h.name for h in held}
    r = compare_to_naive(JointBackend("m1", LIM), designed, {n: [by[n]] * 3 for n in NAIVE}, held, TRUTH)
    d = r["designed"]
    # Without current telemetry the PWM law only sees kt/R (torque per duty) and kt^2/R + viscous
    # (back-EMF plus viscous damping): kt, R and friction_viscous alone slide along that valley, and
    # where the optimizer stops in it depends on the host's floating-point path (measured 10-70 %
    # apart on two CPUs with the same seed). The identifiable combinations must be recovered.
    p = d["params"]
    combos = {"kt/R": (p["kt"] / p["R"], TRUTH["kt"] / TRUTH["R"]),
              "damping": (p["kt"] ** 2 / p["R"] + p["friction_viscous"],
                          TRUTH["kt"] ** 2 / TRUTH["R"] + TRUTH["friction_viscous"]),
              "armature": (p["armature"], TRUTH["armature"]),
              "friction_base": (p["friction_base"], TRUTH["friction_base"])}
    for k, (fit, true) in combos.items():
        assert abs(fit / true - 1.0) < 0.05, (k, fit, true, d)
    for n in NAIVE:
        assert r[n]["duration_s"] == d["duration_s"]
    # Since the fit minimises the error outside each reading's quantisation cell (identify/censor.py) the
    # long chirp's fit reaches the held-out floor too (0.3459 against the designed set's 0.3461 mrad;
    # with the plain MAE 0.3499 against 0.3433): the design is never worse than a naive set by more than
    # 1 %, and better than the worst one (a slow sine: 0.3567) by more than 2 %.
    naive = [r[n]["heldout_mae"] for n in NAIVE]
    assert d["heldout_mae"] < 1.01 * min(naive) and d["heldout_mae"] < 0.98 * max(naive), (d["heldout_mae"], naive)


def test_cli_writes_replayable_command_files(tmp_path, capsys):
    out = tmp_path / "exc"
    args = ["excite", "--out", str(out), "--budget", "4", "--config",
            job_config(tmp_path / "excite.json", {"kp": [400], "params": NOMINAL})]
    assert main(args) == 0
    man = json.loads((out / "excitation.json").read_text())
    assert man["format"] == "actuatorlab-excitation" and man["limits"]["v_max"] == 3.0
    for f in man["files"]:
        rows = np.loadtxt(out / f["file"], delimiter=",", skiprows=1)
        assert rows.shape[1] == 4 and np.allclose(np.degrees(rows[:, 1]), rows[:, 2], atol=1e-5)
        assert f["setup"]["gains"]["kp"] == 400.0
    capsys.readouterr()
    assert main(["excite", "--out", str(tmp_path / "x"), "--config", job_config(tmp_path / "r.json", {"q_range": [0.1, 0.1]})]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "error:" in err
