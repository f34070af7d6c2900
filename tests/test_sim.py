"""Closed-loop replay: padding and masks, causal zero-order hold of inputs, command delay, one-step vs
full rollout, missing channels."""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from synthetic import DT, TRUTH_M1, full_params, make_trajectory, synthetic_log, synthetic_set, xl330_setup

from actuatorlab.errors import DataError
from actuatorlab.evaluate.replay import replay_batches
from actuatorlab.logs.format import Channel, Setup
from actuatorlab.models.actuator import StepConfig
from actuatorlab.sim.rollout import default_dt, make_batches, one_step, rollout, rollout_batch

F64 = jnp.float64


def _log(name, duration, kp=400.0, controller="dynamixel_pwm", **kw):
    t = DT * np.arange(int(round(duration / DT)) + 1)
    setup = xl330_setup(kp, controller=controller)
    return make_trajectory(name, t, 0.5 * np.sin(2 * np.pi * t), setup=setup, position=0.4 * np.sin(2 * np.pi * t),
                           source_file=f"logs/{name}.json", **kw)


# ------------------------------------------------------------------------------------------------
# batches: grouping, padding, masks, constants
# ------------------------------------------------------------------------------------------------


def test_make_batches_pads_and_masks_logs_of_different_lengths():
    short, long = _log("short", 1.0, kp=400.0), _log("long", 1.5, kp=800.0)
    short = short.with_channel("controller_output", np.linspace(-1, 1, short.n), Channel("V", "commanded"))
    pd = _log("pd_log", 0.5, controller="pd")
    batches = make_batches([short, pd, long], DT)
    assert [(b.law, b.names) for b in batches] == [("dynamixel_pwm", ("short", "long")), ("pd", ("pd_log",))]
    b = batches[0]
    assert b.q_target.shape == b.mask.shape == b.t.shape == (2, 301)
    assert b.mask[0].sum() == 201 and b.mask[1].all() and not b.mask[0, 201:].any()
    assert b.n_samples == 502 and b.size == 2
    np.testing.assert_allclose(b.t[0], DT * np.arange(301), rtol=0, atol=1e-15)
    # padding repeats the last input value (a held command), effort padding is NaN
    assert np.all(b.q_target[0, 201:] == b.q_target[0, 200])
    assert np.all(b.q_meas[0, 201:] == b.q_meas[0, 200])
    np.testing.assert_allclose(b.effort_meas[0, :201], np.linspace(-1, 1, 201))
    assert np.all(np.isnan(b.effort_meas[0, 201:])) and np.all(np.isnan(b.effort_meas[1]))
    # per-log constants
    np.testing.assert_array_equal(b.consts.law.kp, [400.0, 800.0])
    np.testing.assert_allclose(b.consts.law.error_gain, (4096 / (2 * np.pi)) / (256 * 885))
    np.testing.assert_array_equal(b.consts.plant.mass, [0.49, 0.49])
    np.testing.assert_allclose(b.consts.plant.gravity, 9.81)
    assert b.consts.law.kp.shape == (2,) and b.unit == "rad" and b.dt == DT
    assert batches[1].q_target.shape == (1, 101)


def test_padding_does_not_change_a_logs_rollout():
    """A log replayed alone equals the same log replayed next to a longer one (on its mask)."""
    short, long = _log("short", 0.5), _log("long", 1.0)
    p = full_params(TRUTH_M1)
    (alone,) = make_batches([short], DT)
    (both,) = make_batches([short, long], DT)
    cfg = alone.step_config()
    qa = np.asarray(rollout_batch(cfg, p, alone.arrays()).q)[0]
    qb = np.asarray(rollout_batch(cfg, p, both.arrays()).q)[0]
    np.testing.assert_allclose(qb[both.mask[0]], qa, rtol=0, atol=1e-13)


def test_default_dt_is_the_median_period_rounded_to_a_tenth_of_a_millisecond():
    rng = np.random.default_rng(0)
    t = np.cumsum(rng.uniform(0.0050, 0.0054, 300))
    tr = make_trajectory("j", t, np.zeros(300), setup=xl330_setup())
    assert default_dt([tr]) == pytest.approx(round(float(np.median(np.diff(t))), 4))
    assert default_dt([tr]) in (0.0051, 0.0052, 0.0053)


# ------------------------------------------------------------------------------------------------
# causality of the inputs
# ------------------------------------------------------------------------------------------------


def test_inputs_are_zero_order_held_never_taken_from_the_future():
    rng = np.random.default_rng(3)
    # irregular raw times (2-8 ms apart) and one raw sample exactly on grid time 0.5 s = 100 dt
    t = np.concatenate([[0.0], np.cumsum(rng.uniform(0.002, 0.008, 250))])
    t = np.unique(np.concatenate([t[np.abs(t - 0.5) > 1e-3], [0.5]]))
    k_exact = int(np.flatnonzero(t == 0.5)[0])
    k_step = 60
    assert t[k_step] / DT % 1 > 0.05  # the step sample lies strictly between two grid times
    cmd = np.where(np.arange(t.size) >= k_step, 1.0, 0.0) + np.where(np.arange(t.size) >= k_exact, 1.0, 0.0)
    en = np.where(np.arange(t.size) >= k_step, 0.0, 1.0)
    tr = make_trajectory("raw", t, cmd, setup=xl330_setup(), position=2.0 * t, enable=en)
    (b,) = make_batches([tr], DT)
    g = b.t[0][b.mask[0]] + t[0]
    qt = b.q_target[0][b.mask[0]]
    # reference: the last raw sample at or before each grid time
    last = np.searchsorted(t, g + 1e-12, side="right") - 1
    np.testing.assert_array_equal(qt, cmd[last])
    # the step appears at the first grid point at or after its raw time, never before
    first_one = int(np.argmax(qt >= 1.0))
    assert g[first_one] >= t[k_step] and g[first_one] - DT < t[k_step]
    first_two = int(np.argmax(qt >= 2.0))
    assert g[first_two] == pytest.approx(t[k_exact], abs=1e-12)  # on the grid: at that point itself
    np.testing.assert_array_equal(b.enable[0][b.mask[0]], en[last])
    # measured position is interpolated (a target, not an input): exact for a linear signal
    np.testing.assert_allclose(b.q_meas[0][b.mask[0]], 2.0 * g, rtol=0, atol=1e-12)


_rollout_m1 = jax.jit(partial(rollout, StepConfig("dynamixel_pwm", "pendulum")))


def _run(p, k, qt, en, v, q0=0.0):
    """One compiled rollout (rigid, dynamixel, pendulum) for every call of this file."""
    return _rollout_m1(p, k, qt, en, v, jnp.asarray(q0, F64), jnp.asarray(0.0, F64))


@pytest.fixture(scope="module")
def one_log():
    # small amplitude: the duty never saturates, so every command change reaches the motor
    (b,) = make_batches([synthetic_log("chirp", TRUTH_M1, duration=1.0, quantise=False, amplitude=0.3)], DT)
    k = type(b.consts)(*[type(c)(*[jnp.asarray(x[0]) for x in c]) for c in b.consts])
    return b, k


@pytest.mark.parametrize("delay_samples", [2.0, 0.4, 2.4])
def test_delay_shifts_the_command_by_the_fractional_amount(one_log, delay_samples):
    """rollout with delay d equals rollout without delay driven by the linearly interpolated past command."""
    b, k = one_log
    qt, en, v = b.q_target[0], b.enable[0], b.v_supply[0]
    n = qt.size
    f = np.clip(np.arange(n) - delay_samples, 0, n - 1)
    k0 = np.floor(f).astype(int)
    w = f - k0
    k1 = np.minimum(k0 + 1, n - 1)
    shifted = (1 - w) * qt[k0] + w * qt[k1]
    p0 = full_params(TRUTH_M1)
    pd = full_params({**TRUTH_M1, "delay": delay_samples * DT})
    a = _run(pd, k, qt, en, v)
    ref = _run(p0, k, shifted, en, v)
    np.testing.assert_allclose(np.asarray(a.q), np.asarray(ref.q), rtol=0, atol=1e-10)
    np.testing.assert_allclose(np.asarray(a.u), np.asarray(ref.u), rtol=0, atol=1e-9)
    assert np.abs(np.asarray(a.q) - np.asarray(_run(p0, k, qt, en, v).q)).max() > 1e-3  # the delay matters


@pytest.mark.parametrize("delay_samples", [0.0, 0.4, 2.4])
def test_a_command_change_never_affects_earlier_outputs(one_log, delay_samples):
    b, k = one_log
    qt, en, v = b.q_target[0], b.enable[0], b.v_supply[0]
    j = 80
    qt2 = qt.copy()
    qt2[j:] += 0.2
    p = full_params({**TRUTH_M1, "delay": delay_samples * DT})
    a, c = _run(p, k, qt, en, v), _run(p, k, qt2, en, v)
    du = np.flatnonzero(np.asarray(a.u) != np.asarray(c.u))
    dq = np.flatnonzero(np.asarray(a.q) != np.asarray(c.q))
    first_u = int(np.floor(j - 1 + delay_samples)) + 1  # first n with n - d > j - 1
    assert du[0] == first_u
    assert dq[0] == first_u + 1  # q[n] is the state at the start of period n


# ------------------------------------------------------------------------------------------------
# one-step prediction vs full rollout
# ------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def truth_logs():
    return synthetic_set([("chirp400", "chirp", 400), ("drop400", "drop", 400)], TRUTH_M1, duration=1.5,
                         quantise=False)


def test_one_step_error_is_far_smaller_than_rollout_error(truth_logs):
    wrong = {**TRUTH_M1, "kt": 0.3, "friction_base": 0.09, "armature": 0.004}
    res = replay_batches("m1", {k: float(v) for k, v in full_params(wrong).items()}, make_batches(truth_logs, DT))
    for r in res:
        rollout_mae = np.abs(r.q_sim - r.q_meas).mean()
        onestep_mae = np.abs(r.q_onestep - r.q_meas).mean()
        assert rollout_mae > 5e-3, r.name
        assert onestep_mae < 0.1 * rollout_mae, (r.name, onestep_mae, rollout_mae)


def test_one_step_with_true_parameters_reproduces_noise_free_data(truth_logs):
    (b,) = make_batches(truth_logs, DT)
    q1 = np.asarray(one_step(b.step_config(), full_params(TRUTH_M1), b.arrays()))
    np.testing.assert_allclose(q1, b.q_meas, rtol=0, atol=1e-10)


EMPS_SETUP = Setup(actuator="emps", joint_type="prismatic", controller="emps_cascade",
                   gains={"kp": 160.18, "kv": 243.45}, bench={"gtau": 35.15})
EMPS_TRUTH = dict(armature=95.0, friction_base=20.0, friction_viscous=200.0)


def _emps_batch():
    """EMPS carriage driven by +-0.1 mm steps (the 10 V clip never engages, so the velocity estimate
    matters), moving from the first control period on, noise-free."""
    (tr,) = synthetic_set([("emps", "steps", 0.0)], EMPS_TRUTH, duration=0.3, dt=1e-3, quantise=False,
                          amplitude=2e-4, setup=EMPS_SETUP)
    (b,) = make_batches([tr], 1e-3)
    assert b.q_meas[0, 1] != b.q_meas[0, 0]
    return b


def test_one_step_matches_rollout_for_the_emps_cascade():
    b = _emps_batch()
    q1 = np.asarray(one_step(b.step_config(), full_params(EMPS_TRUTH), b.arrays()))
    np.testing.assert_allclose(q1, b.q_meas, rtol=0, atol=1e-12)


def test_one_step_matches_rollout_for_the_emps_cascade_after_two_samples():
    b = _emps_batch()
    assert b.unit == "m" and b.plant == "carriage"
    q1 = np.asarray(one_step(b.step_config(), full_params(EMPS_TRUTH), b.arrays()))
    assert np.ptp(b.q_meas) > 1e-4
    # every prediction matches the noise-free data
    np.testing.assert_allclose(q1[0], b.q_meas[0], rtol=0, atol=1e-12)


# ------------------------------------------------------------------------------------------------
# missing or bad channels
# ------------------------------------------------------------------------------------------------


def test_missing_position_target_names_the_file():
    tr = _log("run1", 0.5).without_channels("position_target")
    with pytest.raises(DataError) as e:
        make_batches([tr], DT)
    msg = str(e.value)
    assert "logs/run1.json" in msg and "position_target" in msg and "\n" not in msg


@pytest.mark.parametrize("change,words", [
    (dict(setup=Setup(actuator="xl330", controller="dynamixel_pwm", gains={"kp": 400.0},
                      bench={"mass": 0.49, "length": 0.1})), "supply_voltage"),
    (dict(setup=Setup(actuator="xl330", controller="dynamixel_pwm", supply_voltage=7.4,
                      bench={"mass": 0.49, "length": 0.1})), "'kp'"),
    (dict(setup=Setup(actuator="xl330", controller="dynamixel_pwm", gains={"kp": 400.0}, supply_voltage=7.4)),
     "'mass'"),
])
def test_unusable_setup_names_the_file(change, words):
    tr = _log("run2", 0.5).replace(**change)
    with pytest.raises(DataError) as e:
        make_batches([tr], DT)
    assert "logs/run2.json" in str(e.value) and words in str(e.value)


def test_nan_command_names_the_file_and_channel():
    tr = _log("run3", 0.5)
    qt = tr["position_target"].copy()
    qt[7] = np.nan
    tr = tr.with_channel("position_target", qt, tr.channels["position_target"])
    with pytest.raises(DataError) as e:
        make_batches([tr], DT)
    assert "logs/run3.json" in str(e.value) and "position_target" in str(e.value)


def test_no_logs_is_an_error():
    with pytest.raises(DataError):
        make_batches([], DT)
