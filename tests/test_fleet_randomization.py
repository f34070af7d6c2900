"""Randomization from a legged robot's fleet: a fit by joint type runs per joint in the environments
(sim/arm_data._param_sets), a fit per joint becomes a spec whose unit spread is the pooled within-type
spread (sim/randomization_proposal.propose_fleet_spec, ``actuatorlab randomize UNITS/arm_model.json``),
and the spec draws once per joint, not once per type."""

from __future__ import annotations

import json

import jax
import numpy as np
import pytest

from actuatorlab.app.jobs import _init_sets
from actuatorlab.app.use_jobs import RandomizeJob, run_randomize_job
from actuatorlab.envs.actuators import load_actuator
from actuatorlab.errors import ModelError
from actuatorlab.identify.arm_space import robot_for_log
from actuatorlab.logs.format import Channel, Setup, Trajectory
from actuatorlab.sim.randomization import RandomizationError, Randomizer, load_spec

LEGS, TYPES = ("LF", "RF", "LH", "RH"), ("HAA", "HFE", "KFE")
BY_TYPE = {"armature": {"anydrive@HAA": 0.02, "anydrive@HFE": 0.03, "anydrive@KFE": 0.04},
           "friction_base": {"anydrive@HAA": 0.5, "anydrive@HFE": 0.6, "anydrive@KFE": 0.7},
           "friction_viscous": {"anydrive@HAA": 0.1, "anydrive@HFE": 0.2, "anydrive@KFE": 0.3}}


def _per_joint_doc() -> dict:
    """Per-joint values: armature scattered by exp(+-0.1) and exp(+-0.3) in alternate types, friction_base by +-0.05."""
    arm, fb = {}, {}
    for t, base, s in (("HAA", 0.02, 0.1), ("HFE", 0.03, 0.3), ("KFE", 0.04, 0.1)):
        for k, leg in enumerate(LEGS):
            arm[f"{leg}_{t}"] = base * np.exp(s * (1 if k % 2 else -1))
            fb[f"{leg}_{t}"] = 0.5 + 0.05 * (1 if k < 2 else -1)
    return {"format": "actuatorlab-model", "format_version": "2", "robot": "anymal_c", "kind": "analytic",
            "model": "m1", "per_joint": True, "params": {"armature": arm, "friction_base": fb}}


def test_fit_by_joint_type_runs_one_set_per_joint():
    a = load_actuator("anymal_c", {"model": "m1", "params": BY_TYPE})
    assert len(a.robot.groups) == 12 and [g.joints[0] for g in a.robot.groups] == list(a.robot.joint_names)
    for i, j in enumerate(a.robot.joint_names):
        assert a.params["armature"][i] == BY_TYPE["armature"]["anydrive@" + j[-3:]]
        assert a.params["friction_viscous"][i] == BY_TYPE["friction_viscous"]["anydrive@" + j[-3:]]


def test_fleet_spec_pools_the_within_type_spread(tmp_path):
    src = tmp_path / "arm_model.json"
    src.write_text(json.dumps(_per_joint_doc()))
    out = tmp_path / "spec.json"
    doc = run_randomize_job(RandomizeJob((src,), out)).record
    e = {x["parameter"]: x for x in doc["entries"]}
    assert not [x for x in doc["entries"] if x["kind"] == "identified"]
    assert "records no parameter uncertainty" in doc["source"]["uncertainty"][0]["note"]
    assert doc["source"]["models"] == [str(src)] and doc["source"]["types"] == list(TYPES)
    # log space: deviations +-0.1, +-0.3, +-0.1 around each type's mean; pooled over 12 - 3 degrees of freedom
    assert e["armature"]["distribution"] == "lognormal"
    assert e["armature"]["std"] == pytest.approx(np.sqrt(4 * (0.01 + 0.09 + 0.01) / 9))
    assert doc["source"]["units"]["armature"]["type_std"]["HFE"] == pytest.approx(np.sqrt(4 * 0.09 / 3))
    # linear: +-0.05 in every type, clipped to the config's search bounds
    assert e["friction_base"]["distribution"] == "add_normal"
    assert e["friction_base"]["std"] == pytest.approx(np.sqrt(12 * 0.05**2 / 9))
    assert e["friction_base"]["clip"] == [0.0, 4.0]
    assert load_spec(out).of_kind("unit")


def test_fleet_spec_refuses_a_fit_by_type(tmp_path):
    d = _per_joint_doc() | {"per_joint": False, "params": BY_TYPE}
    src = tmp_path / "arm_model.json"
    src.write_text(json.dumps(d))
    with pytest.raises(RandomizationError, match=r"arm_model.json: a whole-robot fit by parameter set.*per_joint"):
        run_randomize_job(RandomizeJob((src,), tmp_path / "spec.json"))


def test_unit_draws_are_per_joint_on_a_fit_by_type(tmp_path):
    """The spec on the environment's parameters of a fit by joint type: twelve independent draws (joints of one
    type get different values), reproducible by key."""
    src = tmp_path / "arm_model.json"
    src.write_text(json.dumps(_per_joint_doc()))
    spec = tmp_path / "spec.json"
    run_randomize_job(RandomizeJob((src,), spec))
    a = load_actuator("anymal_c", {"model": "m1", "params": BY_TYPE})
    rnd = Randomizer(spec)
    p = rnd.sample_episode(jax.random.PRNGKey(0), a.params)
    ratio = np.log(np.asarray(p["armature"]) / a.params["armature"])
    assert ratio.shape == (12,) and len(np.unique(np.round(ratio, 12))) == 12
    for t in TYPES:  # within each type the four joints differ
        idx = [i for i, j in enumerate(a.robot.joint_names) if j.endswith(t)]
        assert np.ptp(ratio[idx]) > 0
    std = load_spec(spec).of_kind("unit")[0].std
    assert np.all(np.abs(ratio) < 6 * std)
    np.testing.assert_array_equal(p["armature"], rnd.sample_episode(jax.random.PRNGKey(0), a.params)["armature"])


def test_a_fit_by_type_starts_a_fit_per_joint(tmp_path):
    """The fit job's ``init``: each joint of the in-air robot starts at its type's fitted values."""
    t = np.arange(3) * 0.02
    log = Trajectory("air", t, {"position/LF_HAA": np.zeros(3)}, {"position/LF_HAA": Channel("rad", "measured")},
                     Setup("anydrive", gains={"kp": 80.0, "kd": 2.0}, extra={"robot": "anymal_c", "base": "fixed"}))
    rb = robot_for_log("anymal_c", log)
    src = tmp_path / "arm_model.json"
    src.write_text(json.dumps({"format": "actuatorlab-model", "format_version": "2", "robot": "anymal_c",
                               "kind": "analytic", "model": "m1", "per_joint": False, "params": BY_TYPE}))
    per_joint = _init_sets(rb, "m1", src, per_joint=True)
    assert len(per_joint["armature"]) == 12
    for i, j in enumerate(rb.joint_names):
        assert per_joint["armature"][i] == BY_TYPE["armature"]["anydrive@" + j[-3:]]
    by_type = _init_sets(rb, "m1", src, per_joint=False)
    assert by_type["friction_base"] == [0.5, 0.6, 0.7]
    other = tmp_path / "other.json"
    other.write_text(src.read_text().replace('"anymal_c"', '"so101"'))
    with pytest.raises(ModelError, match="other.json: init needs an analytic arm_model.json of robot 'anymal_c'"):
        _init_sets(rb, "m1", other, per_joint=True)


def test_fleet_spec_without_uncertainty_is_todays(tmp_path):
    """No ``uncertainty`` in the fit: the raw pooled spread, no correction fields, no dropped list."""
    src = tmp_path / "arm_model.json"
    src.write_text(json.dumps(_per_joint_doc()))
    doc = run_randomize_job(RandomizeJob((src,), tmp_path / "spec.json")).record
    assert {k for e in doc["entries"] for k in e} == {"name", "kind", "parameter", "std", "distribution", "note",
                                                      "clip"}
    assert set(doc["source"]) == {"models", "model", "robot", "types", "centre", "uncertainty", "unit_spread",
                                  "units", "package_version"}
    assert doc["source"]["uncertainty"][0]["source"] == "none"
    assert set(doc["source"]["units"]["armature"]) == {"values", "std", "type_std"}
    assert all("includes each joint's estimation error" in e["note"] for e in doc["entries"])


def test_fleet_spec_removes_the_jackknife_estimation_variance(tmp_path):
    """With the fit's jackknife: s_u^2 = s^2 - mean_j se_j^2 (natural space; four joints per type), and a
    parameter whose spread is below its estimation error is dropped with a note."""
    d = _per_joint_doc()
    se_arm = {"HAA": 0.1, "HFE": 0.2, "KFE": 0.05}  # log space
    d["uncertainty"] = {"method": "delete-one-group (load) jackknife: 2 refits",
                        "stderr_natural": {"armature": {j: se_arm[j[-3:]] for j in d["params"]["armature"]},
                                           "friction_base": {j: 0.08 for j in d["params"]["friction_base"]}}}
    src = tmp_path / "arm_model.json"
    src.write_text(json.dumps(d))
    out = tmp_path / "spec.json"
    doc = run_randomize_job(RandomizeJob((src,), out)).record
    e = {x["parameter"]: x for x in doc["entries"]}
    raw2 = 4 * (0.01 + 0.09 + 0.01) / 9
    v_e = (0.1**2 + 0.2**2 + 0.05**2) / 3
    assert e["armature"]["std_raw"] == pytest.approx(np.sqrt(raw2))
    assert e["armature"]["estimation_std"] == pytest.approx(np.sqrt(v_e))
    assert e["armature"]["std"] == pytest.approx(np.sqrt(raw2 - v_e))
    assert "method of moments" in e["armature"]["note"]
    # friction_base: raw spread 0.0577 < estimation error 0.08 -> no entry, a note instead
    assert "friction_base" not in e
    (drop,) = doc["source"]["dropped"]
    assert drop["parameter"] == "friction_base" and drop["std_corrected"] == 0.0
    assert drop["std_raw"] == pytest.approx(np.sqrt(12 * 0.05**2 / 9)) and drop["estimation_std"] == pytest.approx(0.08)
    assert "not larger than its estimation error" in drop["note"]
    assert doc["source"]["uncertainty"][0]["source"] == "jackknife"
    assert load_spec(out).of_kind("unit")[0].std == pytest.approx(np.sqrt(raw2 - v_e))


def _with_sensitivity(d: dict, undetermined: dict[str, set[str]]) -> dict:
    """``d`` with a sensitivity pass (arm_fit.set_sensitivity's layout, labels = joints): every value moved,
    the joints in ``undetermined[parameter]`` flagged not determined, the others changed by +-5 %."""
    change = {n: {j: ([0.001, 0.001] if j in undetermined.get(n, ()) else [0.05, 0.05]) for j in per}
              for n, per in d["params"].items()}
    nd = [f"{n}@{j}" for n, js in undetermined.items() for j in sorted(js)]
    return d | {"identifiability": {"sensitivity": {"step": 0.1, "min_change": 0.02, "change": change,
                                                    "not_determined": nd, "improvable": [], "rule": "r"}}}


def test_fleet_spec_says_which_spreads_no_joint_determines(tmp_path, capsys):
    """The fit's sensitivity pass: a parameter no joint's logs determine is named (its spread is estimation
    error); one that some joints determine says how many; the entries themselves are unchanged."""
    base = run_randomize_job(RandomizeJob((_write(tmp_path / "a.json", _per_joint_doc()),),
                                          tmp_path / "a_spec.json")).record
    joints = list(_per_joint_doc()["params"]["armature"])
    d = _with_sensitivity(_per_joint_doc(), {"armature": set(joints), "friction_base": set(joints[:3])})
    src = _write(tmp_path / "arm_model.json", d)
    doc = run_randomize_job(RandomizeJob((src,), tmp_path / "spec.json")).record
    assert doc["source"]["undetermined"] == ["armature"]
    units = doc["source"]["units"]
    assert units["armature"]["fits"] == {"determined": 0, "of": 12}
    assert units["friction_base"]["fits"] == {"determined": 9, "of": 12}
    e = {x["parameter"]: x for x in doc["entries"]}
    assert "none of the 12 joints' fits determines armature" in e["armature"]["note"]
    assert "9 of 12 joints' fits determine friction_base" in e["friction_base"]["note"]
    assert [(x["parameter"], x["std"]) for x in doc["entries"]] == [(x["parameter"], x["std"]) for x in base["entries"]]
    # through the command: one warning line names the parameter
    from actuatorlab.app.cli import main
    assert main(["randomize", str(src), "--out", str(tmp_path / "cli_spec.json")]) == 0
    out = capsys.readouterr().out
    assert "warning: no unit's fit determines armature" in out and "friction_base (each" not in out


def test_unit_spec_says_which_spreads_no_unit_determines(tmp_path):
    """Several one-joint model files (units): their ``determined`` flags are counted the same way."""
    def unit(kt: float, det: dict[str, bool | None]) -> dict:
        p = {n: {"value": v, "free": True, "lower": 0.0, "upper": 10.0, "determined": det.get(n)}
             for n, v in (("kt", kt), ("friction_base", 0.1 + kt / 10))}
        return {"format": "actuatorlab-model", "format_version": "2", "kind": "analytic", "model": "m1",
                "actuator": "x", "parameters": p}
    ms = [unit(1.0, {"kt": True, "friction_base": False}), unit(1.1, {"kt": True, "friction_base": False}),
          unit(1.2, {"kt": False})]
    from actuatorlab.sim.randomization_proposal import propose_spec
    doc = propose_spec(ms)
    assert doc["source"]["undetermined"] == ["friction_base"]
    assert doc["source"]["units"]["kt"]["fits"] == {"determined": 2, "of": 3}
    assert doc["source"]["units"]["friction_base"]["fits"] == {"determined": 0, "of": 2}
    assert "undetermined" not in propose_spec([unit(1.0, {}), unit(1.1, {})])["source"]


def _write(path, d: dict):
    path.write_text(json.dumps(d))
    return path
