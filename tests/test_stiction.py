"""Gear-mesh breakaway at rest (``+stiction``): the equation by hand, a resting joint that g1 lets
slip is held, the extra loss fades once the joint slides, the friction torque of the full step
never does positive work, and the extension nests (neutral value = its parent exactly)."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from actuatorlab.models.actuator import Constants, Inputs, State, StepConfig, make_step
from actuatorlab.models.control import DEFAULT_ERROR_GAIN, LawConstants
from actuatorlab.models.friction import friction_budget, stick_slip_torque
from actuatorlab.models.params import neutral_params
from actuatorlab.models.plant import PlantConstants
from actuatorlab.models.registry import contains, get_model, parent_of

F64 = jnp.float64
G1 = dict(friction_base=0.01, mesh_friction_drive=0.1, mesh_friction_back=0.1)


def _p(**over):
    return {k: jnp.asarray(v, F64) for k, v in {**neutral_params(), **G1, **over}.items()}


def test_registry_nests_stiction_on_every_base():
    spec = get_model("g1+stiction")
    assert set(spec.free) - set(get_model("g1").free) == {"mesh_friction_static", "stribeck_velocity"}
    assert contains("g1+stiction", "g1") and contains("g2+stiction", "g2") and parent_of("g1+stiction") == "g1"
    assert not spec.compliant


def test_budget_by_hand_at_rest_and_sliding():
    """F = F_c + eta |tau_g| + s eta_s |tau_g|, s = exp(-(|dq|/v_s)^alpha), tau_g = (1-r) tau_m - r tau_e."""
    tm, te, r = 0.5, -0.3, 0.2
    tg = (1 - r) * tm - r * te
    p = _p(mesh_friction_static=0.3, stribeck_velocity=0.1, stribeck_alpha=2.0)
    for dq in (0.0, 0.05, 0.1, -0.2, 1.0):
        s = math.exp(-((abs(dq) / 0.1 + 1e-9) ** 2.0))
        want = 0.01 + 0.1 * abs(tg) + s * 0.3 * abs(tg)
        assert float(friction_budget(p, tm, te, dq, r)) == pytest.approx(want, rel=1e-9), dq
    # sliding fast: exactly g1's budget; at rest: 4x g1's mesh loss (eta + eta_s = 0.4)
    assert float(friction_budget(p, tm, te, 2.0, r)) == pytest.approx(float(friction_budget(_p(), tm, te, 2.0, r)),
                                                                        rel=1e-12)
    # neutral eta_s = 0 is g1 exactly, at rest too
    assert float(friction_budget(_p(mesh_friction_static=0.0), tm, te, 0.0, r)) == float(
        friction_budget(_p(), tm, te, 0.0, r))


@pytest.mark.parametrize("scale", [0.5, 1.0, 2.0])
def test_breakaway_holds_what_g1_lets_slip_and_grows_with_load(scale):
    """Motor pushing 0.5 N.m up against 0.35 N.m of gravity (x scale), joint at rest, r = 0: net
    0.15 scale. g1 resists 0.01 + 0.1 |tau_g| = 0.01 + 0.05 scale and slips; with eta_s = 0.3 the
    breakaway is 0.01 + 0.2 scale and the joint holds, at every load (it is proportional to it)."""
    tm, te, dt, inertia = 0.5 * scale, -0.35 * scale, 0.005, 0.006
    for p, holds in ((_p(), False), (_p(mesh_friction_static=0.3), True)):
        b = float(friction_budget(p, tm, te, 0.0))
        tau_f = float(stick_slip_torque(inertia, 0.0, tm + te, b, dt))
        dq_new = dt * (tm + te + tau_f) / inertia
        assert (dq_new == 0.0) is holds
        if not holds:
            assert dq_new == pytest.approx(dt * (0.15 * scale - b) / inertia, rel=1e-9)


def _pendulum_step():
    cfg = StepConfig("dynamixel_pwm", "pendulum", False, 1)
    lc = LawConstants(*[jnp.asarray(x, F64) for x in (400.0, 0.0, DEFAULT_ERROR_GAIN.get("dynamixel_pwm", 1.0),
                                                          1.0, 10.0, 1.0, 0.005)])
    k = Constants(lc, PlantConstants(*[jnp.asarray(x, F64) for x in (0.49, 0.1, 0.0, 9.81)]))
    return jax.jit(jax.vmap(make_step(cfg), in_axes=(None, None, 0, 0))), k


def test_step_friction_never_does_positive_work_and_is_odd():
    """Random states of the full one-joint step with g1+stiction (strong breakaway): the friction
    torque opposes the velocity it leaves (tau_f dq' <= 0), and the step is odd-symmetric."""
    step, k = _pendulum_step()
    p = _p(kt=0.4, R=3.5, armature=0.002, mesh_friction_drive=0.2, mesh_friction_back=0.4,
           mesh_friction_static=0.8, stribeck_velocity=0.3)
    rng = np.random.default_rng(3)
    n = 256
    q = rng.uniform(-2, 2, n)
    dq = np.where(rng.uniform(size=n) < 0.3, 0.0, rng.uniform(-3, 3, n))  # many joints at rest
    s = State(*[jnp.asarray(x) for x in (q, dq, q, dq, q + rng.uniform(-0.05, 0.05, n), q)])
    x = Inputs(jnp.asarray(q + rng.uniform(-1, 1, n)), jnp.asarray(np.ones(n)), jnp.full(n, 7.4))
    s1, o1 = step(p, k, s, x)
    power = np.asarray(o1.tau_friction) * np.asarray(s1.dq)
    assert np.all(power <= 1e-12)
    assert np.sum((np.asarray(s1.dq) == 0.0) & (dq == 0.0)) > 10  # some resting joints held
    neg = lambda tree: jax.tree_util.tree_map(lambda a: -a, tree)  # noqa: E731
    s2, o2 = step(p, k, neg(s), x._replace(q_target=-x.q_target))
    for a, b in zip(list(s1) + list(o1), list(s2) + list(o2)):
        if a is None:  # the winding temperature, carried by +thermal models only
            assert b is None
            continue
        np.testing.assert_allclose(np.asarray(b), -np.asarray(a), rtol=1e-12, atol=1e-14)
    # and the breakaway matters: without it, more resting joints start moving
    s0, _ = step(_p(kt=0.4, R=3.5, armature=0.002, mesh_friction_drive=0.2, mesh_friction_back=0.4), k, s, x)
    assert np.sum(np.asarray(s0.dq) == 0.0) < np.sum(np.asarray(s1.dq) == 0.0)
