"""Calibration replay suite: an unchanged setup passes, a changed timestep or gain fails (CLI exit
code 1 and the pytest plugin), environment differences warn, a broken suite is one clear line."""

from __future__ import annotations

import json

import pytest

from actuatorlab.app.cli import main
from actuatorlab.evaluate.suite import SuiteError, create_suite, load_suite, run_suite
from actuatorlab.logs import save_trajectory
from synthetic import TRUTH_M1, synthetic_set


def job_config(path, fields: dict) -> str:
    """A ``--config`` file holding ``fields`` (a job's options without a flag)."""
    path.write_text(json.dumps(fields))
    return str(path)

pytest_plugins = ["pytester"]

SPECS = [("chirp400", "chirp", 400.0), ("steps800", "steps", 800.0)]


def model_json(path, params: dict, dt: float = 0.005):
    """A model.json with the ground-truth m1 parameters (what a perfect fit would write)."""
    d = {"format": "actuatorlab-model", "format_version": "1", "model": "m1", "actuator": "xl330",
         "joint_type": "revolute", "controller": "dynamixel_pwm", "setup": {}, "fit": {"dt": dt},
         "parameters": {n: {"value": v, "free": True} for n, v in params.items()}}
    path.write_text(json.dumps(d))
    return path


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    root = tmp_path_factory.mktemp("suite")
    logs = root / "logs"
    logs.mkdir()
    for tr in synthetic_set(SPECS, TRUTH_M1, duration=1.0):
        save_trajectory(tr.replace(source_file=""), logs)
    model = model_json(root / "model.json", TRUTH_M1)
    suite = root / "suite"
    rc = main(["replay", "--create", str(suite), str(model), str(logs), "--config",
               job_config(root / "create.json", {"margin": 1.2})])
    return dict(root=root, logs=logs, model=model, suite=suite, rc=rc)


def test_create_stores_logs_tolerances_and_environment(work):
    assert work["rc"] == 0
    m, root = load_suite(work["suite"])
    assert [e["name"] for e in m["logs"]] == ["chirp400", "steps800"]
    assert m["replay"]["dt"] == 0.005 and m["kind"] == "joint"
    assert set(m["environment"]) >= {"actuatorlab", "mujoco", "jax"}
    for e in m["logs"]:
        assert (root / e["file"]).is_file() and e["gains"]["kp"] in (400.0, 800.0)
        mae = e["measured"]["position_mae"]
        assert 0 < mae < 1e-3  # the truth replays its own logs to within the encoder quantisation
        assert e["tolerance"]["position_mae"] == pytest.approx(1.2 * mae)
        assert "position_max_abs_error" in e["tolerance"]
        assert any(k.startswith("regime:") for k in e["tolerance"])


def test_unchanged_setup_passes_without_warnings(work, capsys):
    r = run_suite(work["suite"], work["model"])
    assert r["passed"] and r["n_failed"] == 0 and r["warnings"] == []
    for row in r["logs"]:
        for c in row["checks"]:
            assert c["value"] == pytest.approx(c["measured_at_creation"], rel=1e-9)
    capsys.readouterr()
    assert main(["replay", str(work["suite"]), str(work["model"])]) == 0
    assert "2/2 logs pass" in capsys.readouterr().out


def test_a_changed_timestep_fails_and_warns(work, capsys):
    r = run_suite(work["suite"], work["model"], dt=0.02)
    assert not r["passed"]
    assert any("dt 0.02" in w for w in r["warnings"])
    capsys.readouterr()
    assert main(["replay", str(work["suite"]), str(work["model"]), "--config",
                 job_config(work["root"] / "dt.json", {"dt": 0.02})]) == 1
    out = capsys.readouterr().out
    assert "FAIL" in out and "position_mae" in out


def test_a_changed_gain_fails(work, capsys):
    r = run_suite(work["suite"], work["model"], gains={"kp": 600.0})
    assert r["n_failed"] == 2  # both logs (kp 400 and 800) move away from their calibration
    assert any("gains" in w for w in r["warnings"])
    capsys.readouterr()
    assert main(["replay", str(work["suite"]), "--json", "--config",
                 job_config(work["root"] / "gain.json", {"gains": {"kp": 600}})]) == 1
    assert json.loads(capsys.readouterr().out)["n_failed"] == 2


def test_a_changed_model_parameter_fails(work):
    worse = model_json(work["root"] / "worse.json", {**TRUTH_M1, "friction_base": 0.06})
    r = run_suite(work["suite"], worse)
    assert not r["passed"] and any("differs from the one the suite was created with" in w for w in r["warnings"])


def _plugin_args() -> list[str]:
    """``-p actuatorlab.pytest_plugin`` only when the installed package does not register it as a
    pytest11 entry point already (loading it twice makes pytest warn about assertion rewriting)."""
    from importlib.metadata import entry_points

    registered = any(ep.value.startswith("actuatorlab.pytest_plugin") for ep in entry_points(group="pytest11"))
    return [] if registered else ["-p", "actuatorlab.pytest_plugin"]


def test_pytest_plugin_turns_each_log_into_a_test(work, pytester):
    res = pytester.runpytest(*_plugin_args(), "--actuatorlab-replay", str(work["suite"]),
                             "--actuatorlab-model", str(work["model"]))
    res.assert_outcomes(passed=2)
    res = pytester.runpytest(*_plugin_args(), "--actuatorlab-replay", str(work["suite"]),
                             "--actuatorlab-model", str(work["model"]), "--actuatorlab-dt", "0.02")
    res.assert_outcomes(failed=2, warnings=1)
    res.stdout.fnmatch_lines(["*replay of chirp400 exceeds its tolerances*", "*position_mae*"])


def test_broken_suites_are_one_line_errors(work, tmp_path, capsys):
    with pytest.raises(SuiteError, match="no replay suite here"):
        load_suite(tmp_path)
    bad = tmp_path / "s"
    bad.mkdir()
    m = json.loads((work["suite"] / "suite.json").read_text())
    m["logs"][0]["tolerance"]["position_mae"] = "small"
    (bad / "suite.json").write_text(json.dumps(m))
    with pytest.raises(SuiteError, match="tolerance 'position_mae' must be a finite number"):
        load_suite(bad)
    capsys.readouterr()
    assert main(["replay", "--create", str(work["suite"]), str(work["model"]), str(work["logs"])]) == 2
    assert "a suite exists already" in capsys.readouterr().err
    assert main(["replay", str(work["suite"]), "--config", job_config(work["root"] / "gain_bad.json",
                                                                      {"gains": {"kp": "high"}})]) == 2
    assert "'kp' must be a number" in capsys.readouterr().err


def test_whole_robot_suite_fails_on_a_changed_gain(tmp_path):
    """An arm_model.json (nominal parameters of the OpenManipulator-X) replays its own synthetic
    logs within tolerance; the same robot simulated with half the firmware gain does not."""
    from actuatorlab.synth import run_synth

    run_synth("open_manipulator_x", "smoke", tmp_path / "data", 0, 0.5)
    model = tmp_path / "arm_model.json"
    model.write_text(json.dumps({"format": "actuatorlab-arm-model", "format_version": "1",
                                 "robot": "open_manipulator_x", "model": None, "params": {}}))
    m = create_suite(tmp_path / "suite", model, [tmp_path / "data" / "train"], robot="open_manipulator_x")
    assert m["kind"] == "arm" and m["replay"]["horizon"] == 300 and m["replay"]["physics_dt"] == 0.002
    assert any(k.startswith("joint:") for k in m["logs"][0]["tolerance"])
    assert run_suite(tmp_path / "suite")["passed"]
    r = run_suite(tmp_path / "suite", gains={"kp": 400.0})
    assert not r["passed"] and any("gains" in w for w in r["warnings"])
