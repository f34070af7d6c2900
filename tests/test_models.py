"""Model blocks: friction dissipates, odd symmetry, DC motor envelope, firmware laws, every registered
model steps under jit with finite values and gradients, registry relations, backlash."""

from __future__ import annotations

import math
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actuatorlab.errors import UnknownNameError
from actuatorlab.models.actuator import Constants, Inputs, State, StepConfig, make_step
from actuatorlab.models.control import (CONTROL_LAWS, DEFAULT_ERROR_GAIN, DYNAMIXEL_ERROR_GAIN, LawConstants,
                                        dynamixel_pwm, emps_cascade, get_control_law)
from actuatorlab.models.friction import friction_budget, stick_slip_torque
from actuatorlab.models.motor import dc_motor_torque
from actuatorlab.models.params import BOUND_PROFILES, PARAMS, neutral_params
from actuatorlab.models.plant import PlantConstants
from actuatorlab.models.registry import (BASE_MODELS, EXTENSIONS, contains, embed_params, get_model, list_models,
                                         parent_of)
from actuatorlab.sim.rollout import rollout

DT = 0.005
F64 = jnp.float64

#: a value for every parameter that switches its mechanism on (away from bounds and kinks); a
#: parameter added later without an entry here gets 30 % of its servo search range
ACTIVE = dict(kt=0.4, R=3.5, current_limit=2.0, armature=0.002, backlash=0.02, stiffness=50.0,
              friction_base=0.03, friction_viscous=0.01, friction_stribeck=0.02, stribeck_velocity=0.1,
              stribeck_alpha=1.5, load_friction=0.1, load_friction_motor=0.12, load_friction_external=0.08,
              load_friction_stribeck=0.05, load_friction_motor_quad=0.3, load_friction_external_quad=0.2,
              delay=0.0072, q_offset=0.0, force_offset=0.0, gain_scale=1.3)
for _n in set(PARAMS) - set(ACTIVE):
    _lo, _hi = BOUND_PROFILES["servo"][_n]
    ACTIVE[_n] = _lo + 0.3 * (_hi - _lo)

#: every base model alone and with each extension (one registry name per row)
ALL_MODELS = list(BASE_MODELS) + [f"{b}+{e}" for b in BASE_MODELS for e in EXTENSIONS] + ["m6+delay+backlash"]


def params_for(model: str, **over) -> dict:
    """The model's free parameters at ACTIVE values, every other parameter neutral (float64)."""
    p = neutral_params()
    for n in get_model(model).free:
        p[n] = ACTIVE[n]
    p.update(over)
    return {k: jnp.asarray(v, F64) for k, v in p.items()}


def law_consts(law: str = "dynamixel_pwm", *, kp: float = 400.0, kd: float = 0.0, u_max: float = 10.0,
               drive_gain: float = 1.0, dt: float = DT) -> LawConstants:
    return LawConstants(*[jnp.asarray(x, F64) for x in
                          (kp, kd, DEFAULT_ERROR_GAIN.get(law, 1.0), 1.0, u_max, drive_gain, dt)])


def pendulum_consts(law: str = "dynamixel_pwm", *, gravity: float = 9.81, **kw) -> Constants:
    pc = PlantConstants(*[jnp.asarray(x, F64) for x in (0.49, 0.1, 0.0, gravity)])
    return Constants(law_consts(law, **kw), pc)


def chirp(n: int = 200, amplitude: float = 0.6) -> np.ndarray:
    t = DT * np.arange(n)
    return amplitude * np.sin(2 * np.pi * (0.8 * t + 1.5 * t**2))


@partial(jax.jit, static_argnames=("cfg",))
def _rollout_jit(cfg, p, k, q_target, enable, v, q0, dq0):
    return rollout(cfg, p, k, q_target, enable, v, q0, dq0)


def _rollout(cfg, p, k, q_target, enable, v, q0, dq0):
    """Jitted rollout; q0/dq0 as strong float64 so that one compilation serves every call."""
    return _rollout_jit(cfg, p, k, q_target, enable, v, jnp.asarray(q0, F64), jnp.asarray(dq0, F64))


def cfg_for(model: str, law: str = "dynamixel_pwm", plant: str = "pendulum") -> StepConfig:
    spec = get_model(model)
    return StepConfig(law, plant, spec.compliant, 4 if spec.compliant else 1, spec.thermal)


# ------------------------------------------------------------------------------------------------
# friction
# ------------------------------------------------------------------------------------------------

_stick = jax.jit(stick_slip_torque)
_budget = jax.jit(friction_budget)
finite = partial(st.floats, allow_nan=False, allow_infinity=False, allow_subnormal=False)


@settings(max_examples=300, deadline=None, database=None)
@given(inertia=finite(min_value=1e-4, max_value=1.0), dq=finite(min_value=-50, max_value=50),
       tau_net=finite(min_value=-5, max_value=5), budget=finite(min_value=0, max_value=5),
       dt=finite(min_value=1e-4, max_value=2e-2))
def test_stick_slip_friction_never_adds_energy(inertia, dq, tau_net, budget, dt):
    tau_f = float(_stick(inertia, dq, tau_net, budget, dt))
    free = dq + dt * tau_net / inertia
    new = dq + dt * (tau_net + tau_f) / inertia
    tol = 1e-9 * (1.0 + abs(free))
    assert abs(tau_f) <= budget * (1 + 1e-12) + 1e-15
    assert abs(new) <= abs(free) + tol            # only slows the joint ...
    assert new * free >= -tol * abs(free)          # ... and never reverses it
    assert abs(abs(free) - abs(new)) <= dt * budget / inertia + tol  # by at most budget*dt/I


@settings(max_examples=200, deadline=None, database=None)
@given(inertia=finite(min_value=1e-4, max_value=1.0), tau_net=finite(min_value=-5, max_value=5),
       budget=finite(min_value=0, max_value=5), dt=finite(min_value=1e-4, max_value=2e-2))
def test_resting_joint_sticks_below_budget_and_slips_above(inertia, tau_net, budget, dt):
    tau_f = float(_stick(inertia, 0.0, tau_net, budget, dt))
    new = dt * (tau_net + tau_f) / inertia
    if abs(tau_net) <= budget:
        assert new == 0.0 and tau_f == -tau_net
    else:
        accel = new / dt
        assert accel == pytest.approx(math.copysign((abs(tau_net) - budget) / inertia, tau_net), rel=1e-9)


#: every friction coefficient (neutral 0: off), including any added after this test was written
_P_RANGES = {k: (0.0, 0.5) for k, spec in PARAMS.items() if "friction" in k and spec.neutral == 0.0}
assert {"friction_base", "friction_viscous", "load_friction", "load_friction_motor_quad"} <= set(_P_RANGES)


@settings(max_examples=150, deadline=None, database=None)
@given(vals=st.fixed_dictionaries({k: finite(min_value=lo, max_value=hi) for k, (lo, hi) in _P_RANGES.items()}),
       vs=finite(min_value=0.01, max_value=2.0), alpha=finite(min_value=1.0, max_value=5.0),
       tau_m=finite(min_value=-3, max_value=3), tau_e=finite(min_value=-3, max_value=3),
       dq=finite(min_value=-30, max_value=30))
def test_friction_budget_is_even_and_non_negative(vals, vs, alpha, tau_m, tau_e, dq):
    p = {**neutral_params(), **vals, "stribeck_velocity": vs, "stribeck_alpha": alpha}
    b = float(_budget(p, tau_m, tau_e, dq))
    assert b >= vals["friction_base"] - 1e-12
    assert float(_budget(p, -tau_m, -tau_e, -dq)) == pytest.approx(b, rel=1e-12, abs=1e-15)


def test_friction_budget_terms_by_hand():
    """Each BAM term in isolation gives its equation's value."""
    base = neutral_params()
    tm, te, dq = 0.5, -0.2, 0.3   # opposite signs: the quadratic terms are active at rest
    s = math.exp(-((dq / 0.1 + 1e-9) ** 1.5))
    cases = {
        "coulomb+viscous": (dict(friction_base=0.03, friction_viscous=0.01), 0.03 + 0.01 * dq),
        "stribeck": (dict(friction_stribeck=0.02, stribeck_velocity=0.1, stribeck_alpha=1.5), 0.02 * s),
        "load": (dict(load_friction=0.1), 0.1 * abs(te - tm)),
        "load stribeck": (dict(load_friction_stribeck=0.05, stribeck_velocity=0.1, stribeck_alpha=1.5),
                          s * 0.05 * abs(te - tm)),
        "directional": (dict(load_friction_motor=0.12, load_friction_external=0.08), abs(0.08 * te - 0.12 * tm)),
        "directional stribeck": (dict(load_friction_motor_stribeck=0.07, load_friction_external_stribeck=0.3,
                                      stribeck_velocity=0.1, stribeck_alpha=1.5), s * abs(0.3 * te - 0.07 * tm)),
        # |tau_e| < |tau_m|: the external quadratic term
        "quadratic": (dict(load_friction_external_quad=0.2, load_friction_motor_quad=0.3, stribeck_velocity=0.1,
                           stribeck_alpha=1.5), s * 0.2 * te**2),
    }
    for name, (over, expected) in cases.items():
        got = float(friction_budget({**base, **over}, tm, te, dq))
        assert got == pytest.approx(expected, rel=1e-9), name
    # same signs: no quadratic term
    assert float(friction_budget({**base, "load_friction_external_quad": 0.2}, 0.5, 0.2, dq)) == 0.0


def test_coulomb_spin_down_stops_at_the_predicted_time_and_stays():
    """Free joint (torque off, no gravity): |dq| falls at F_c/I, stops at I dq0/F_c, then sticks."""
    p = params_for("m1", friction_viscous=0.0)
    k = pendulum_consts(gravity=0.0)
    inertia = 0.49 * 0.1**2 + 0.002
    dq0 = 3.0
    out = _rollout(cfg_for("m1"), p, k, jnp.zeros(200), jnp.zeros(200), jnp.full(200, 7.4), 0.0, dq0)
    dq = np.asarray(out.dq)
    assert np.all(np.diff(np.abs(dq)) <= 1e-15)
    t_stop = inertia * dq0 / 0.03
    k_stop = int(np.argmax(dq == 0.0))
    assert dq[k_stop] == 0.0 and abs(k_stop * DT - t_stop) <= DT
    assert np.all(dq[k_stop:] == 0.0)
    np.testing.assert_allclose(dq[1:k_stop], dq0 - 0.03 / inertia * DT * np.arange(1, k_stop), rtol=1e-9, atol=1e-12)


# ------------------------------------------------------------------------------------------------
# odd symmetry of the full step and rollout
# ------------------------------------------------------------------------------------------------

SYM_MODELS = list(BASE_MODELS) + ["m4+delay", "m6+delay", "m4+backlash", "m6+delay+backlash", "g2+stiction"]


@pytest.mark.parametrize("compliant", [False, True])
def test_step_is_odd_symmetric_for_every_model(compliant):
    cfg = StepConfig("dynamixel_pwm", "pendulum", compliant, 4 if compliant else 1)
    step = jax.jit(jax.vmap(make_step(cfg), in_axes=(None, None, 0, 0)))
    k = pendulum_consts()
    rng = np.random.default_rng(1)
    n = 64
    q = rng.uniform(-2, 2, n)
    s = State(*[jnp.asarray(x) for x in (q, rng.uniform(-8, 8, n), q + rng.uniform(-0.03, 0.03, n),
                                         rng.uniform(-8, 8, n), q + rng.uniform(-0.05, 0.05, n),
                                         q + rng.uniform(-0.1, 0.1, n))])
    x = Inputs(jnp.asarray(rng.uniform(-2, 2, n)), jnp.asarray((rng.uniform(size=n) > 0.2).astype(float)),
               jnp.full(n, 7.4))
    neg = lambda tree: jax.tree_util.tree_map(lambda a: -a, tree)  # noqa: E731
    models = [m for m in SYM_MODELS if get_model(m).compliant == compliant]
    assert models
    for m in models:
        p = params_for(m)
        s1, o1 = step(p, k, s, x)
        s2, o2 = step(p, k, neg(s), x._replace(q_target=-x.q_target))
        for a, b, name in zip(list(s1) + list(o1), list(s2) + list(o2), list(State._fields) + list(o1._fields)):
            if name == "temperature":  # no winding temperature without +thermal (and it is even)
                assert a is None and b is None
                continue
            np.testing.assert_allclose(np.asarray(b), -np.asarray(a), rtol=1e-12, atol=1e-14, err_msg=f"{m}: {name}")
        assert np.any(np.asarray(o1.tau_friction) != 0.0), m


@pytest.mark.parametrize("model", SYM_MODELS)
def test_rollout_is_odd_symmetric(model):
    cfg, p, k = cfg_for(model), params_for(model), pendulum_consts()
    qt = jnp.asarray(chirp(200) + 0.3)
    en = jnp.asarray((np.arange(200) % 90 < 70).astype(float))
    v = jnp.full(200, 7.4)
    a = _rollout(cfg, p, k, qt, en, v, 0.1, 0.5)
    b = _rollout(cfg, p, k, -qt, en, v, -0.1, -0.5)
    for name in ("q", "dq", "u", "tau_motor", "tau_ext", "tau_friction"):
        np.testing.assert_allclose(np.asarray(getattr(b, name)), -np.asarray(getattr(a, name)),
                                   rtol=1e-9, atol=1e-12, err_msg=name)
    assert np.ptp(np.asarray(a.q)) > 0.3


# ------------------------------------------------------------------------------------------------
# DC motor
# ------------------------------------------------------------------------------------------------

MOTOR = dict(kt=0.4, R=3.5, current_limit=1e3)


def _tau(volts, dq, enabled=1.0, **over):
    p = {**MOTOR, **over}
    return np.asarray(dc_motor_torque(p, jnp.asarray(volts, F64), jnp.asarray(dq, F64), jnp.asarray(enabled, F64)))


@pytest.mark.parametrize("V", [0.5, 3.0, 7.4, 12.0])
def test_dc_motor_stall_torque_and_no_load_speed(V):
    kt, R = MOTOR["kt"], MOTOR["R"]
    assert float(_tau(V, 0.0)) == pytest.approx(kt * V / R, rel=1e-12)
    assert float(_tau(-V, 0.0)) == pytest.approx(-kt * V / R, rel=1e-12)
    assert abs(float(_tau(V, V / kt))) <= 1e-12
    # half the no-load speed: half the stall torque; beyond no-load speed the motor brakes
    assert float(_tau(V, 0.5 * V / kt)) == pytest.approx(0.5 * kt * V / R, rel=1e-12)
    assert float(_tau(V, 1.5 * V / kt)) == pytest.approx(-0.5 * kt * V / R, rel=1e-12)
    # backdriven against the voltage: more than the stall torque (plugging quadrant)
    assert float(_tau(V, -0.5 * V / kt)) == pytest.approx(1.5 * kt * V / R, rel=1e-12)


def test_dc_motor_four_quadrant_envelope_point_by_point():
    kt, R = MOTOR["kt"], MOTOR["R"]
    V, dq = np.meshgrid(np.linspace(-12, 12, 25), np.linspace(-60, 60, 41), indexing="ij")
    for ilim in (1e3, 1.0):
        tau = _tau(V, dq, current_limit=ilim)
        mirror = _tau(-V, -dq, current_limit=ilim)
        expected = kt * np.clip((V - kt * dq) / R, -ilim, ilim)
        np.testing.assert_allclose(tau, expected, rtol=1e-12, atol=1e-15)
        np.testing.assert_array_equal(mirror, -tau)
        assert np.all(np.abs(tau) <= kt * ilim * (1 + 1e-12))
    clipped = _tau(V, dq, current_limit=1.0)
    assert np.isclose(np.abs(clipped), kt, rtol=1e-12).mean() > 0.3  # much of the grid is current-limited
    # quadrants: motoring (tau and dq same sign, below no-load speed) and braking both occur
    tau = _tau(V, dq)
    assert np.any((tau * dq > 0)) and np.any((tau * dq < 0))


def test_dc_motor_disabled_gives_zero_torque_whatever_voltage_and_speed():
    V, dq = np.meshgrid(np.linspace(-12, 12, 9), np.linspace(-60, 60, 9), indexing="ij")
    tau = _tau(V, dq, enabled=0.0)
    assert np.all(tau == 0.0)


# ------------------------------------------------------------------------------------------------
# firmware laws
# ------------------------------------------------------------------------------------------------


def test_dynamixel_error_gain_constant():
    assert float(DYNAMIXEL_ERROR_GAIN) == pytest.approx((4096 / (2 * math.pi)) / (256 * 885), rel=1e-15)
    assert float(DYNAMIXEL_ERROR_GAIN) == pytest.approx(2.8774e-3, rel=1e-4)
    assert DEFAULT_ERROR_GAIN["dynamixel_pwm"] == pytest.approx(float(DYNAMIXEL_ERROR_GAIN), rel=1e-15)


@pytest.mark.parametrize("kp", [100.0, 400.0, 800.0])
def test_dynamixel_duty_law_and_saturation(kp):
    c = law_consts("dynamixel_pwm", kp=kp)
    g = (4096 / (2 * math.pi)) / (256 * 885)
    p = neutral_params()
    for err in (-2.0, -0.3, -0.01, 0.0, 0.01, 0.3, 2.0):
        u = float(dynamixel_pwm(c, p, 0.2 + err, 0.2, 0.0, 0.0, 5.0, 7.4))
        assert u == pytest.approx(np.clip(kp * g * err, -1, 1) * 7.4, rel=1e-12, abs=1e-15)
        assert float(dynamixel_pwm(c, p, 0.2 - err, 0.2, 0.0, 0.0, -5.0, 7.4)) == pytest.approx(-u, abs=1e-15)
    # full duty exactly at the error where kp * g * e = 1, gain_scale multiplies the gain
    e_sat = 1.0 / (kp * g)
    assert float(dynamixel_pwm(c, p, 2 * e_sat, 0.0, 0.0, 0.0, 0.0, 7.4)) == pytest.approx(7.4)
    assert float(dynamixel_pwm(c, {**p, "gain_scale": 2.0}, 0.25 * e_sat, 0.0, 0.0, 0.0, 0.0, 7.4)) == \
        pytest.approx(0.5 * 7.4, rel=1e-12)


def test_emps_cascade_velocity_estimate_and_10V_saturation():
    dt, kp, kv = 1e-3, 160.18, 243.45
    c = law_consts("emps_cascade", kp=kp, kd=kv, u_max=10.0, drive_gain=35.15, dt=dt)
    p = neutral_params()
    q, v_true = 0.1, 0.004  # [m], [m/s]
    q_prev2 = q - 2 * dt * v_true
    # the law uses its own estimate (q - q_prev2) / (2 dt): q_prev and dq are ignored
    for q_prev, dq in ((q - dt * v_true, v_true), (123.0, -55.0)):
        u = float(emps_cascade(c, p, q + 1e-5, q, q_prev, q_prev2, dq, 0.0))
        assert u == pytest.approx(kv * (kp * 1e-5 - v_true), rel=1e-9)
    # saturation at +-10 V, mirrored
    for sign in (1.0, -1.0):
        assert float(emps_cascade(c, p, sign * 0.5, 0.0, 0.0, 0.0, 0.0, 0.0)) == pytest.approx(sign * 10.0)
        assert float(emps_cascade(c, p, 0.0, 0.0, 0.0, sign * 0.01, 0.0, 0.0)) == pytest.approx(sign * 10.0)
    assert get_control_law("emps_cascade").drive == "current"


def test_unknown_control_law_lists_the_laws():
    with pytest.raises(UnknownNameError) as e:
        get_control_law("dynamixel_current")
    for name in CONTROL_LAWS:
        assert name in str(e.value)


# ------------------------------------------------------------------------------------------------
# every registered model under jit: finite rollouts and gradients
# ------------------------------------------------------------------------------------------------


def test_every_registered_model_rolls_out_finite_under_jit():
    qt, en, v = jnp.asarray(chirp(200, 1.2)), jnp.asarray((np.arange(200) < 150).astype(float)), jnp.full(200, 7.4)
    k = pendulum_consts()
    for m in ALL_MODELS:
        out = _rollout(cfg_for(m), params_for(m), k, qt, en, v, 0.0, 0.0)
        assert (out.temperature is not None) == get_model(m).thermal, m
        arr = np.stack([np.asarray(x) for x in out if x is not None])
        assert arr.shape == (6 + get_model(m).thermal, 200) and np.all(np.isfinite(arr)), m
        assert np.abs(np.asarray(out.q)).max() < 10.0, m
        assert np.ptp(np.asarray(out.q)) > 0.2, m  # it moved




@pytest.mark.parametrize("law,plant,compliant", [
    ("feetech_pwm", "pendulum", False), ("pd", "pendulum", True), ("emps_cascade", "carriage", False),
    ("emps_cascade", "carriage", True),
])
def test_other_laws_and_plants_roll_out_finite(law, plant, compliant):
    if plant == "carriage":  # EMPS: mass 0 on the bench, the identified M is the armature
        k = Constants(law_consts(law, kp=160.18, kd=243.45, u_max=10.0, drive_gain=35.15, dt=1e-3),
                      PlantConstants(*[jnp.asarray(x, F64) for x in (0.0, 0.0, 0.0, 0.0)]))
        p = params_for("m1+offset", armature=95.0, friction_base=20.0, friction_viscous=200.0, force_offset=-5.0)
        extra = dict(backlash=1e-4, stiffness=1e6)
        qt = jnp.full(200, 0.005)  # a 5 mm step: reached within 0.2 s at 10 V x 35.15 N/V on 95 kg
    else:
        k = pendulum_consts(law, kp=400.0 if law == "feetech_pwm" else 2.0, kd=0.05, u_max=1.0)
        p = params_for("m4")
        extra = dict(backlash=0.02, stiffness=50.0)
        qt = jnp.asarray(chirp(200))
    if compliant:
        p = {**p, **{n: jnp.asarray(v, F64) for n, v in extra.items()}}
    out = _rollout(StepConfig(law, plant, compliant, 4 if compliant else 1), p, k, qt, jnp.ones(200),
                   jnp.full(200, 7.4), 0.0, 0.0)
    q = np.asarray(out.q)
    assert np.all(np.isfinite(q))
    assert np.ptp(q) > 0.5 * np.ptp(np.asarray(qt)) if plant == "carriage" else np.ptp(q) > 0.2 * np.ptp(np.asarray(qt))


def _loss(cfg, p, k, qt, en, v, q_ref):
    out = rollout(cfg, p, k, qt, en, v, 0.0, 0.0)
    return jnp.mean((out.q - q_ref) ** 2)


_grad = jax.jit(jax.grad(_loss, argnums=1), static_argnums=0)


@pytest.mark.parametrize("compliant", [False, True])
def test_gradients_of_every_free_parameter_are_finite(compliant):
    qt, en, v = jnp.asarray(chirp(200)), jnp.asarray((np.arange(200) < 160).astype(float)), jnp.full(200, 7.4)
    k = pendulum_consts()
    models = [m for m in ALL_MODELS if get_model(m).compliant == compliant]
    cfg = cfg_for(models[0])
    q_ref = jnp.asarray(chirp(200, 0.5))
    n_nonzero = 0
    for m in models:
        g = _grad(cfg, params_for(m), k, qt, en, v, q_ref)
        for name in get_model(m).free:
            assert np.isfinite(float(g[name])), (m, name)
        n_nonzero += sum(float(g[n]) != 0.0 for n in get_model(m).free)
    assert n_nonzero > 0


def test_gradient_matches_central_finite_differences():
    """m1 with Coulomb off (smooth in the parameters): jax.grad equals central differences."""
    truth = params_for("m1", friction_base=0.0)
    guess = params_for("m1", kt=0.45, R=3.2, armature=0.0025, friction_base=0.0, friction_viscous=0.015)
    k = pendulum_consts()
    qt, en, v = jnp.asarray(chirp(200, 0.4)), jnp.ones(200), jnp.full(200, 7.4)
    cfg = cfg_for("m1")
    q_ref = _rollout(cfg, truth, k, qt, en, v, 0.0, 0.0).q
    g = _grad(cfg, guess, k, qt, en, v, q_ref)
    f = jax.jit(_loss, static_argnums=0)
    for name in ("kt", "R", "armature", "friction_viscous"):
        h = 1e-5 * float(guess[name])
        up = float(f(cfg, {**guess, name: guess[name] + h}, k, qt, en, v, q_ref))
        dn = float(f(cfg, {**guess, name: guess[name] - h}, k, qt, en, v, q_ref))
        fd = (up - dn) / (2 * h)
        assert abs(fd) > 0.0
        assert float(g[name]) == pytest.approx(fd, rel=1e-3), name


# ------------------------------------------------------------------------------------------------
# registry
# ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["m7", "M1", "", "friction"])
def test_unknown_model_lists_every_model(name):
    with pytest.raises(UnknownNameError) as e:
        get_model(name)
    msg = str(e.value)
    assert repr(name) in msg and "\n" not in msg
    for n in list_models():
        assert n in msg
    assert isinstance(e.value, KeyError)


def test_unknown_extension_lists_the_extensions():
    with pytest.raises(UnknownNameError) as e:
        get_model("m4+dealy")
    msg = str(e.value)
    assert "'dealy'" in msg
    for ext in EXTENSIONS:
        assert ext in msg


def test_model_names_are_canonical():
    assert get_model("m4+backlash+delay").name == "m4+delay+backlash"
    assert get_model(" m2 + delay ").name == "m2+delay"
    assert get_model("m6+delay+backlash").compliant and not get_model("m6+delay").compliant
    assert set(get_model("m1").free) == {"kt", "R", "armature", "friction_base", "friction_viscous"}


@pytest.mark.parametrize("outer,inner,expected", [
    ("m2", "m1", True), ("m3", "m1", True), ("m4", "m2", True), ("m4", "m3", True), ("m5", "m4", True),
    ("m6", "m5", True), ("m6", "m3", True), ("m4+delay", "m4", True), ("m4+delay+backlash", "m4+delay", True),
    ("m4", "m5", False), ("m3", "m2", False), ("m2", "m3", False), ("m4", "m4+delay", False),
    ("m4", "m4", False), ("m4+backlash", "m4+compliance", True), ("m4+compliance", "m4+backlash", False),
    ("m1", "m2", False), ("m5+delay", "m4+offset", False),
])
def test_contains_relations(outer, inner, expected):
    assert contains(outer, inner) is expected


def test_parent_chain():
    assert parent_of("m1") is None
    assert parent_of("m4") == "m2" and parent_of("m5") == "m4" and parent_of("m3") == "m1"
    assert parent_of("m4+delay") == "m4" and parent_of("m4+delay+backlash") == "m4+delay"
    for m in ALL_MODELS:
        par = parent_of(m)
        assert par is None or contains(m, par), m


def test_embed_load_friction_into_directional_model_keeps_the_budget():
    """m3's mu |tau_e - tau_m| equals m5's |mu_e tau_e - mu_m tau_m| with mu_e = mu_m = mu."""
    p3 = {**neutral_params(), "friction_base": 0.03, "load_friction": 0.15}
    p5 = embed_params(p3, "m5")
    assert p5["load_friction"] == 0.0 and p5["load_friction_motor"] == p5["load_friction_external"] == 0.15
    rng = np.random.default_rng(0)
    tm, te, dq = rng.uniform(-1, 1, (3, 50))
    np.testing.assert_allclose(np.asarray(_budget(p5, tm, te, dq)), np.asarray(_budget(p3, tm, te, dq)), rtol=1e-12)
    assert embed_params(p3, "m4") == p3


def test_embed_m4_into_m5_keeps_the_budget_moving_and_at_rest():
    """BAM's M5 makes the at-rest load term directional too: m4's mu_s |tau_e - tau_m| is m5's
    |mu_es tau_e - mu_ms tau_m| with mu_es = mu_ms = mu_s, so m5 contains m4 exactly."""
    assert "load_friction_stribeck" not in get_model("m5").free and contains("m5", "m4")
    p4 = {**neutral_params(), "friction_base": 0.03, "friction_stribeck": 0.02, "stribeck_velocity": 0.3,
          "stribeck_alpha": 1.7, "load_friction": 0.15, "load_friction_stribeck": 0.4}
    p5 = embed_params(p4, "m5")
    assert p5["load_friction_stribeck"] == 0.0
    assert p5["load_friction_motor_stribeck"] == p5["load_friction_external_stribeck"] == 0.4
    rng = np.random.default_rng(1)
    tm, te = rng.uniform(-1, 1, (2, 50))
    dq = rng.uniform(-0.5, 0.5, 50)  # around the Stribeck velocity: the at-rest terms matter
    np.testing.assert_allclose(np.asarray(_budget(p5, tm, te, dq)), np.asarray(_budget(p4, tm, te, dq)), rtol=1e-12)
    # and a driving/backdriving asymmetry at rest is something m4 cannot express
    p5b = {**p5, "load_friction_external_stribeck": 0.0}
    assert float(_budget(p5b, 0.0, 0.5, 0.0)) < float(_budget(p5, 0.0, 0.5, 0.0)) - 0.19


# ------------------------------------------------------------------------------------------------
# backlash and compliance (two-body transmission)
# ------------------------------------------------------------------------------------------------


def _two_body_states(p, k, cfg, qt, n):
    step = make_step(cfg)

    def body(s, x):
        s2, _ = step(p, k, s, x)
        return s2, s2

    s0 = State(*[jnp.asarray(0.0, F64)] * 6)
    x = Inputs(qt, jnp.ones(n), jnp.full(n, 7.4))
    _, states = jax.lax.scan(body, s0, x)
    return states


@pytest.mark.parametrize("b", [0.02, 0.06])
def test_backlash_output_waits_until_the_motor_crosses_half_the_dead_band(b):
    """PD effort drive, no gravity, no friction: the motor accelerates at u/J from rest; the output
    stays exactly still until q_m passes b/2 (t = sqrt(b J / u)), then follows."""
    n, u_max, J = 60, 0.05, 0.002
    cfg = StepConfig("pd", "pendulum", True, 4)
    k = pendulum_consts("pd", kp=100.0, kd=0.0, u_max=u_max, gravity=0.0)  # kp*err >> u_max: u = u_max
    p = params_for("m1+backlash", friction_base=0.0, friction_viscous=0.0, backlash=b, stiffness=50.0,
                   armature=J)
    states = jax.jit(_two_body_states, static_argnums=(2, 4))(p, k, cfg, jnp.full(n, 1.0), n)
    s = jax.tree_util.tree_map(np.asarray, states)
    q, qm = s.q, s.qm
    inside = qm <= b / 2
    assert inside[0] and not inside[-1]
    assert np.all(q[inside] == 0.0)
    assert np.all(q >= 0.0) and q[-1] > 0.0
    # free motor inside the band: semi-implicit Euler from rest, N = 4 (k + 1) substeps of h = dt / 4
    h, N = DT / 4, 4 * (np.flatnonzero(inside) + 1)
    np.testing.assert_allclose(qm[inside], u_max / J * h**2 * N * (N + 1) / 2, rtol=1e-9)
    first = int(np.argmax(q > 0.0))
    t_cross = math.sqrt(b * J / u_max)  # continuous time for q_m to reach b/2
    assert t_cross - DT <= (first + 1) * DT <= t_cross + 2 * DT


def test_stiff_two_body_without_backlash_follows_the_rigid_model():
    n = 300
    qt, en, v = jnp.asarray(chirp(n, 0.8)), jnp.ones(n), jnp.full(n, 7.4)
    k = pendulum_consts()
    rigid = _rollout(StepConfig("dynamixel_pwm", "pendulum", False, 4), params_for("m1"), k, qt, en, v, 0.0, 0.0)
    stiff = _rollout(StepConfig("dynamixel_pwm", "pendulum", True, 4),
                     params_for("m1+compliance", stiffness=1e9), k, qt, en, v, 0.0, 0.0)
    qr, qs = np.asarray(rigid.q), np.asarray(stiff.q)
    assert np.ptp(qr) > 0.8
    assert np.abs(qs - qr).max() < 0.005 * np.ptp(qr)
    # a soft spring with a wide dead band is visibly different (the test can tell them apart)
    soft = _rollout(StepConfig("dynamixel_pwm", "pendulum", True, 4),
                    params_for("m1+backlash", backlash=0.1, stiffness=5.0), k, qt, en, v, 0.0, 0.0)
    assert np.abs(np.asarray(soft.q) - qr).max() > 0.05 * np.ptp(qr)


@pytest.mark.parametrize("model", ["g1", "m6"])
def test_a_rigid_spring_without_dead_band_is_the_rigid_transmission(model):
    """The compliant extensions contain their rigid parent: ``+backlash`` at b = 0 with a rigid
    spring replays the parent at the same step, gear-mesh efficiencies (g1) and every
    load-dependent friction term (m6) included, through chirps with reversals, stick phases and a
    torque-off stretch (the load falling on the gearbox). Measured: 2.9e-8 / 1.5e-8 of the motion
    at 1e8 N.m/rad. The explicit step this replaced (spring capped at omega h = 0.5, the rotor
    sticking alone, the mesh loss on the whole motor torque) was off by 4.5 % / 3.5 %."""
    n = 400
    qt, v = jnp.asarray(chirp(n, 0.8)), jnp.full(n, 7.4)
    en = jnp.asarray((np.arange(n) < 300) | (np.arange(n) >= 340), F64)  # torque off for 0.2 s
    k = pendulum_consts()
    rigid = _rollout(StepConfig("dynamixel_pwm", "pendulum", False, 1), params_for(model), k, qt, en, v, 0.0, 0.0)
    child = _rollout(StepConfig("dynamixel_pwm", "pendulum", True, 1),
                     params_for(model + "+backlash", backlash=0.0, stiffness=1e8), k, qt, en, v, 0.0, 0.0)
    qr, qc = np.asarray(rigid.q), np.asarray(child.q)
    assert np.ptp(qr) > 1.0 and np.sum(np.diff(qr) == 0.0) >= 3  # moving, and sticking at times
    assert np.abs(qc - qr).max() < 1e-4 * np.ptp(qr), np.abs(qc - qr).max() / np.ptp(qr)
