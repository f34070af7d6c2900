"""Winding temperature (``+thermal``) on the whole-robot path: MJX and native agree, a stalled
joint heats along the first-order solution T_amb + P R_th (1 - exp(-t / (R_th C_th))), its stall
torque falls as kt V / R(T), a huge heat capacity reproduces the non-thermal model with R at the
start temperature, models without ``+thermal`` are bit-identical to the mask-off equations, and
fit windows restart from the logged temperature. One MJX function is compiled (a 20-step
rollout); the rest runs natively.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from actuatorlab.errors import ModelError
from actuatorlab.sim.arm_data import LogArrays, fit_windows, log_arrays
from actuatorlab.logs.format import Channel, Setup, Trajectory
from actuatorlab.models.actuator import StepConfig, make_step
from actuatorlab.models.motor import R_REFERENCE_TEMPERATURE
from actuatorlab.models.registry import contains, get_model
from actuatorlab.robots import load_robot
from actuatorlab.sim import arm_step
from actuatorlab.sim.arm import ArmConfig, initial_state, make_inputs, make_mjx_rollout
from actuatorlab.sim.arm_native import rollout_native
from actuatorlab.sim.arm_windows import make_windows

ROBOT = "open_manipulator_x"
ARM = slice(0, 4)
ALPHA = 0.00393  # [1/K] copper


@pytest.fixture(scope="module")
def omx():
    return load_robot(ROBOT)


def with_model(robot, model, **nominal):
    """``robot`` with every parameter set's model replaced by ``model`` and nominal values
    overridden by ``nominal`` (servo side)."""
    groups = tuple(dataclasses.replace(g, model=model,
                                       nominal=tuple((k, float(nominal.get(k, v))) for k, v in g.nominal))
                   for g in robot.groups)
    joints = tuple(dataclasses.replace(j, model=model) for j in robot.joints)
    return dataclasses.replace(robot, groups=groups, joints=joints)


def chirp(robot, T, seed):
    rng = np.random.default_rng(seed)
    t = np.arange(T) * robot.control_dt
    qt = np.zeros((T, robot.n_joints))
    for i in range(4):
        f0, f1, a = 0.3 + 0.2 * rng.random(), 2.0 + rng.random(), 0.4 + 0.3 * rng.random()
        qt[:, i] = a * np.sin(2 * np.pi * (f0 * t + 0.5 * (f1 - f0) / t[-1] * t**2) + 6 * rng.random())
    return qt


# ---------------------------------------------------------------------------------------------
def test_registry_and_drive_error():
    spec = get_model("m3+thermal")
    assert spec.thermal and not spec.compliant and not get_model("m3").thermal
    assert spec.free[-2:] == ("thermal_resistance", "thermal_capacitance")
    assert "thermal_resistance" not in spec.free_for("current")  # no winding R in a current drive
    assert contains("m3+thermal", "m3")
    with pytest.raises(ModelError, match=r"\+thermal.*voltage"):
        make_step(StepConfig(law="pd", thermal=True))


def test_thermal_needs_voltage_drive(omx):
    from actuatorlab.sim.arm_step import layout

    r = with_model(omx, "m3+thermal")
    r = dataclasses.replace(r, joints=(dataclasses.replace(r.joints[0], drive="effort"),) + r.joints[1:])
    with pytest.raises(ModelError, match="voltage"):
        layout(r)


def test_stalled_joint_heats_first_order(omx):
    """joint1 held by a Coulomb friction far above its stall torque, its target 1 rad away (duty
    saturated: u = V): i = V / R(T), P = i^2 R(T). With alpha = 0 the winding follows
    T_amb + P R_th (1 - exp(-t/tau)), tau = R_th C_th, to 0.1 K (explicit Euler, h = 2 ms, tau =
    2.5 s: expected error ~0.02 K); with copper's alpha the steady state solves
    x (1 + alpha x) = R_th V^2 / R (x = T - T_amb) and the stall torque falls to kt V / R(T)."""
    R_th, C_th, V = 5.0, 0.5, 12.0
    tau_th = R_th * C_th
    T = 750  # 7.5 s = 3 tau
    qt = np.zeros((T, omx.n_joints))
    qt[:, 0] = 1.0
    t = np.arange(T) * omx.control_dt
    res = {}
    for alpha in (0.0, ALPHA):
        r = with_model(omx, "m3+thermal", thermal_resistance=R_th, thermal_capacitance=C_th, friction_base=50.0,
                       resistance_tempco=alpha)
        _, o = rollout_native(r, r.nominal_params(), make_inputs(r, qt), initial_state(r))
        assert np.abs(o.dq).max() < 1e-9  # stuck: no back-EMF
        assert np.allclose(o.u[:, 0], V) and np.allclose(o.temperature[:, 1:], 25.0)  # others idle
        res[alpha] = o
    R, kt = 5.217, 2.478
    P = V**2 / R  # 27.6 W
    o = res[0.0]
    exact = 25.0 + P * R_th * (1.0 - np.exp(-t / tau_th))
    err0 = np.abs(o.temperature[:, 0] - exact).max()
    assert err0 < 0.1, err0
    assert abs(o.temperature[-1, 0] - (25.0 + 0.95 * P * R_th)) < 0.5  # 95 % of the 138 K rise at 3 tau
    np.testing.assert_allclose(o.current[:, 0], V / R, rtol=1e-12)
    np.testing.assert_allclose(o.tau_motor[:, 0], kt * V / R, rtol=1e-12)  # alpha = 0: constant torque
    # copper: R rises, the current and the stall torque fall
    o = res[ALPHA]
    from scipy.integrate import solve_ivp

    def rhs(_, x):
        RT = R * (1 + ALPHA * (x[0] - R_REFERENCE_TEMPERATURE))
        return [(V**2 / RT - (x[0] - 25.0) / R_th) / C_th]

    ref = solve_ivp(rhs, (0, t[-1]), [25.0], t_eval=t, rtol=1e-10, atol=1e-10).y[0]
    err = np.abs(o.temperature[:, 0] - ref).max()
    assert err < 0.1, err
    x_ss = (-1 + np.sqrt(1 + 4 * ALPHA * R_th * V**2 / R)) / (2 * ALPHA)  # 99.3 K
    # R(T) feedback: a lower, faster-settling rise than alpha = 0 (138 K at steady state)
    assert 0.95 * x_ss < o.temperature[-1, 0] - 25.0 < x_ss, (o.temperature[-1, 0], x_ss)
    err_cu = err
    RT = R * (1 + ALPHA * (o.temperature[:, 0] - 25.0))
    np.testing.assert_allclose(o.tau_motor[:, 0], kt * V / RT, rtol=1e-12)
    drop = o.tau_motor[-1, 0] / o.tau_motor[0, 0]
    assert 0.70 < drop < 0.76, drop  # 1 / (1 + alpha 0.95 x_ss) = 0.73
    print(f"alpha=0: max |T - analytic| = {err0:.4f} K; copper: max |T - ODE| = {err_cu:.4f} K, "
          f"T_end {o.temperature[-1, 0]:.2f} degC (steady {25 + x_ss:.2f}), stall torque end/start {drop:.3f}")


def test_huge_capacity_is_nonthermal_at_start_temperature(omx):
    """C_th = 1e9 J/K: the temperature stays at 60 degC and the rollout equals m3 with R replaced by
    R (1 + alpha (60 - 25)) (1e-9 rad over 1.5 s of chirp)."""
    T0, T = 60.0, 150
    qt = chirp(omx, T, 1)
    hot = with_model(omx, "m3+thermal", thermal_capacitance=1e9)
    cold = with_model(omx, "m3", R=5.217 * (1 + ALPHA * (T0 - 25.0)))
    _, a = rollout_native(hot, hot.nominal_params(), make_inputs(hot, qt), initial_state(hot, q=qt[0], temperature=T0))
    _, b = rollout_native(cold, cold.nominal_params(), make_inputs(cold, qt), initial_state(cold, q=qt[0]))
    assert np.abs(a.q - b.q).max() < 1e-9 and np.abs(a.tau_motor - b.tau_motor).max() < 1e-6
    assert np.abs(a.temperature - T0).max() < 1e-6
    assert np.abs(a.current[:, ARM]).max() > 0.3  # the chirp does draw current
    # and the temperature matters: the same model at 25 degC differs by far more
    _, c = rollout_native(hot, hot.nominal_params(), make_inputs(hot, qt), initial_state(hot, q=qt[0]))
    assert np.abs(c.q - a.q).max() > 1e-3


def test_nonthermal_model_is_bit_identical(omx, monkeypatch):
    """Without +thermal the thermal parameters and the start temperature change nothing (exact
    equality), and the rollout equals the one with the thermal functions replaced by no-ops."""
    T = 100
    qt = chirp(omx, T, 2)
    x = make_inputs(omx, qt)
    p = omx.nominal_params()
    _, a = rollout_native(omx, p, x, initial_state(omx, q=qt[0]))
    crazy = dict(p, thermal_resistance=p["thermal_resistance"] * 0 + 0.01,
                 thermal_capacitance=p["thermal_capacitance"] * 0 + 1e-3,
                 ambient_temperature=p["ambient_temperature"] * 0 - 40.0,
                 resistance_tempco=p["resistance_tempco"] * 0 + 0.05)
    _, b = rollout_native(omx, crazy, x, initial_state(omx, q=qt[0], temperature=200.0))
    for k in a._fields:
        if k != "temperature":
            assert np.array_equal(getattr(a, k), getattr(b, k)), k
    assert np.all(b.temperature == 200.0) and np.all(a.temperature == 25.0)
    monkeypatch.setattr(arm_step, "hot_params", lambda xp, lay, p, temp: p)
    monkeypatch.setattr(arm_step, "thermal_step", lambda xp, lay, p, temp, cur, h: temp)
    _, c = rollout_native(omx, p, x, initial_state(omx, q=qt[0]))
    for k in a._fields:
        assert np.array_equal(getattr(a, k), getattr(c, k)), k


def test_mjx_matches_native_thermal(omx):
    """A fast thermal model (tau = R_th C_th = 0.25 s), joints started at 30..70 degC, a 1 rad step
    on joint2: MJX and native agree (q 1e-9 rad, temperature 1e-8 K, current 1e-7 A) while the
    temperatures move by up to 24 K in 0.2 s. The one MJX compile of this file."""
    pytest.importorskip("mujoco.mjx", reason="mujoco-mjx is not installed")
    r = with_model(omx, "m3+thermal", thermal_capacitance=0.05)
    T = 20
    qt = chirp(r, T, 3)
    qt[:, 1] += 1.0  # a 1 rad step on joint2: saturated duty, high current
    x = make_inputs(r, qt)
    s0 = initial_state(r, q=qt[0] - np.r_[0, 1.0, 0, 0, 0], temperature=np.array([30.0, 40, 50, 60, 70]))
    p = r.nominal_params()
    roll = jax.jit(make_mjx_rollout(r))
    sj, oj = roll({k: jnp.asarray(v) for k, v in p.items()}, x, s0)
    sn, on = rollout_native(r, p, x, s0)
    err = {k: float(np.abs(np.asarray(getattr(oj, k)) - getattr(on, k)).max()) for k in on._fields}
    print({k: f"{v:.1e}" for k, v in err.items()})
    assert err["q"] < 1e-9 and err["temperature"] < 1e-8 and err["current"] < 1e-7, err
    assert np.abs(np.asarray(sj.temperature) - sn.temperature).max() < 1e-8
    rise = on.temperature[-1] - on.temperature[0]  # measured: +0.09 +0.54 -10.2 -13.8 -24.0 K
    assert rise[1] > 0.3 and np.all(rise[2:] < -8.0), rise  # joint2 heats, the hot-started joints cool
    # and the heating matters: the same rollout without +thermal (R at 25 degC) differs
    cold = with_model(omx, "m3")
    _, oc = rollout_native(cold, cold.nominal_params(), x, s0)
    assert np.abs(oc.q - on.q).max() > 1e-4


def _log(robot, params, qt, name, with_temperature=True):
    _, o = rollout_native(robot, params, make_inputs(robot, qt), initial_state(robot, q=qt[0]))
    t = np.arange(len(qt)) * robot.control_dt
    arm = list(robot.joint_names[ARM])
    data, ch = {}, {}
    for j in arm:
        i = robot.index(j)
        rows = [(f"position/{j}", o.q[:, i], "rad", "measured"), (f"velocity/{j}", o.dq[:, i], "rad/s", "estimated"),
                (f"position_target/{j}", qt[:, i], "rad", "commanded")]
        if with_temperature:
            rows.append((f"temperature/{j}", o.temperature[:, i], "degC", "measured"))
        for cname, val, unit, kind in rows:
            data[cname], ch[cname] = val, Channel(unit, kind)
    setup = Setup("xm430-w350", controller="dynamixel_pwm", gains={"kp": 800}, supply_voltage=12.0,
                  extra={"robot": robot.name, "joints": arm})
    return Trajectory(name, t, data, ch, setup), o


def test_windows_restart_from_logged_temperature(omx):
    """A log of a heating arm with temperature/<joint> channels: LogArrays carries the temperature,
    windows start from it (the gripper, not logged, from the ambient 25 degC), and window
    rollouts continue the logged temperature (1e-4 K) where windows without it (25 degC) miss by
    several K; a log without temperature channels gives LogArrays.temperature None."""
    r = with_model(omx, "m3+thermal", thermal_capacitance=0.2)
    T, L = 200, 50
    qt = chirp(r, T, 4)
    qt[:, 1] += 0.8
    traj, o = _log(r, r.nominal_params(), qt, "hot")
    lg = log_arrays(r, traj)
    assert lg.temperature.shape == (T, r.n_joints)
    np.testing.assert_array_equal(lg.temperature[:, ARM], o.temperature[:, ARM])
    assert np.all(lg.temperature[:, 4] == 25.0)
    assert lg.temperature[-1, 1] > 35.0  # joint2 heated (40.7 degC)
    w, _ = fit_windows(r, [lg], L, ArmConfig.from_robot(r))
    np.testing.assert_array_equal(w.state0.temperature[:, ARM], o.temperature[w.start][:, ARM])
    _, ow = rollout_native(r, r.nominal_params(), w.inputs, w.state0)
    err = np.abs(ow.temperature[:, :, ARM] - o.temperature.reshape(T // L, L, -1)[:, :, ARM]).max()
    assert err < 1e-4, err  # 1.2e-6 K measured
    w0 = make_windows(r, lg.q_meas, lg.dq_meas, lg.inputs, L)  # no temperature: ambient
    assert np.all(w0.state0.temperature == 25.0)
    _, o0 = rollout_native(r, r.nominal_params(), w0.inputs, w0.state0)
    assert np.abs(o0.temperature[:, :, 1] - o.temperature.reshape(T // L, L, -1)[:, :, 1]).max() > 5.0  # 8.8 K
    # backward compatible: a log without temperature, and the old LogArrays constructor
    traj2, _ = _log(r, r.nominal_params(), qt, "cold", with_temperature=False)
    assert log_arrays(r, traj2).temperature is None
    old = LogArrays("x", lg.q_meas, lg.dq_meas, lg.inputs, lg.scored, lg.units)
    assert old.temperature is None


def test_fit_recovers_thermal_resistance(omx):
    """Logs of a heating arm (R_th = 10 K/W, C_th = 0.5 J/K: tau = 5 s; 4 s chirps, joints up to
    ~48 degC) generated by the native path; CMA-ES from the nominal R_th 5 K/W and C_th 0.5 J/K
    over positions alone, windows of 100 steps restarted from the logged temperature, recovers
    R_th within 6 % and C_th within 3 % in 60 evaluations (measured +5.0 %, +1.4 %; 150 evaluations
    give +4.8 %, +1.0 %: R_th and C_th trade along a shallow valley, train MAE 3e-6 rad against
    5e-10 at the truth). With C_th known the loss alone is sharp in R_th (MAE 5e-10 rad at the
    truth, 5e-5 at 8 K/W), but fit_arm on R_th alone (one value) stopped in cma 4.5.0's
    _stds_into_limits with "not yet initialized (dimension needed)", so both are fitted."""
    from actuatorlab.identify.arm_fit import fit_arm

    true = with_model(omx, "m3+thermal", thermal_resistance=10.0, thermal_capacitance=0.5)
    logs = []
    for seed in range(2):
        qt = chirp(true, 400, 10 + seed)
        qt[:, 1] += 0.6
        qt[:, 2] -= 0.4
        logs.append(_log(true, true.nominal_params(), qt, f"hot{seed}")[0])
    start = with_model(omx, "m3+thermal", thermal_capacitance=0.5)  # R_th nominal 5 K/W
    res = fit_arm(start, logs, params=("thermal_resistance", "thermal_capacitance"), max_evals=60,
                  horizon=100, seed=0)
    rth, cth = (float(next(iter(res["params"][k].values()))) for k in ("thermal_resistance", "thermal_capacitance"))
    print(f"fitted R_th {rth:.4f} K/W (truth 10), C_th {cth:.4f} J/K (truth 0.5), {res['evaluations']} "
          f"evaluations, {res['wall_s']:.1f} s, MAE {res['train_mae']:.2e} (nominal {res['train_mae_nominal']:.2e})")
    assert abs(rth - 10.0) < 0.6 and abs(cth - 0.5) < 0.015, (rth, cth)  # measured 10.50, 0.507
    assert res["train_mae"] < 0.05 * res["train_mae_nominal"]  # measured 4.0e-6 / 1.9e-4
