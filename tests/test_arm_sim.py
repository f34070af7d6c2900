"""Robot rollouts: MJX and native MuJoCo agree, MJX gradients match finite differences, friction
never adds energy, joints are found by name, and the timing features (delay line, target modes,
truncated windows) do what they say.

Compiling MJX's forward + backward pass on CPU takes about a minute, so one function is compiled
for the whole file (jit(vmap(value_and_grad)) on a batch of two) and reused by the equivalence and
gradient tests; a persistent compilation cache in the system temp dir makes reruns fast.
"""

from __future__ import annotations

import gc
import json
import weakref

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest

from actuatorlab.models.actuator import drive_effort
from actuatorlab.models.control import CONTROL_LAWS, LawConstants
from actuatorlab.models.friction import friction_budget, stick_slip_torque
from actuatorlab.models.motor import dc_motor_current
from actuatorlab.models.params import PARAMS
from actuatorlab.robots import CONFIG_DIR, load_robot
from actuatorlab.sim.arm import ArmConfig, initial_state, make_inputs, make_mjx_rollout, mjx_model
from actuatorlab.sim import arm_native
from actuatorlab.sim.arm_native import native_model, rollout_native
from actuatorlab.sim.arm_windows import CURRICULUM, curriculum, make_windows, window_loss

T = 100  # control steps (1 s on the OpenManipulator-X, 500 physics steps)
LINK = "link4"  # body whose mass the gradient test differentiates


@pytest.fixture(scope="module")
def omx():
    return load_robot("open_manipulator_x")


def _targets(r, T, scale=1.0):
    t = np.arange(T) * r.control_dt
    q0 = np.array([0.0, -0.3, 0.4, 0.2, 0.005])
    return q0, q0 + scale * np.outer(np.sin(2 * np.pi * t), [0.5, 0.4, -0.3, 0.6, 0.008])


@pytest.fixture(scope="module")
def scenario(omx):
    """Two arms of a batch: a 1 Hz sine on every joint and a smaller one from another pose."""
    q0a, qta = _targets(omx, T)
    q0b, qtb = _targets(omx, T, 0.5)
    shift = np.array([0.1, 0.1, 0.1, 0.1, 0.0])  # the finger stays inside its 3 cm range
    s0 = [initial_state(omx, q=q) for q in (q0a, q0b + shift)]
    return dict(qt=np.stack([qta, qtb + shift]), s0=jax.tree.map(lambda *v: np.stack(v), *s0))


@pytest.fixture(scope="module")
def compiled(omx, scenario):
    """jit(vmap(value_and_grad)) of the tracking loss w.r.t. (parameters, targets, link mass)."""
    pytest.importorskip("mujoco.mjx", reason="mujoco-mjx is not installed")
    mx = mjx_model(omx)
    roll = make_mjx_rollout(omx, mx=mx)
    ib = mujoco.mj_name2id(omx.model(), mujoco.mjtObj.mjOBJ_BODY, LINK)
    base = make_inputs(omx, scenario["qt"][0])

    def loss(p, qt, mass, s0):
        x = base._replace(q_target=qt)
        state, out = roll(p, x, s0, {"body_mass": mx.body_mass.at[ib].set(mass)})
        return jnp.mean((out.q - qt) ** 2), (state, out)

    f = jax.jit(jax.vmap(jax.value_and_grad(loss, argnums=(0, 1, 2), has_aux=True), in_axes=(None, 0, None, 0)))
    p = {k: jnp.asarray(v) for k, v in omx.nominal_params().items()}
    mass = float(mx.body_mass[ib])
    return dict(f=f, p=p, mass=mass, ib=ib, result=f(p, jnp.asarray(scenario["qt"]), mass, scenario["s0"]))


def test_mjx_matches_native(omx, scenario, compiled):
    """Same robot, inputs and parameters: the two paths agree to round-off over 100 control steps."""
    (_, (state_j, out_j)), _ = compiled["result"]
    x = make_inputs(omx, scenario["qt"])
    state_n, out_n = rollout_native(omx, omx.nominal_params(), x, scenario["s0"])
    err = {k: float(np.abs(np.asarray(getattr(out_j, k)) - getattr(out_n, k)).max()) for k in out_n._fields}
    assert err["q"] < 1e-9 and err["qpos"] < 1e-9  # [rad | m]
    assert err["dq"] < 1e-6 and err["qvel"] < 1e-6  # [rad/s | m/s]
    assert err["u"] < 1e-6  # [V]
    assert max(err["tau_motor"], err["tau_friction"], err["tau_ext"]) < 1e-5  # [N.m | N]
    assert np.abs(np.asarray(state_j.qpos) - state_n.qpos).max() < 1e-9
    # the rollout is not trivial: the arm moves and friction works
    assert np.ptp(out_n.q[0, :, 1]) > 0.3 and np.abs(out_n.tau_friction).max() > 0.01


def _fd(compiled, scenario, b, p=None, qt=None, mass=None):
    f = compiled["f"]
    (val, _), _ = f(compiled["p"] if p is None else p, jnp.asarray(scenario["qt"] if qt is None else qt),
                    compiled["mass"] if mass is None else mass, scenario["s0"])
    return float(val[b])


@pytest.mark.parametrize("b", [0, 1])
def test_gradients_match_central_differences(omx, scenario, compiled, b):
    """d loss / d kt (an actuator parameter), / d q_target[k, j] (a per-step input) and
    / d m_link4 (a robot parameter) from jax.grad through MJX vs central differences."""
    (_, _), (g_p, g_qt, g_m) = compiled["result"]
    p0, qt0, m0 = compiled["p"], scenario["qt"], compiled["mass"]

    def central(plus: dict, minus: dict, step: float) -> float:
        return (_fd(compiled, scenario, b, **plus) - _fd(compiled, scenario, b, **minus)) / (2 * step)

    k, j, e = 20, 1, 1e-6  # control step, joint, [rad] / [kg] perturbation
    qp, qm = qt0.copy(), qt0.copy()
    qp[:, k, j] += e
    qm[:, k, j] -= e
    rel = 1e-5
    checks = [
        (float(g_p["kt"][b, 0]), central({"p": {**p0, "kt": p0["kt"] * (1 + rel)}},
                                         {"p": {**p0, "kt": p0["kt"] * (1 - rel)}}, rel * float(p0["kt"][0]))),
        (float(g_qt[b, k, j]), central({"qt": qp}, {"qt": qm}, e)),
        (float(g_m[b]), central({"mass": m0 + e}, {"mass": m0 - e}, e)),
    ]
    for ad, fd in checks:
        assert abs(fd) > 1e-6  # the derivative is not trivially zero
        assert ad == pytest.approx(fd, rel=1e-6)  # measured 3e-10 .. 1e-8
    assert all(np.all(np.isfinite(np.asarray(v))) for v in jax.tree.leaves((g_p, g_qt, g_m)))


def test_numpy_namespace_computes_the_same_equations():
    """The model functions both backends step with give the same numbers with ``xp=numpy`` as with
    jax.numpy, and really NumPy arrays."""
    rng = np.random.default_rng(0)
    n = 64
    p = {k: rng.uniform(0.05, 1.0, n) for k in PARAMS}  # every mechanism on
    p["stribeck_alpha"] = rng.uniform(1, 3, n)
    tm, te, dq, inertia = rng.normal(0, 2, n), rng.normal(0, 2, n), rng.normal(0, 3, n), rng.uniform(0.01, 1, n)
    lc = LawConstants(*rng.uniform(0.1, 10, (7, n)))
    np.testing.assert_allclose(friction_budget(p, tm, te, dq, 0.3, xp=np),
                               np.asarray(friction_budget(p, tm, te, dq, 0.3)), rtol=1e-12)
    np.testing.assert_allclose(stick_slip_torque(inertia, dq, tm, np.abs(te), 0.002, xp=np),
                               np.asarray(stick_slip_torque(inertia, dq, tm, np.abs(te), 0.002)), rtol=1e-12)
    for d in ("voltage", "current", "effort"):
        a = (p, lc, tm, dq, np.ones(n))
        np.testing.assert_allclose(drive_effort(d, *a, xp=np), np.asarray(drive_effort(d, *a)), rtol=1e-12)
    np.testing.assert_allclose(dc_motor_current(p, tm, dq, 1.0, xp=np), np.asarray(dc_motor_current(p, tm, dq, 1.0)),
                               rtol=1e-12)
    for name, law in CONTROL_LAWS.items():
        a = (lc, p, tm, te, dq, inertia, dq, 12.0)
        np.testing.assert_allclose(law.fn(*a, xp=np), np.asarray(law.fn(*a)), rtol=1e-12)
        assert isinstance(law.fn(*a, xp=np), np.ndarray)  # really NumPy, not jax


def _energy(m, qpos, qvel):
    m.opt.enableflags |= mujoco.mjtEnableBit.mjENBL_ENERGY
    d = mujoco.MjData(m)
    out = []
    for a, b in zip(qpos, qvel):
        d.qpos[:], d.qvel[:] = a, b
        mujoco.mj_forward(m, d)
        out.append(d.energy.sum())
    return np.array(out)


def test_friction_never_adds_energy(omx):
    """A free arm (torque disabled: no motor, no back-EMF) falls from rest under gravity for 0.4 s
    (joint limits not reached): with friction its mechanical energy (potential + kinetic, rotor
    inertia included) decreases at every physics step."""
    cfg = ArmConfig.from_robot(omx, substeps=1)
    q0 = np.array([0.3, 0.6, -0.6, 0.5, 0.005])
    x = make_inputs(omx, np.tile(q0, (200, 1)), enable=0.0)
    s0 = initial_state(omx, cfg, q=q0)
    p = omx.nominal_params()
    m = native_model(omx, p)
    _, out = rollout_native(omx, p, x, s0, cfg, model=m)
    E = _energy(m, out.qpos, out.qvel)
    assert np.diff(E).max() <= 1e-12  # [J] never increases
    assert E[0] - E[-1] > 0.05  # [J] and friction takes a real share of it
    assert np.abs(out.q[:, :4] - out.q[0, :4]).max() > 0.3  # the arm did fall
    no_friction = {**p, "friction_base": 0 * p["friction_base"], "load_friction": 0 * p["load_friction"]}
    _, out0 = rollout_native(omx, no_friction, x, s0, cfg, model=m)
    E0 = _energy(m, out0.qpos, out0.qvel)
    assert abs(E0[-1] - E0[0]) < 0.05 * (E[0] - E[-1])  # without friction it is kept (0.003 J)


def test_joint_order_in_the_config_does_not_matter(tmp_path, omx):
    cfg = json.loads((CONFIG_DIR / "open_manipulator_x.json").read_text())
    cfg["joints"] = dict(reversed(list(cfg["joints"].items())))
    cfg["mjcf"] = str((CONFIG_DIR / cfg["mjcf"]).resolve())
    (tmp_path / "rev.json").write_text(json.dumps(cfg))
    rev = load_robot(tmp_path / "rev.json")
    assert rev.joint_names == tuple(reversed(omx.joint_names))
    q0, qt = _targets(omx, 40)
    perm = [omx.index(n) for n in rev.joint_names]
    _, a = rollout_native(omx, omx.nominal_params(), make_inputs(omx, qt), initial_state(omx, q=q0))
    _, b = rollout_native(rev, rev.nominal_params(), make_inputs(rev, qt[:, perm]), initial_state(rev, q=q0[perm]))
    for k in ("q", "dq", "u", "tau_motor", "tau_friction"):
        np.testing.assert_allclose(getattr(b, k), getattr(a, k)[:, perm], rtol=0, atol=1e-12)
    np.testing.assert_allclose(b.qpos, a.qpos, rtol=0, atol=1e-12)


def _zero_gravity(robot, p):
    m = native_model(robot, p)
    m.opt.gravity[:] = 0.0
    return m


def test_command_delay_shifts_the_response():
    """A delay of two control periods (SO-101's model has a delay line) delays the whole response
    by exactly two periods when the arm starts at rest (no gravity: rest is an equilibrium)."""
    r = load_robot("so101")
    q0 = np.zeros(r.n_joints)
    qt = np.zeros((30, r.n_joints))
    qt[3:] = 0.2
    x, s0 = make_inputs(r, qt), initial_state(r, q=q0)
    p0 = {**r.nominal_params(), "delay": np.zeros(1)}
    p2 = {**p0, "delay": np.full(1, 2 * r.control_dt)}
    _, a = rollout_native(r, p0, x, s0, model=_zero_gravity(r, p0))
    _, b = rollout_native(r, p2, x, s0, model=_zero_gravity(r, p2))
    assert np.abs(a.q[-1] - 0.2).max() < 0.05  # it moved
    np.testing.assert_allclose(b.q[2:], a.q[:-2], rtol=0, atol=1e-12)
    np.testing.assert_allclose(b.q[:5], 0.0, atol=1e-12)


def test_target_modes_order_the_response(omx):
    """After a target step, hold reacts first, a linear ramp over the period later, a first-order
    filter (tau = 3 periods) last; all converge."""
    q0 = np.array([0.0, 0.0, 0.0, 0.0, 0.0])
    qt = np.tile(q0 + [0.3, 0.0, 0.0, 0.0, 0.0], (80, 1))
    moved = {}
    for mode in ("hold", "linear", "filter"):
        cfg = ArmConfig.from_robot(omx, target=mode, target_tau=3 * omx.control_dt)
        p = omx.nominal_params()
        _, out = rollout_native(omx, p, make_inputs(omx, qt), initial_state(omx, cfg, q=q0), cfg,
                                model=_zero_gravity(omx, p))
        moved[mode] = out.q[1:4, 0]
        assert abs(out.q[-1, 0] - 0.3) < 0.02
    assert np.all(moved["hold"] > moved["linear"]) and np.all(moved["linear"] > moved["filter"])


def test_windows_restart_from_measured_states(omx):
    """Windows cut from a rollout and restarted from its states reproduce it (loss ~ 0 at the true
    parameters, large with a wrong kt); the curriculum has the documented lengths."""
    q0, qt = _targets(omx, 100)
    x = make_inputs(omx, qt)
    p = omx.nominal_params()
    _, log = rollout_native(omx, p, x, initial_state(omx, q=q0))
    w = make_windows(omx, log.q, log.dq, x, 32)
    assert list(w.start) == [0, 32, 64, 96] and w.mask.sum() == 100
    np.testing.assert_allclose(w.state0.qpos[1], log.qpos[32], atol=1e-5)  # finger from the (soft) equality

    def batch(params, inputs, state, updates):
        return rollout_native(omx, params, inputs, state, model_updates=updates)

    good = float(window_loss(batch, p, w))
    bad = float(window_loss(batch, {**p, "kt": p["kt"] * 1.3}, w))
    assert good < 1e-10 and bad > 1e4 * good
    stages = curriculum(omx, log.q, log.dq, x, lengths=(16, 32, 64))
    assert [s.inputs.q_target.shape[1] for s in stages] == [16, 32, 64]
    assert CURRICULUM == (128, 256, 320)


def test_native_rollouts_with_their_own_models_do_not_keep_them_alive(omx):
    """The pooled MjData hold their model: the pool must let old models go (it once kept every
    model a rollout built, about 160 MB per call), and a reused model gives the same result."""
    cfg = ArmConfig.from_robot(omx, substeps=1)
    q0 = np.array([0.3, 0.6, -0.6, 0.5, 0.005])
    x = make_inputs(omx, np.tile(q0, (5, 1)))
    s0 = initial_state(omx, cfg, q=q0)
    p = omx.nominal_params()
    first = native_model(omx, p)
    ref = weakref.ref(first)
    _, out_a = rollout_native(omx, p, x, s0, cfg, model=first)
    _, out_b = rollout_native(omx, p, x, s0, cfg, model=first)  # pooled MjData, reset
    np.testing.assert_array_equal(out_a.qpos, out_b.qpos)
    del first
    for _ in range(arm_native._POOL_MODELS + 1):
        rollout_native(omx, p, x, s0, cfg, model=native_model(omx, p))
    gc.collect()
    assert ref() is None and len(arm_native._POOL) <= arm_native._POOL_MODELS
