"""MJCF export: the exported bench reproduces the fitted law and plant in MuJoCo; patching a robot."""

from __future__ import annotations

import copy
import hashlib
import inspect
import json
from pathlib import Path

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest
from scipy.integrate import solve_ivp
from scipy.optimize import brentq

from actuatorlab.errors import ModelError, UnknownNameError
from actuatorlab.export import export_mjcf, has_dcmotor
from actuatorlab.models.control import LawConstants, dynamixel_pwm
from actuatorlab.models.motor import dc_motor_torque

ASSETS = Path(__file__).resolve().parents[1] / "src" / "actuatorlab" / "assets"
BASE_2R = ASSETS / "dynamixel_2r" / "scene.xml"
G = 9.81
ERROR_GAIN = 0.002877

needs_dcmotor = pytest.mark.skipif(not has_dcmotor(), reason="MuJoCo without dcmotor (< 4.0)")


def pwm_model(**params) -> dict:
    """A model.json dict for an XL330-like servo on the pendulum bench (kp = 400, 7.4 V)."""
    values = dict(kt=0.6, R=5.0, armature=0.005, friction_base=0.0, friction_viscous=0.01,
                  friction_stribeck=0.0, stribeck_velocity=0.2, stribeck_alpha=2.0, load_friction=0.0,
                  current_limit=1e3, stiffness=1e9, backlash=0.0, delay=0.0, q_offset=0.0,
                  force_offset=0.0, gain_scale=1.0)
    values.update(params)
    setup = {"actuator": "xl330", "joint_type": "revolute", "controller": "dynamixel_pwm",
             "gains": {"kp": 400}, "supply_voltage": 7.4,
             "bench": {"mass": 0.49, "length": 0.1, "arm_mass": 0.0}}
    return {"format": "actuatorlab-model", "format_version": "1", "model": "m1", "features": [],
            "actuator": "xl330", "joint_type": "revolute", "controller": "dynamixel_pwm", "setup": setup,
            "controller_constants": {"error_gain": ERROR_GAIN, "max_duty": 1.0},
            "parameters": {k: {"value": v, "unit": "?", "free": True, "stderr": None} for k, v in values.items()},
            "metrics": {}, "data": {}, "package_version": "0.1.0", "git_revision": "test"}


def kp_eff_of(model: dict) -> float:
    p = {k: v["value"] for k, v in model["parameters"].items()}
    c = model["controller_constants"]
    return p["kt"] / p["R"] * model["setup"]["supply_voltage"] * p["gain_scale"] * \
        model["setup"]["gains"]["kp"] * c["error_gain"]


def gravity_gain(bench: dict) -> float:
    """(m l + m_arm l / 2) g [N.m]: the pendulum's gravity torque is -this * sin(q + q_offset)."""
    return (bench["mass"] * bench["length"] + 0.5 * bench.get("arm_mass", 0.0) * bench["length"]) * G


def settle(path: Path, target: float, seconds: float, q0: float = 0.0) -> tuple[mujoco.MjModel, mujoco.MjData]:
    m = mujoco.MjModel.from_xml_path(str(path))
    d = mujoco.MjData(m)
    d.qpos[0] = q0
    d.ctrl[0] = target
    for _ in range(int(round(seconds / m.opt.timestep))):
        mujoco.mj_step(m, d)
    return m, d


# ---------------------------------------------------------------------------------------------
# bench export: the physics


@pytest.mark.parametrize("servo", ["dcmotor", "position"])
@pytest.mark.parametrize("q_offset, force_offset, arm_mass", [(0.0, 0.0, 0.0), (0.05, 0.03, 0.04)])
def test_pendulum_steady_state_matches_analytic(tmp_path, servo, q_offset, force_offset, arm_mass):
    if servo == "dcmotor" and not has_dcmotor():
        pytest.skip("MuJoCo without dcmotor")
    model = pwm_model(q_offset=q_offset, force_offset=force_offset)
    model["setup"]["bench"]["arm_mass"] = arm_mass
    res = export_mjcf(model, tmp_path / "bench.xml", servo=servo)
    target = 1.0
    m, d = settle(res.path, target, seconds=6.0)
    kp_eff, gg = kp_eff_of(model), gravity_gain(model["setup"]["bench"])
    # equilibrium of the fitted plant: kp_eff (q_t - q) = (m l + m_arm l/2) g sin(q + q_offset) + force_offset
    q_star = brentq(lambda q: kp_eff * (target - q) - gg * np.sin(q + q_offset) - force_offset, 0.0, target)
    assert kp_eff * (target - q_star) < 0.6 / 5.0 * 7.4  # duty not saturated: the law is linear here
    assert abs(d.qvel[0]) < 1e-7
    assert d.qpos[0] == pytest.approx(q_star, abs=1e-6)
    assert res.written["actuator.kp_eff"] == pytest.approx(kp_eff, rel=1e-12)
    # and the angle is far from the no-gravity answer: gravity and the offsets matter
    assert abs(q_star - target) > 0.2


def test_frictionloss_holds_inside_the_friction_band(tmp_path):
    """Coulomb friction F: released at rest where the net torque is 0.6 F, the pendulum stays put
    (the fitted stick/slip model holds exactly; MuJoCo's soft constraint may creep a little)."""
    model = pwm_model(friction_base=0.05)
    kp_eff, gg = kp_eff_of(model), gravity_gain(model["setup"]["bench"])
    net = lambda q: kp_eff * (1.0 - q) - gg * np.sin(q)  # noqa: E731
    q_free = brentq(net, 0.0, 1.0)  # frictionless equilibrium
    q0 = brentq(lambda q: net(q) - 0.6 * 0.05, 0.0, 1.0)
    res = export_mjcf(model, tmp_path / "bench.xml")
    m, d = settle(res.path, 1.0, seconds=1.0, q0=q0)
    assert m.dof_frictionloss[0] == 0.05
    assert abs(d.qpos[0] - q0) < 0.01 * abs(q_free - q0)  # creeps < 1 % of the way in 1 s
    m, d = settle(export_mjcf(pwm_model(), tmp_path / "free.xml").path, 1.0, seconds=4.0, q0=q0)
    assert d.qpos[0] == pytest.approx(q_free, abs=1e-3 * abs(q_free - q0))  # without friction it moves


def _library_pwm_volts(c, p, q_target, q, dq, v_supply):
    """actuatorlab.models.control.dynamixel_pwm at rest history (all past positions equal to q)."""
    past = {n: q for n in inspect.signature(dynamixel_pwm).parameters if n.startswith("q_prev")}
    return dynamixel_pwm(c, p, q_target=q_target, q=q, dq=dq, v_supply=v_supply, **past)


@needs_dcmotor
def test_dcmotor_force_equals_library_pwm_law_and_motor(tmp_path):
    """Point by point, incl. duty saturation, back-EMF in all four quadrants and the current clip."""
    model = pwm_model(gain_scale=1.3, current_limit=1.2)
    model["controller_constants"]["max_duty"] = 0.9
    res = export_mjcf(model, tmp_path / "bench.xml")
    m = mujoco.MjModel.from_xml_path(str(res.path))
    d = mujoco.MjData(m)
    c = LawConstants(kp=400.0, kd=0.0, error_gain=ERROR_GAIN, max_duty=0.9, u_max=1e9, drive_gain=1.0, dt=0.005)
    rng = np.random.default_rng(0)
    states = rng.uniform([-1.5, -15.0, -1.5], [1.5, 15.0, 1.5], size=(200, 3))
    states = np.concatenate([states, [[0.0, 0.0, 0.01], [0.0, 0.0, -0.01], [0.0, 5.0, 2.0], [0.0, -5.0, -2.0]]])
    saturated = 0
    with jax.enable_x64(True):
        p = {k: jnp.asarray(v["value"], dtype=jnp.float64) for k, v in model["parameters"].items()}
        for q, dq, qt in states:
            d.qpos[0], d.qvel[0], d.ctrl[0] = q, dq, qt
            mujoco.mj_forward(m, d)
            volts = _library_pwm_volts(c, p, qt, q, dq, 7.4)
            ref = float(dc_motor_torque(p, volts, dq, 1.0))
            saturated += abs(float(volts)) >= 0.9 * 7.4 - 1e-12
            assert d.actuator_force[0] == pytest.approx(ref, rel=1e-9, abs=1e-12)
    assert saturated > 50 and np.ptp(states[:, 1]) > 20  # the envelope was really exercised
    assert res.written["actuator.torque_limit"] == pytest.approx(0.6 * 1.2)


def _ode_step_response(model: dict, target: float, t_eval: np.ndarray) -> np.ndarray:
    """The fitted plant without friction integrated by scipy: I q'' = tau_motor - G sin q - b q'."""
    p = {k: v["value"] for k, v in model["parameters"].items()}
    bench = model["setup"]["bench"]
    inertia = bench["mass"] * bench["length"] ** 2 + bench["arm_mass"] * bench["length"] ** 2 / 3 + p["armature"]
    gg = gravity_gain(bench)
    vmax = 7.4 * model["controller_constants"]["max_duty"]

    def f(_, x):
        q, dq = x
        volts = np.clip(7.4 * 400 * ERROR_GAIN * (target - q), -vmax, vmax)
        tau = p["kt"] / p["R"] * (volts - p["kt"] * dq)
        return [dq, (tau - gg * np.sin(q) - p["friction_viscous"] * dq) / inertia]

    sol = solve_ivp(f, (0.0, t_eval[-1]), [0.0, 0.0], t_eval=t_eval, rtol=1e-10, atol=1e-12, max_step=1e-3)
    return sol.y[0]


def _mujoco_step_response(path: Path, target: float, t_eval: np.ndarray) -> np.ndarray:
    m = mujoco.MjModel.from_xml_path(str(path))
    d = mujoco.MjData(m)
    d.ctrl[0] = target
    out, k = [], 0
    for i in range(int(round(t_eval[-1] / m.opt.timestep)) + 1):
        if k < t_eval.size and d.time >= t_eval[k] - 1e-9:
            out.append(d.qpos[0])
            k += 1
        mujoco.mj_step(m, d)
    return np.array(out)


@needs_dcmotor
def test_saturated_step_response_matches_the_fitted_ode(tmp_path):
    """A large step saturates the duty: the dcmotor export follows the torque-speed envelope,
    the first-order position servo does not."""
    model = pwm_model()
    model["setup"]["bench"]["arm_mass"] = 0.05
    t_eval = np.linspace(0.0, 0.6, 61)
    ref = _ode_step_response(model, 2.5, t_eval)
    dc = export_mjcf(model, tmp_path / "dc.xml", timestep=2e-4)
    pos = export_mjcf(model, tmp_path / "pos.xml", timestep=2e-4, servo="position")
    err_dc = np.max(np.abs(_mujoco_step_response(dc.path, 2.5, t_eval) - ref))
    err_pos = np.max(np.abs(_mujoco_step_response(pos.path, 2.5, t_eval) - ref))
    assert ref[-1] > 1.5  # it really moved through the saturated regime
    assert err_dc < 2e-3
    assert err_pos > 10 * err_dc
    assert any("torque-speed envelope" in s for s in pos.not_representable)


def test_delay_is_a_ctrl_history_buffer(tmp_path):
    model = pwm_model(delay=0.0123)
    res = export_mjcf(model, tmp_path / "bench.xml")
    assert res.written["actuator.delay_effective"] == pytest.approx(0.013)
    m = mujoco.MjModel.from_xml_path(str(res.path))
    m.opt.gravity[:] = 0.0
    d = mujoco.MjData(m)
    t_step, first = 0.005, None
    for _ in range(40):
        d.ctrl[0] = 0.5 if d.time >= t_step - 1e-9 else 0.0
        t = d.time
        mujoco.mj_step(m, d)
        if first is None and abs(d.actuator_force[0]) > 1e-9:
            first = t
    assert first == pytest.approx(t_step + 0.013, abs=1e-9)


def test_prismatic_emps_bench(tmp_path):
    """EMPS cascade: f = gtau clip(kp kv (q_t - q) - kv dq, +-10 V); all mass in the armature."""
    gtau, kp, kv = 35.15, 160.18, 243.45
    model = pwm_model(armature=95.1, friction_base=0.0, friction_viscous=203.5, force_offset=-3.2,
                      kt=1.0, R=1.0)
    model.update(controller="emps_cascade", joint_type="prismatic", actuator="emps", controller_constants={})
    model["setup"] = {"actuator": "emps", "joint_type": "prismatic", "controller": "emps_cascade",
                      "gains": {"kp": kp, "kv": kv}, "supply_voltage": None, "bench": {"gtau": gtau}}
    res = export_mjcf(model, tmp_path / "emps.xml")
    m = mujoco.MjModel.from_xml_path(str(res.path))
    d = mujoco.MjData(m)
    assert m.jnt_type[0] == mujoco.mjtJoint.mjJNT_SLIDE
    assert m.dof_armature[0] == 95.1 and m.body_mass[1] < 1e-8
    for q, dq, qt in [(0.0, 0.0, 1e-4), (0.01, 0.05, 0.0), (0.0, 0.0, 0.2), (0.05, -0.3, 0.04)]:
        d.qpos[0], d.qvel[0], d.ctrl[0] = q, dq, qt
        mujoco.mj_forward(m, d)
        f = gtau * np.clip(kp * kv * (qt - q) - kv * dq, -10.0, 10.0)
        assert d.actuator_force[0] == pytest.approx(f, rel=1e-12, abs=1e-12)
        assert d.actuator_force[1] == pytest.approx(3.2)  # -force_offset
    # steady state under the bias: gtau kp kv (q_t - q) = force_offset
    m2, d2 = settle(res.path, 0.1, seconds=2.0)
    assert d2.qpos[0] == pytest.approx(0.1 - (-3.2) / (gtau * kp * kv), abs=1e-9)
    assert any("velocity estimate" in s for s in res.not_representable)


def test_pd_law_maps_to_a_position_actuator(tmp_path):
    model = pwm_model()
    model.update(controller="pd", controller_constants={})
    model["setup"].update(controller="pd", gains={"kp": 20.0, "kd": 0.5, "effort_limit": 3.0})
    res = export_mjcf(model, tmp_path / "pd.xml")
    m = mujoco.MjModel.from_xml_path(str(res.path))
    d = mujoco.MjData(m)
    for q, dq, qt in [(0.0, 0.0, 0.1), (0.3, 2.0, 0.1), (0.0, 0.0, 2.0)]:
        d.qpos[0], d.qvel[0], d.ctrl[0] = q, dq, qt
        mujoco.mj_forward(m, d)
        assert d.actuator_force[0] == pytest.approx(np.clip(20.0 * (qt - q) - 0.5 * dq, -3, 3), abs=1e-12)


def test_model_file_path_is_accepted_and_existing_output_survives_a_failure(tmp_path):
    model_path = tmp_path / "model.json"
    model_path.write_text(json.dumps(pwm_model(armature=0.007)))
    out = tmp_path / "bench.xml"
    res = export_mjcf(model_path, out)
    assert mujoco.MjModel.from_xml_path(str(out)).dof_armature[0] == 0.007
    before = out.read_text()
    broken = pwm_model()
    del broken["setup"]["supply_voltage"]
    model_path.write_text(json.dumps(broken))
    with pytest.raises(ModelError, match="model.json: controller 'dynamixel_pwm' needs setup.supply_voltage"):
        export_mjcf(model_path, out)
    assert out.read_text() == before and res.path == out
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bench.xml", "model.json"]  # no temp files left


def test_output_that_mujoco_rejects_is_never_written(tmp_path, monkeypatch):
    from actuatorlab.export import mjcf_joint as mjcf

    def broken_law(ctx):
        return mjcf._Actuator("position", {"kp": "1", "bogus": "1"}, {})

    monkeypatch.setitem(mjcf._LAWS, "dynamixel_pwm", broken_law)
    with pytest.raises(ModelError, match="does not load in MuJoCo.*bogus"):
        export_mjcf(pwm_model(), tmp_path / "bench.xml")
    assert list(tmp_path.iterdir()) == []


def test_not_representable_lists_active_mechanisms_only(tmp_path):
    on = pwm_model(friction_stribeck=0.02, load_friction=0.1, backlash=0.01, stiffness=50.0,
                   load_friction_motor=0.2, efficiency_fwd=0.8)
    res = export_mjcf(on, tmp_path / "a.xml")
    names = {s.split(" = ")[0] for s in res.not_representable}
    assert names == {"friction_stribeck", "stribeck_velocity", "stribeck_alpha", "load_friction", "backlash",
                     "stiffness", "load_friction_motor", "efficiency_fwd"}
    assert all(": " in s and len(s.splitlines()) == 1 for s in res.not_representable)
    off = export_mjcf(pwm_model(), tmp_path / "b.xml")  # neutral values: stiffness 1e9, current 1e3 A
    assert off.not_representable == []
    text = res.path.read_text()
    assert "load_friction = 0.1" in text  # the reasons travel with the file
    # the winding temperature's parameters are start values, not off switches: lost only with +thermal
    heat = dict(thermal_resistance=5.0, thermal_capacitance=30.0, ambient_temperature=25.0, resistance_tempco=0.00393)
    assert export_mjcf(pwm_model(**heat), tmp_path / "c.xml").not_representable == []
    hot = dict(pwm_model(**heat), model="m1+thermal")
    (line,) = export_mjcf(hot, tmp_path / "d.xml").not_representable
    assert line.startswith("+thermal (thermal_resistance = 5 K/W") and "constant R" in line


# ---------------------------------------------------------------------------------------------
# patching a robot model


def _digest(folder: Path) -> str:
    h = hashlib.sha256()
    for f in sorted(folder.rglob("*")):
        if f.is_file():
            h.update(f.name.encode() + f.read_bytes())
    return h.hexdigest()


@needs_dcmotor
def test_patch_dynamixel_2r_joint_by_name(tmp_path):
    before = _digest(BASE_2R.parent)
    model = pwm_model(friction_base=0.04, armature=0.012, friction_viscous=0.02)
    out = tmp_path / "elsewhere" / "2r_patched.xml"
    res = export_mjcf(model, out, base_xml=BASE_2R, joint="R1")
    assert _digest(BASE_2R.parent) == before  # the base model is untouched
    m = mujoco.MjModel.from_xml_path(str(out))  # loads from another directory (meshes re-pointed)
    m0 = mujoco.MjModel.from_xml_path(str(BASE_2R))
    r1, r2 = m.joint("R1"), m.joint("R2")
    assert (m.dof_armature[r1.dofadr[0]], m.dof_damping[r1.dofadr[0]], m.dof_frictionloss[r1.dofadr[0]]) == \
        (0.012, 0.02, 0.04)
    assert m.dof_armature[r2.dofadr[0]] == 0.005 and m.dof_frictionloss[r2.dofadr[0]] == 0.1
    assert m.nu == 2 and m.nmesh == m0.nmesh
    a1, a2 = m.actuator("R1"), m.actuator("R2")
    assert m.actuator_gaintype[a1.id] == mujoco.mjtGain.mjGAIN_DCMOTOR
    assert m.actuator_gainprm[a2.id][0] == 50.0  # the other joint keeps its actuator
    np.testing.assert_allclose(m.actuator_ctrlrange[a1.id], m.jnt_range[r1.id])
    np.testing.assert_allclose(m.body_mass, m0.body_mass)
    assert "R1 (position)" in res.written["removed_actuators"]
    d = mujoco.MjData(m)
    d.ctrl[a1.id] = 0.5
    for _ in range(500):
        mujoco.mj_step(m, d)
    assert np.all(np.isfinite(d.qpos)) and d.qpos[r1.qposadr[0]] != 0.0


def test_patch_errors(tmp_path):
    model = pwm_model()
    with pytest.raises(UnknownNameError, match="R1, R2"):
        export_mjcf(model, tmp_path / "x.xml", base_xml=BASE_2R, joint="elbow")
    with pytest.raises(ModelError, match="refusing to overwrite"):
        export_mjcf(model, BASE_2R, base_xml=BASE_2R, joint="R1")
    with pytest.raises(ModelError, match="refusing to overwrite"):  # an included file counts too
        export_mjcf(model, BASE_2R.parent / "dynamixel_2r.xml", base_xml=BASE_2R, joint="R1")
    prismatic = copy.deepcopy(model)
    prismatic["joint_type"] = "prismatic"
    with pytest.raises(ModelError, match="HINGE"):
        export_mjcf(prismatic, tmp_path / "x.xml", base_xml=BASE_2R, joint="R1")
    with pytest.raises(ModelError, match="format_version"):
        export_mjcf({**model, "format_version": "7"}, tmp_path / "x.xml")
    with pytest.raises(ModelError, match="needs kt > 0"):
        export_mjcf({**model, "parameters": {"R": {"value": 5.0}}}, tmp_path / "x.xml")
    bad = copy.deepcopy(model)
    bad["controller"] = "magic"
    with pytest.raises(UnknownNameError, match="dynamixel_pwm"):
        export_mjcf(bad, tmp_path / "x.xml")
    assert not (tmp_path / "x.xml").exists()


_OBJ = "v 0 0 0\nv 0.1 0 0\nv 0 0.1 0\nv 0 0 0.1\nf 1 3 2\nf 1 2 4\nf 1 4 3\nf 2 3 4\n"


def test_patch_inlines_includes_keeps_keyframes_and_other_actuators(tmp_path):
    base = tmp_path / "robot"
    (base / "parts").mkdir(parents=True)
    (base / "meshes").mkdir()
    (base / "meshes" / "tet.obj").write_text(_OBJ)
    (base / "parts" / "arm.xml").write_text("""<mujoco>
  <worldbody>
    <body name="link1">
      <joint name="shoulder" type="hinge" axis="0 1 0" range="-2 2"/>
      <geom type="mesh" mesh="tet" mass="0.3"/>
      <body name="link2" pos="0 0 -0.2">
        <joint name="elbow" type="hinge" axis="0 1 0"/>
        <geom type="capsule" fromto="0 0 0 0 0 -0.2" size="0.01" mass="0.2"/>
      </body>
    </body>
  </worldbody>
</mujoco>""")
    main = base / "main.xml"
    main.write_text("""<mujoco model="two_link">
  <compiler angle="radian" meshdir="meshes"/>
  <asset><mesh name="tet" file="tet.obj"/></asset>
  <include file="parts/arm.xml"/>
  <actuator>
    <motor name="elbow_motor" joint="elbow"/>
    <motor name="shoulder_motor" joint="shoulder"/>
    <velocity name="elbow_vel" joint="elbow" kv="1"/>
  </actuator>
  <keyframe><key name="pose" qpos="0.3 -0.4" ctrl="0.1 0.2 0.3"/></keyframe>
</mujoco>""")
    before = main.read_text()
    res = export_mjcf(pwm_model(force_offset=0.01), tmp_path / "out" / "deep" / "patched.xml",
                      base_xml=main, joint="shoulder")
    assert main.read_text() == before
    m = mujoco.MjModel.from_xml_path(str(res.path))
    names = [m.actuator(i).name for i in range(m.nu)]
    assert names == ["elbow_motor", "shoulder_motor", "shoulder_motor_force_offset", "elbow_vel"]
    # surviving actuators keep their keyframe ctrl, the new servo holds the keyframe pose
    np.testing.assert_allclose(m.key_ctrl[0], [0.1, 0.3, 0.0, 0.3])
    np.testing.assert_allclose(m.actuator_ctrlrange[1], [-2.0, 2.0])
    assert m.nmesh == 1 and m.mesh_vertnum[0] == 4
    assert res.written["removed_actuators"] == "shoulder_motor (motor)"


def test_every_parameter_is_exported_or_has_a_stated_reason():
    """A parameter the exporter neither maps nor explains would be reported as 'unknown parameter'
    (the gear-mesh efficiencies of g1/g2 were, until 2026-12-04)."""
    from actuatorlab.export import mjcf_joint as mjcf
    from actuatorlab.models.params import PARAMS

    missing = [n for n in PARAMS if n not in mjcf._REASONS and n not in mjcf._HANDLED and n not in mjcf._THERMAL]
    assert missing == []
    assert "power-flow" in mjcf._REASONS["mesh_friction_back"]
