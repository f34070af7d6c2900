"""The simulator interface (sim/backends.py, sim/scan.py, sim/model_rollout.py): the one-joint scan is
the third backend of ``rollout(robot, params, inputs, state0, backend=...)`` for a bench robot, the
same function as the one-joint replay underneath (bit for bit), and it agrees with native MuJoCo on
the same bench at the same timing; a model file rolls out through ``rollout_model``."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from actuatorlab.errors import ModelError, UnknownNameError
from actuatorlab.logs import load_logs
from actuatorlab.models.actuator import StepConfig
from actuatorlab.models.actuator_model import from_document, load
from actuatorlab.robots import load_robot
from actuatorlab.sim.arm import initial_state, make_inputs, position_loss
from actuatorlab.sim.arm_data import robot_with_model
from actuatorlab.sim.arm_step import ArmConfig, ArmInputs, ArmState
from actuatorlab.sim.backends import BACKENDS, rollout
from actuatorlab.sim.model_rollout import model_robot, rollout_model
from actuatorlab.sim.rollout import make_batches, rollout_batch

ROOT = Path(__file__).resolve().parents[1]
#: a one-joint m1 model fitted by ``actuatorlab fit`` on the bundled XL330 logs (setup kp = 100)
FITTED = ROOT / "tests" / "data" / "model_files_v1" / "xl330_m1_model.json"
ROBOT_MODEL = ROOT / "tests" / "data" / "model_files_v1" / "anymal_c_sea_arm_model.json"
#: the bundled XL330 logs recorded with kp = 100 (the fitted file's setup), first 300 samples
LOGS = ["2026-01-15_10h28m10.json", "2026-01-15_10h28m17.json"]
T = 300


@pytest.fixture(scope="module")
def bench():
    """(model, bench robot, batch of two kp=100 XL330 logs on the fitted period)."""
    model = load(FITTED)
    robot = load_robot(model)
    trajs = load_logs([ROOT / "src" / "actuatorlab" / "examples" / "bam_xl330" / n for n in LOGS])
    (batch,) = make_batches(trajs, robot.control_dt)
    return model, robot, batch


def _arrays(batch, **edits):
    a = batch.arrays()
    for k in ("t", "q_target", "enable", "v_supply", "q_meas", "dq_meas"):
        a[k] = a[k][:, :T]
    return {**a, **edits}


def _start(robot, batch, **kw):
    """Inputs (B, T, 1) and start states (B, ...) of the batch's logs on ``robot``."""
    a = _arrays(batch)
    x = ArmInputs(a["q_target"][..., None], a["enable"][..., None], a["v_supply"][..., None])
    s = [initial_state(robot, q=[a["q_meas"][i, 0]], dq=[a["dq_meas"][i, 0]], **kw) for i in range(batch.size)]
    return x, ArmState(*[np.stack(v) for v in zip(*s)])


def _fit_timing(robot, substeps=1):
    """The one-joint fit's timing: the law once per control step, ``substeps`` physics steps."""
    return ArmConfig.from_robot(robot, physics_dt=robot.control_dt / substeps, substeps=substeps,
                                law_every=substeps)


def _variant(robot, model, **nominal):
    r = robot_with_model(robot, model)
    g = r.groups[0]
    g = dataclasses.replace(g, nominal=tuple((k, float(nominal.get(k, v))) for k, v in g.nominal))
    return dataclasses.replace(r, groups=(g,))


# ------------------------------------------------------------------------------------------------
# (a) the scan backend is the one-joint replay


@pytest.mark.parametrize("variant", ["fitted", "backlash", "thermal"])
def test_scan_backend_is_the_one_joint_replay_bit_for_bit(bench, variant):
    """On the bench robot of a fitted one-joint model (its plant constants, control law, gains and
    fitted values), the scan backend at the fit's timing returns the arrays of ``rollout_batch`` on
    the logs the model was fitted on, bit for bit (rigid, compliant with 4 substeps, +thermal)."""
    model, robot, batch = bench
    sub, extra = 1, {}
    if variant == "backlash":
        robot, sub, extra = _variant(robot, "m1+backlash", backlash=0.01, stiffness=20.0), 4, {}
    elif variant == "thermal":
        robot = _variant(robot, "m1+thermal", thermal_capacitance=0.05)
        extra = {"temperature0": np.array([31.0, 40.0])}
    x, s0 = _start(robot, batch)
    if variant == "thermal":
        s0 = s0._replace(temperature=extra["temperature0"][:, None])
    params = robot.nominal_params()
    fin, out = rollout(robot, params, x, s0, backend="scan", cfg=_fit_timing(robot, sub))
    p = {k: jnp.asarray(v[0]) for k, v in params.items()}
    ref = rollout_batch(StepConfig(batch.law, batch.plant, sub > 1, sub, variant == "thermal"), p,
                        _arrays(batch, **extra))
    assert model.parameters["q_offset"] == 0.0  # the encoder frame is the MuJoCo frame: no offset added
    for k in ("q", "dq", "u", "tau_motor", "tau_friction", "tau_ext"):
        assert np.array_equal(np.asarray(getattr(out, k))[..., 0], np.asarray(getattr(ref, k))), k
    if variant == "thermal":
        assert np.array_equal(np.asarray(out.temperature)[..., 0], np.asarray(ref.temperature))
        end = np.asarray(out.temperature)[:, -1, 0]  # the winding moves toward its 25 degC ambient
        assert np.all((25.0 < end) & (end < extra["temperature0"]))
    else:  # no winding model: the start temperature, as on the other backends
        assert np.all(np.asarray(out.temperature) == np.asarray(s0.temperature)[:, None, :])
    assert np.all(np.isnan(np.asarray(out.current)))  # not produced by the scan
    motor_side = np.asarray(out.qm)
    assert np.all(np.isnan(motor_side)) if variant == "backlash" else np.array_equal(motor_side, np.asarray(out.q))
    assert np.array_equal(np.asarray(out.qpos), np.asarray(out.q)) and out.q.shape == (2, T, 1)
    assert fin.qpos.shape == (2, 1) and fin.hist_target.shape == (2, robot.delay_steps, 1)


def test_scan_final_state_is_the_next_steps_start(bench):
    """The final state is where the next control step starts: a rollout one step longer reports it
    as its last position and velocity; the firmware memory is the last measured positions."""
    _, robot, batch = bench
    x, s0 = _start(robot, batch)
    cfg = _fit_timing(robot)
    fin, out = rollout(robot, robot.nominal_params(), ArmInputs(*[v[:, : T - 1] for v in x]), s0,
                       backend="scan", cfg=cfg)
    _, longer = rollout(robot, robot.nominal_params(), x, s0, backend="scan", cfg=cfg)
    np.testing.assert_allclose(np.asarray(fin.qpos), np.asarray(longer.q)[:, -1], rtol=0, atol=1e-12)
    np.testing.assert_allclose(np.asarray(fin.qvel), np.asarray(longer.dq)[:, -1], rtol=0, atol=1e-9)
    np.testing.assert_array_equal(np.asarray(fin.q_prev), np.asarray(out.q)[:, -1])
    np.testing.assert_array_equal(np.asarray(fin.hist_target)[:, 0], x.q_target[:, T - 2])


# ------------------------------------------------------------------------------------------------
# (b) scan vs native MuJoCo on the same bench


@pytest.mark.parametrize("q_offset", [0.0, 0.05])
def test_scan_agrees_with_native_mujoco_on_the_bench_robot(bench, q_offset):
    """At the robot's own timing (firmware every physics step, 6 physics steps per 5.3 ms control
    step) the scan and native MuJoCo run the same equations on the same plant; they differ only in
    rounding: MuJoCo integrates the pendulum from the MJCF body (mass, centre of mass, inertia plus
    the 1e-9 relative inertia the bench adds so MuJoCo accepts the body) in its own order of
    operations, the scan from the closed-form I = m l^2 and m l g sin q. Measured: 5.7e-10 rad over
    1132 steps; asserted 1e-8 rad on a 0.9 rad swing. At the fit's timing (the law once per control
    step) the two differ by up to 0.017 rad: that is a different firmware rate, not an error.
    With an encoder offset both report the MuJoCo coordinate (encoder + q_offset, gravity on it)."""
    _, robot, batch = bench
    if q_offset:
        robot = _variant(robot, "m1+qoffset", q_offset=q_offset)
    x, s0 = _start(robot, batch)
    params = robot.nominal_params()
    fin_s, scan = rollout(robot, params, x, s0, backend="scan")
    fin_n, native = rollout(robot, params, x, s0, backend="native")
    assert np.ptp(native.q) > 0.1  # the pendulum moves
    np.testing.assert_allclose(np.asarray(scan.q), native.q, rtol=0, atol=1e-8)
    np.testing.assert_allclose(np.asarray(scan.u), native.u, rtol=0, atol=1e-5)  # duty [1], ~1e-9 rad x kp
    np.testing.assert_allclose(np.asarray(fin_s.qpos), fin_n.qpos, rtol=0, atol=1e-8)
    np.testing.assert_allclose(np.asarray(fin_s.q_prev), fin_n.q_prev, rtol=0, atol=1e-8)


# ------------------------------------------------------------------------------------------------
# (c) errors


def test_scan_on_a_multi_joint_robot_is_a_one_line_error():
    robot = load_robot("open_manipulator_x")
    x = make_inputs(robot, np.zeros((3, robot.n_joints)))
    with pytest.raises(ModelError) as e:
        rollout(robot, robot.nominal_params(), x, initial_state(robot), backend="scan")
    msg = str(e.value)
    assert "open_manipulator_x" in msg and "5 joints" in msg and "native" in msg and "\n" not in msg


def test_unknown_backend_lists_the_three():
    robot = load_robot("open_manipulator_x")
    with pytest.raises(UnknownNameError) as e:
        rollout(robot, robot.nominal_params(), None, None, backend="warp")
    assert all(b in str(e.value) for b in ("native", "mjx", "scan")) and BACKENDS == ("native", "mjx", "scan")


# ------------------------------------------------------------------------------------------------
# (d) gradients


@pytest.mark.parametrize("timing", ["fit", "robot"])
def test_gradient_of_a_position_loss_through_the_scan_backend_is_finite(bench, timing):
    """d(position loss)/d(parameters) through ``rollout(..., backend="scan")`` is finite and moves
    with the motor and friction parameters, on both timings (one law per control step; upsampled)."""
    _, robot, batch = bench
    x, s0 = _start(robot, batch)
    x, s0 = ArmInputs(*[v[0, :80] for v in x]), ArmState(*[v[0] for v in s0])
    cfg = _fit_timing(robot) if timing == "fit" else None
    q_meas = jnp.asarray(batch.q_meas[0, :80, None])
    p0 = {k: jnp.asarray(v) for k, v in robot.nominal_params().items()}

    def loss(p):
        return position_loss(rollout(robot, p, x, s0, backend="scan", cfg=cfg)[1], q_meas)

    val, g = jax.value_and_grad(loss)(p0)
    assert np.isfinite(float(val)) and all(np.all(np.isfinite(np.asarray(v))) for v in g.values())
    assert abs(float(g["kt"][0])) > 0 and abs(float(g["friction_base"][0])) > 0


# ------------------------------------------------------------------------------------------------
# the model-file entry point


def test_rollout_model_runs_a_one_joint_model_on_its_scan_by_default(bench):
    model, robot, batch = bench
    x, s0 = _start(robot, batch)
    r, params = model_robot(model)
    assert model_robot(model)[0] is r and r.name == "bench:revolute"  # built once per model
    assert float(params["kt"][0]) == model.parameters["kt"]
    _, out = rollout_model(model, x, s0, cfg=_fit_timing(r))
    _, ref = rollout(r, params, x, s0, backend="scan", cfg=_fit_timing(r))
    assert np.array_equal(np.asarray(out.q), np.asarray(ref.q))


def test_rollout_model_runs_a_robot_model_with_its_fitted_parameters():
    model = load(ROBOT_MODEL)
    robot, params = model_robot(model)
    assert robot.name == "anymal_c" and np.all(params["stiffness"] == 200.0) and robot.compliant.all()
    x = make_inputs(robot, np.tile(initial_state(robot).qpos[robot.qpos_adr], (3, 1)))
    fin, out = rollout_model(model, x, initial_state(robot, params=params))
    assert out.q.shape == (3, robot.n_joints) and np.all(np.isfinite(out.q)) and np.all(np.isfinite(out.current))


def test_rollout_model_refuses_learned_kinds_in_one_line():
    doc = dict(load(FITTED).document)
    learned = from_document({**doc, "kind": "learned"}, validate=False)
    with pytest.raises(ModelError) as e:
        model_robot(learned)
    assert "learned.joint" in str(e.value) and "\n" not in str(e.value)


def test_mjx_is_imported_without_noise_on_stdout():
    """mujoco-mjx prints "Failed to import warp" on stdout when its optional Warp backend is
    missing; through :func:`actuatorlab.sim.mjx_module.mjx` a command's stdout stays its own."""
    import subprocess
    import sys

    code = ("from actuatorlab.sim.mjx_module import mjx; m = mjx(); "
            "import sys; assert m is sys.modules['mujoco.mjx'] and mjx() is m")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "", r.stdout
