"""The one model file format (docs/model_file.md): ``load`` reads version 2 and every version-1
file (tests/data/model_files_v1), ``save`` writes version 2, the validation names the file; a
one-joint model from ``actuatorlab fit`` is a model of its bench robot and runs, without --robot,
in the Gymnasium environment, the mjlab / Isaac Lab export, a replay suite and ``randomize``."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from actuatorlab.app.cli import main
from actuatorlab.errors import ModelError
from actuatorlab.models.actuator_model import FORMAT, FORMAT_VERSION, check_robot, from_document, load, save
from actuatorlab.models.modelfile import load_model
from actuatorlab.robots import load_robot

V1 = Path(__file__).resolve().parent / "data" / "model_files_v1"
EXAMPLE = Path(__file__).resolve().parents[1] / "src" / "actuatorlab" / "examples" / "bam_xl330"


def run_cli(capsys, *argv) -> tuple[int, str, str]:
    capsys.readouterr()
    rc = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


def one_line_error(rc: int, err: str, *words: str) -> None:
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert rc == 2 and len(lines) == 1 and lines[0].startswith("error:"), err
    for w in words:
        assert w in lines[0], (w, lines[0])


@pytest.fixture(scope="session")
def fitted(tmp_path_factory):
    """RUN/model.json of ``actuatorlab fit EXAMPLES --model m1 --budget quick`` (bundled XL330 logs)."""
    root = tmp_path_factory.mktemp("fit")
    rc = main(["fit", str(EXAMPLE), "--model", "m1", "--budget", "quick", "--out", str(root / "run"), "--seed", "0"])
    assert rc == 0
    return root / "run" / "model.json"


# ------------------------------------------------------------------------------------------------
# reading and writing


def test_v1_one_joint_file_reads_as_a_bench_model():
    m = load(V1 / "xl330_m1_model.json")
    raw = json.loads((V1 / "xl330_m1_model.json").read_text())
    assert raw["format_version"] == "1" and "robot" not in raw
    assert (m.robot, m.kind, m.model, m.one_joint, m.joint_type) == ("bench:revolute", "analytic", "m1", True,
                                                                      "revolute")
    assert m.parameters == {k: e["value"] for k, e in raw["parameters"].items()}
    assert m.network is None and m.envelope == raw["envelope"] and m.path == str(V1 / "xl330_m1_model.json")
    assert m.provenance["git_revision"] == raw["git_revision"] and m.provenance["fit"] == raw["fit"]
    assert m.setup == raw["setup"]


def test_v1_whole_robot_file_reads():
    m = load(V1 / "anymal_c_sea_arm_model.json")
    assert (m.robot, m.kind, m.model, m.one_joint) == ("anymal_c", "analytic", "m1+compliance", False)
    assert m.parameters["stiffness"] == 200.0 and m.document["format"] == FORMAT


@pytest.mark.parametrize("name", ["xl330_m1_model.json", "anymal_c_sea_arm_model.json"])
def test_save_writes_version_2_and_reads_back_the_same(tmp_path, name):
    m = load(V1 / name)
    p = save(m, tmp_path / "m.json")
    raw = json.loads(p.read_text())
    assert (raw["format"], raw["format_version"], raw["robot"], raw["kind"]) == (FORMAT, FORMAT_VERSION, m.robot,
                                                                                  m.kind)
    back = load(p)
    assert back.parameters == m.parameters and back.document == m.document and back.envelope == m.envelope
    assert not [q.name for q in tmp_path.iterdir() if q.name.startswith(".")]  # atomic: no debris


def test_fit_writes_version_2(fitted):
    raw = json.loads(fitted.read_text())
    assert (raw["format"], raw["format_version"], raw["robot"], raw["kind"]) == (FORMAT, "2", "bench:revolute",
                                                                                  "analytic")
    assert load_model(fitted)["model"] == "m1"


def _broken(tmp_path, edit) -> Path:
    d = json.loads((V1 / "xl330_m1_model.json").read_text())
    edit(d)
    p = tmp_path / "model.json"
    p.write_text(json.dumps(d))
    return p


@pytest.mark.parametrize("edit, words", [
    (lambda d: d.update(model="m9"), ["unknown model", "m9"]),
    (lambda d: d["parameters"]["kt"].update(value=math.inf), ["'kt'", "not a finite number"]),
    (lambda d: d["parameters"].update(bogus={"value": 1.0}), ["unknown parameter 'bogus'"]),
    (lambda d: d["envelope"].update(version="9"), ["envelope version"]),
    (lambda d: d.update(format_version="7"), ["format version '7'"]),
    (lambda d: d.update(kind="learned", arch="mlp", weights="weights.eqx", layout={}, normalizer={},
                        physics_parameters={}, step_config={}), ["weights file 'weights.eqx' not found"]),
])
def test_load_refuses_a_bad_file_naming_it(tmp_path, edit, words):
    p = _broken(tmp_path, edit)
    with pytest.raises(ModelError) as e:
        load(p)
    msg = str(e.value)
    assert msg.startswith(str(p)) and "\n" not in msg
    for w in words:
        assert w in msg, (w, msg)


def test_whole_robot_file_with_a_non_finite_parameter_is_refused(tmp_path):
    d = json.loads((V1 / "anymal_c_sea_arm_model.json").read_text())
    d["params"]["armature"] = {"leg": float("nan")}
    p = tmp_path / "arm_model.json"
    p.write_text(json.dumps(d))
    with pytest.raises(ModelError, match="not a finite number"):
        load(p)


def test_a_model_without_robot_needs_one(tmp_path):
    d = json.loads((V1 / "anymal_c_sea_arm_model.json").read_text())
    del d["robot"]
    m = from_document(d)
    with pytest.raises(ModelError, match="must name its robot"):
        save(m, tmp_path / "x.json")
    with pytest.raises(ModelError, match="names no robot; give --robot"):
        check_robot(m, None)
    assert check_robot(m, "anymal_c") == "anymal_c"


# ------------------------------------------------------------------------------------------------
# a one-joint model is a model of its bench robot


def test_bench_robot_carries_the_fitted_model(fitted):
    m = load(fitted)
    r = load_robot(m)
    assert r.name == "bench:revolute" and r.joint_names == ("joint",) and r.groups[0].model == "m1"
    nominal = {k: float(v[0]) for k, v in r.nominal_params().items()}
    for k, v in m.parameters.items():
        assert nominal[k] == v, k
    assert abs(r.control_dt - m.provenance["fit"]["dt"]) < 1e-12 and r.substeps * r.physics_dt == pytest.approx(
        r.control_dt)


def test_one_joint_model_runs_in_the_gym_env_without_robot(fitted):
    from actuatorlab.envs.gym_env import ActuatorEnv

    env = ActuatorEnv(model=str(fitted), episode_length=10)
    assert env.core.robot.name == "bench:revolute"
    obs, _ = env.reset(seed=0)
    for _ in range(3):
        obs, reward, *_ = env.step(np.zeros(env.action_space.shape))
    assert np.all(np.isfinite(obs)) and np.isfinite(reward)


def test_export_mjlab_isaaclab_without_robot(fitted, tmp_path, capsys):
    rc, _, err = run_cli(capsys, "export", fitted, "--mjlab", tmp_path / "mj.py", "--isaaclab", tmp_path / "isaac.py")
    assert rc == 0, err
    assert (tmp_path / "mj.py").is_file() and (tmp_path / "isaac.py").is_file()
    rc, _, err = run_cli(capsys, "export", fitted, "--mjlab", tmp_path / "mj2.py", "--robot", "bench:revolute")
    assert rc == 0, err
    rc, _, err = run_cli(capsys, "export", fitted, "--mjlab", tmp_path / "mj3.py", "--robot", "open_manipulator_x")
    one_line_error(rc, err, "'bench:revolute'", "'open_manipulator_x'")
    assert not (tmp_path / "mj3.py").exists()


def test_replay_suite_and_randomize_without_robot(fitted, tmp_path, capsys):
    logs = sorted(EXAMPLE.glob("*.json"))[:2]
    rc, _, err = run_cli(capsys, "replay", "--create", tmp_path / "suite", fitted, *logs)
    assert rc == 0, err
    rc, _, err = run_cli(capsys, "replay", tmp_path / "suite")
    assert rc == 0, err
    rc, _, err = run_cli(capsys, "replay", "--create", tmp_path / "s2", fitted, *logs, "--robot", "so101")
    one_line_error(rc, err, "'bench:revolute'", "'so101'")
    rc, _, err = run_cli(capsys, "randomize", fitted, "--out", tmp_path / "spec.json")
    assert rc == 0, err
    assert json.loads((tmp_path / "spec.json").read_text())["entries"]


def test_evaluate_with_a_disagreeing_robot_is_one_line(fitted, capsys):
    rc, _, err = run_cli(capsys, "evaluate", fitted, sorted(EXAMPLE.glob("*.json"))[0], "--robot", "so101")
    one_line_error(rc, err, "'bench:revolute'", "'so101'")
