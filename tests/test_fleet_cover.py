"""bench/fleet_cover.py (tried for issue 44, not adopted): a randomization spec scaled to cover the model's
replay error; the spread-skill condition, the scaled spec and its document, and the scale found on logs whose
truth the centre model cannot represent."""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

import numpy as np
import pytest

from actuatorlab.app.use_jobs import RandomizeJob, run_randomize_job
from actuatorlab.errors import ActuatorlabError
from actuatorlab.logs.io import save_trajectory
from actuatorlab.robots import load_robot
from actuatorlab.sim.randomization import load_spec, parse_spec
from actuatorlab.synth.model_truth import draw_param_sets, model_logs

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

from fleet_cover import NON_NEGATIVE, cover_document, cover_spec, covering_spec, main, scaled_spec, spread_skill  # noqa: E402

ROBOT = "open_manipulator_x"
ARM = ("joint1", "joint2", "joint3", "joint4")


def _spec(friction_std: float, armature_std: float = 0.02) -> dict:
    return {"format": "actuatorlab-randomization", "format_version": "1",
            "entries": [{"name": "armature_unit", "kind": "unit", "parameter": "armature", "distribution": "lognormal",
                         "std": armature_std},
                        {"name": "coulomb_unit", "kind": "unit", "parameter": "friction_base",
                         "distribution": "add_normal", "std": friction_std},
                        {"name": "viscous_unit", "kind": "unit", "parameter": "friction_viscous",
                         "distribution": "add_uniform", "half_width": 0.01, "clip": [0.0, 1.0]},
                        {"name": "fit", "kind": "identified", "parameters": ["kt", "R"],
                         "covariance": [[1e-4, 5e-5], [5e-5, 4e-4]]},
                        {"name": "zero", "kind": "calibration_offset", "parameter": "q_offset",
                         "distribution": "add_normal", "std": 0.001}]}


def _same(a, b) -> bool:
    """Two specs' entries equal but for their notes (the Cholesky factors to rounding)."""
    def plain(e):
        return dataclasses.replace(e, note="", chol=())
    return len(a.entries) == len(b.entries) and all(
        plain(x) == plain(y) and np.allclose(np.array(x.chol or 0.0), np.array(y.chol or 0.0), rtol=1e-12)
        for x, y in zip(a.entries, b.entries))


def test_spread_matches_error_for_an_exchangeable_ensemble():
    """Members and measurement drawn from one distribution: RMSE of the mean = sqrt((N+1)/N) x spread;
    an ensemble half as wide falls short by about 2x."""
    rng = np.random.default_rng(0)
    n, shape = 8, (40, 50, 3)
    truth = rng.normal(size=shape)
    wgt = np.ones(shape)
    skill, spread = spread_skill(rng.normal(size=(n,) + shape) - truth[None], wgt)
    assert spread == pytest.approx(skill, rel=0.03)
    skill, spread = spread_skill(0.5 * rng.normal(size=(n,) + shape) - truth[None], wgt)
    assert 1.8 < skill / spread < 2.3
    with pytest.raises(ActuatorlabError, match="at least 2"):
        spread_skill(np.zeros((1,) + shape), wgt)


def test_scaled_spec_and_its_document_agree():
    doc = _spec(0.01)
    covered = parse_spec(cover_document(doc, {"scale": 3.0}))
    direct = scaled_spec(parse_spec(doc), 3.0)
    assert _same(covered, direct)
    e = {x.name: x for x in direct.entries}
    assert e["armature_unit"].std == pytest.approx(0.06) and e["armature_unit"].clip is None
    # an additive spread on a friction gets the physical clip; a clip given is kept
    assert e["coulomb_unit"].std == pytest.approx(0.03) and e["coulomb_unit"].clip == NON_NEGATIVE["friction_base"]
    assert e["coulomb_unit"].clip[0] == 0.0
    assert e["viscous_unit"].half_width == pytest.approx(0.03) and e["viscous_unit"].clip == (0.0, 1.0)
    assert np.allclose(np.array(e["fit"].chol), 3.0 * np.array(parse_spec(doc).entries[3].chol))
    assert e["zero"].std == 0.001  # not a model parameter's unit spread: left as it is
    assert cover_document(doc, {"scale": 3.0})["entries"][1]["std_measured"] == 0.01


@pytest.fixture(scope="module")
def m3_logs():
    """OM-X logs of an m3 truth (load-dependent friction), the truth, and an m1 centre with the truth's
    values (it cannot represent the load-dependent friction: a structural error)."""
    robot = load_robot(ROBOT)
    truth = draw_param_sets(robot, "m3", seed=1, set_values={"friction_viscous": 0.1, "load_friction": 0.6})
    logs = model_logs(robot, "m3", truth, n_logs=2, duration=2.5, seed=0)
    per_joint = {k: {j: float(truth[k][robot.index(j)]) for j in ARM} for k in ("kt", "friction_base",
                                                                              "friction_viscous", "armature")}
    return logs, truth, {"model": "m1", "params": per_joint}


def test_the_scale_covers_a_structural_error(m3_logs):
    logs, _, centre = m3_logs
    res = cover_spec(ROBOT, centre, _spec(0.002, 0.01), logs, draws=8, max_windows=8, tol=0.03)
    assert res["covered"] and res["scale"] > 2.0, res
    assert res["spread_rms_measured"] < 0.5 * res["skill_rms"]
    assert res["spread_rms"] == pytest.approx(res["skill_rms"], rel=0.03)
    # the centre that is the truth (logs reproduced to the encoder step): the measured spread covers it already
    exact = {"model": "m3", "params": {k: {j: float(m3_logs[1][k][load_robot(ROBOT).index(j)]) for j in ARM}
                                       for k in ("kt", "friction_base", "friction_viscous", "armature",
                                                 "load_friction")}}
    res1 = cover_spec(ROBOT, exact, _spec(0.002, 0.01), logs, draws=8, max_windows=8)
    assert res1["scale"] == 1.0 and res1["skill_rms"] < 0.2 * res["skill_rms"], res1


def test_covering_spec_writes_the_scaled_spec(tmp_path, m3_logs, capsys):
    """``randomize FLEET``, scaled around the centre FIT as :func:`cover_spec` finds on LOGS, each entry
    keeping its measured spread."""
    logs, _, centre = m3_logs
    for i, t in enumerate(logs):
        save_trajectory(t, tmp_path / "train" / f"log{i}.parquet")
    fit = tmp_path / "fit.json"
    fit.write_text(json.dumps({"format": "actuatorlab-model", "format_version": "2", "robot": ROBOT,
                               "kind": "analytic", **centre}))
    fleet = tmp_path / "fleet.json"
    scatter = {"joint1": 0.9, "joint2": 1.1, "joint3": 1.05, "joint4": 0.95}
    fleet.write_text(json.dumps({"format": "actuatorlab-model", "format_version": "2", "robot": ROBOT,
                                 "kind": "analytic", "model": "m1", "per_joint": True,
                                 "params": {k: {j: v * scatter[j] for j, v in centre["params"][k].items()}
                                            for k in ("armature", "friction_base")}}))
    out = tmp_path / "spec.json"
    doc = covering_spec(fleet, [tmp_path / "train"], fit, out)
    cov = doc["source"]["coverage"]
    assert cov["covered"] and cov["scale"] > 1.0 and cov["centre"] == str(fit) and len(cov["logs"]) == 2
    plain = run_randomize_job(RandomizeJob((fleet,), out=tmp_path / "plain.json")).record
    assert _same(load_spec(out), scaled_spec(load_spec(tmp_path / "plain.json"), cov["scale"]))
    assert [e["std_measured"] for e in doc["entries"]] == [e["std"] for e in plain["entries"]]
    # through the script: the same spec, and one line with the scale
    assert main([str(fleet), "--out", str(tmp_path / "cli.json"), "--cover", str(tmp_path / "train"),
                 "--centre", str(fit)])["entries"] == doc["entries"]
    assert f"spread x {cov['scale']:.3g}" in capsys.readouterr().out
    with pytest.raises(ActuatorlabError, match="empty: no such file or folder"):
        covering_spec(fleet, [tmp_path / "empty"], fit, tmp_path / "x.json")
