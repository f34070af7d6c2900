"""Whole-robot exports (`actuatorlab export RUN/arm_model.json`, actuatorlab.export.robot): the
exported robot MJCF run in native MuJoCo reproduces actuatorlab's own whole-robot native rollout
(sim/arm_native.py) for a fully representable model, and lists what is lost when it is not; the
mjlab / Isaac Lab fields of every joint equal the one-joint export's."""

from __future__ import annotations

import json

import mujoco
import numpy as np
import pytest

from actuatorlab.app.cli import main
from actuatorlab.errors import ModelError
from actuatorlab.export.robot import export_robot_mjcf, joint_model_dicts, load_arm_actuator
from actuatorlab.export.sim_cfg import export_analytic_cfg
from actuatorlab.export.targets import export_targets
from actuatorlab.sim.arm import initial_state, make_inputs
from actuatorlab.sim.arm_native import rollout_native

ROBOT = "open_manipulator_x"
#: round trip of a fully representable model: exported MJCF vs the native rollout [rad | m]
TOL_EXACT = 1e-9


def arm_model(model: str, **params) -> dict:
    p = {"kt": 2.478, "R": 5.217, "armature": 0.045, "friction_base": 0.0, **params}
    return {"format": "actuatorlab-arm-model", "format_version": "1", "robot": ROBOT, "model": model, "params": p}


def replay(d: dict, path, T: int = 120):
    """(exported MJCF's q, rollout's q) (T, n) for one open-loop command sequence: sines on every
    joint and a 1 rad step of joint1 half-way (duty saturation, braking, effort bound)."""
    act, _, _ = load_arm_actuator(d)
    r = act.robot
    t = np.arange(T) * r.control_dt
    q0 = np.array([0.0, -0.3, 0.4, 0.2, 0.005])
    amp, f = np.array([1.0, 0.6, 0.6, 0.8, 0.008]), np.array([0.7, 1.1, 0.9, 1.3, 1.7])
    qt = q0 + amp * np.sin(2 * np.pi * f * t[:, None])
    qt[T // 2:, 0] += 1.0
    s0 = initial_state(r, q=q0, params=act.params)
    _, out = rollout_native(r, act.params, make_inputs(r, qt), s0)
    m = mujoco.MjModel.from_xml_path(str(path))
    m.opt.disableflags |= mujoco.mjtDisableBit.mjDSBL_CONTACT  # the config's rollouts run without contacts
    data = mujoco.MjData(m)
    data.qpos[:], data.qvel[:] = s0.qpos, s0.qvel
    aid = [m.actuator(j).id for j in r.joint_names]
    q = np.empty((T, r.n_joints))
    for k in range(T):
        q[k] = data.qpos[r.qpos_adr]
        data.ctrl[aid] = qt[k]
        for _ in range(r.substeps):
            mujoco.mj_step(m, data)
    return q, out


@pytest.fixture(scope="module")
def m1_export(tmp_path_factory):
    return export_robot_mjcf(arm_model("m1"), tmp_path_factory.mktemp("m1") / "omx.xml")


def test_representable_robot_mjcf_reproduces_the_native_rollout(m1_export):
    d, res = arm_model("m1"), m1_export
    assert res.not_representable == []
    m = mujoco.MjModel.from_xml_path(str(res.path))
    assert m.opt.timestep == 0.002 and m.nu == 5  # the config's rate; one servo per joint, names kept
    for j in ("joint1", "gripper_left_joint"):
        a = m.actuator(j)
        assert m.actuator_trnid[a.id, 0] == m.joint(j).id
    q, out = replay(d, res.path)
    assert np.abs(out.tau_motor[:, 0]).max() == pytest.approx(5.70)  # the step reaches the effort bound
    err = np.abs(q - out.q).max()
    assert err < TOL_EXACT, err  # measured 2.9e-16 rad
    assert np.ptp(out.q[:, :4], axis=0).min() > 1.0  # the arm moved


def test_robot_mjcf_without_the_effort_bound_misses(m1_export, tmp_path):
    """The joint's actuatorfrcrange (the rollout's |tau_m| <= effort_limit) matters: removed, the
    braking step exceeds the bound and the replay leaves the tolerance."""
    d, res = arm_model("m1"), m1_export
    text = res.path.read_text().replace('actuatorfrclimited="true"', 'actuatorfrclimited="false"')
    (tmp_path / "loose.xml").write_text(text)
    q, out = replay(d, tmp_path / "loose.xml")
    assert np.abs(q - out.q).max() > 1e-4


def test_load_friction_is_listed_per_joint_and_costs_accuracy(tmp_path):
    d = arm_model("m3", friction_base=0.03, load_friction=0.16)
    res = export_robot_mjcf(d, tmp_path / "omx.xml")
    for j, (w, lost) in res.per_joint.items():
        assert any(x.startswith("load_friction = 0.16") for x in lost), (j, lost)
        assert any(x.startswith("friction_base") and "soft constraint" in x for x in lost)
        assert w["joint.frictionloss"] > 0
    assert "Not representable:" in res.path.read_text()
    q, out = replay(d, res.path)
    assert np.abs(q - out.q).max() > 1e-3  # measured 0.029 rad (load friction missing)


def test_mjlab_and_isaaclab_fields_per_joint_equal_the_one_joint_export(tmp_path):
    d = arm_model("m1+delay", delay=0.004, current_limit=1.5)
    path = tmp_path / "arm_model.json"
    path.write_text(json.dumps(d))
    res = export_targets(path, {"mjlab": tmp_path / "out" / "mj.py", "isaaclab": tmp_path / "out" / "isaac.json",
                                "mjcf": tmp_path / "out" / "omx.xml"})
    assert [r.target for r in res] == ["mjcf", "mjlab", "isaaclab"]
    _, models, _ = joint_model_dicts(d)
    for target, key, f in (("mjlab", "target_names_expr", "mj.json"), ("isaaclab", "joint_names_expr", "isaac.json")):
        js = json.loads((tmp_path / "out" / f).read_text())
        meta = js["metadata"]
        assert meta["physics_dt_s"] == 0.002 and meta["control_dt_s"] == 0.01
        assert meta["position_error"].startswith("e = q_target - q")
        # joints 1-4 share one configuration, the gripper (linkage ratio) gets its own
        assert meta["groups"] == {"xm430_w350": ["joint1", "joint2", "joint3", "joint4"],
                                  "xm430_w350@gripper_left_joint": ["gripper_left_joint"]}
        for j, md in models.items():
            one = export_analytic_cfg(md, tmp_path / "one" / f"{target}_{j}.json", target, joint=j).configs
            group = meta["per_joint"][j]["group"]
            for cls, fields in one.items():
                mine = js["configs"][f"{group}/{cls}"]
                assert j in mine[key] and fields[key] == [j]
                for k, v in fields.items():
                    if k != key:
                        assert mine[k] == pytest.approx(v, rel=1e-12) if isinstance(v, float) else mine[k] == v, (j, k)
        assert meta["delay"]["joint1"]["lag_steps"] == 2  # 4 ms at the 2 ms physics step
        assert any(x.startswith("joint1: delay") for x in meta["not_representable"])
    readme = (tmp_path / "out" / "README.md").read_text()
    assert "mjlab" in readme and "isaaclab" in readme and "0.002" in readme
    py = (tmp_path / "out" / "mj.py").read_text()
    assert "'xm430_w350/DcMotorActuatorCfg': DcMotorActuatorCfg(" in py
    compile(py, "mj.py", "exec")


def test_cli_exports_a_robot_and_refuses_what_it_cannot(tmp_path, capsys):
    d = arm_model("m1")
    path = tmp_path / "arm_model.json"
    path.write_text(json.dumps(d))
    assert main(["export", str(path), "--mjcf", str(tmp_path / "o" / "omx.xml")]) == 0
    assert (tmp_path / "o" / "omx.xml").is_file() and (tmp_path / "o" / "README.md").is_file()
    assert main(["export", str(path), "--onnx", str(tmp_path / "o" / "x.onnx")]) == 2
    assert "no network to export" in capsys.readouterr().err
    assert main(["export", str(path), "--mjcf", str(tmp_path / "o" / "b.xml"), "--robot", "so101"]) == 2
    assert "fitted for robot 'open_manipulator_x', not 'so101'" in capsys.readouterr().err
    learned = {**d, "kind": "learned", "arch": "mlp", "layout": {"channels": ["joint1", "joint2"]}}
    path.write_text(json.dumps(learned))
    with pytest.raises(ModelError, match="joint 'joint1' has no network of its own"):
        export_targets(path, {"torchscript": tmp_path / "o" / "n.pt"})
