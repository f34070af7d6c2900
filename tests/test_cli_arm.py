"""CLI end to end on multi-joint logs: synth -> fit --robot -> evaluate --robot --json."""

from __future__ import annotations

import json

from actuatorlab.app.cli import main


def job_config(path, fields: dict) -> str:
    """A ``--config`` file holding ``fields`` (a job's options without a flag)."""
    path.write_text(json.dumps(fields))
    return str(path)


def test_synth_fit_evaluate_robot(tmp_path, capsys):
    data = tmp_path / "syn"
    assert main(["synth", "--suite", "smoke", "--out", str(data), "--seed", "1"]) == 0
    run = tmp_path / "run"
    (tmp_path / "fit.json").write_text(json.dumps({"max_evals": 16}))
    assert main(["fit", str(data / "train"), "--robot", "open_manipulator_x", "--config", str(tmp_path / "fit.json"),
                 "--out", str(run)]) == 0
    d = json.loads((run / "arm_model.json").read_text())
    assert d["format"] == "actuatorlab-model" and d["kind"] == "analytic" and d["robot"] == "open_manipulator_x"
    # the fit never ends worse than the nominal parameters it starts from
    assert d["fit"]["train_mae"] <= d["fit"]["train_mae_nominal"] + 1e-12
    # no --model: the nested ladder was fitted and judged on held-back data; the selected model
    # is the eligible one with the lowest validation error
    from actuatorlab.identify.arm_fit import ARM_LADDER

    table = d["selection"]["table"]
    assert [r["model"] for r in table] == list(ARM_LADDER)
    assert d["selection"]["validation"] and set(d["selection"]["validation"]).isdisjoint(d["selection"]["fit"])
    ok = [r for r in table if r["earns_place"]]
    assert d["model"] == min(ok, key=lambda r: r["validation_mae"])["model"]
    capsys.readouterr()
    assert main(["evaluate", str(run / "arm_model.json"), str(data), "--robot", "open_manipulator_x", "--json"]) == 0
    s = json.loads(capsys.readouterr().out)
    assert set(s["per_joint"]) == {"joint1", "joint2", "joint3", "joint4"}
    assert all("100" in v and v["100"] >= 0 for v in s["per_joint"].values())


def test_evaluate_robot_rejects_a_model_of_another_robot(tmp_path, capsys):
    f = tmp_path / "arm_model.json"
    f.write_text(json.dumps({"format": "actuatorlab-arm-model", "robot": "so101", "params": {}}))
    rc = main(["evaluate", str(f), str(tmp_path), "--robot", "open_manipulator_x"])
    err = capsys.readouterr().err
    assert rc == 2 and "so101" in err and "Traceback" not in err


def test_fit_robot_rejects_an_unknown_method(tmp_path, capsys):
    data = tmp_path / "syn"
    assert main(["synth", "--suite", "smoke", "--out", str(data), "--seed", "1"]) == 0
    capsys.readouterr()
    rc = main(["fit", str(data / "train"), "--robot", "open_manipulator_x", "--config",
               job_config(tmp_path / "fit.json", {"method": "newton"}), "--out", str(tmp_path / "run")])
    err = capsys.readouterr().err
    assert rc == 2 and "newton" in err and "cma" in err and "grad" in err and "Traceback" not in err
