"""Model homotopy (sim/homotopy.py) and the ANYmal C trot policy env (envs/locomotion.py).

Compiled functions are module fixtures: one vmapped env step (float32, B = 2), one MJX scan of the
built-in model and one jitted homotopy field map, reused by every test."""

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest

pytest.importorskip("mujoco.mjx")

from actuatorlab.envs import make_policy_env  # noqa: E402
from actuatorlab.envs.actuators import builtin_model  # noqa: E402
from actuatorlab.errors import ActuatorlabError, ModelError, UnknownNameError  # noqa: E402
from actuatorlab.robots import load_robot  # noqa: E402
from actuatorlab.sim.homotopy import BIAS_TOLERANCE, composite_inertia, constant_bias, make_homotopy  # noqa: E402

ALPHAS = (0.0, 0.25, 0.5, 0.75, 1.0)
B = 2


@pytest.fixture(scope="module", autouse=True)
def float32_program():
    """The policy env is float32: run this module as a training program does (JAX's default
    settings, x64 off; the session turns x64 on for the physics tests), restored afterwards."""
    old = bool(jax.config.jax_enable_x64)
    jax.config.update("jax_enable_x64", False)
    yield
    jax.config.update("jax_enable_x64", old)


@pytest.fixture(scope="module")
def native():
    bm = builtin_model(load_robot("anymal_c"), for_mjx=True)
    return bm, make_homotopy(bm)


@pytest.fixture(scope="module")
def fields_fn(native):
    _, h = native
    return jax.jit(jax.vmap(lambda a: h.fields(a)))


@pytest.fixture(scope="module")
def mjx_roll(native):
    from mujoco import mjx

    bm, h = native
    mx = mjx.put_model(bm)
    d0 = mjx.make_data(mx).replace(qpos=jnp.asarray(h.nominal_qpos, jnp.float32),
                                   ctrl=jnp.asarray(bm.key_ctrl[0], jnp.float32))
    d0 = d0.replace(qvel=d0.qvel.at[0].set(0.5))  # a forward push

    @jax.jit
    def roll(upd):
        def body(d, _):
            d = mjx.step(mx.replace(**upd), d)
            return d, d.qpos
        return jax.lax.scan(body, d0, None, length=100)[1]

    updates = jax.jit(lambda a: h.model_updates(a, mx.dof_armature, mx))
    return mx, roll, updates


@pytest.fixture(scope="module")
def env():
    e = make_policy_env("anymal_c", "trot", episode_length=100)
    reset = jax.jit(jax.vmap(e.reset, in_axes=(0, None)))
    step = jax.jit(jax.vmap(e.step, in_axes=(0, 0, None)))
    return e, reset, step


# ------------------------------------------------------------------------------------------------
def test_total_mass_com_and_centroidal_inertia_conserved_along_the_path(native):
    bm, h = native
    M1, c1, J1 = composite_inertia(bm, h.nominal_qpos)
    assert 44.9 < M1 < 45.1
    for a in ALPHAS:
        m = h.native_model(bm, a, constants="stale")
        M, c, J = composite_inertia(m, h.nominal_qpos)
        assert abs(M - M1) < 1e-9 and np.abs(c - c1).max() < 1e-12 and np.abs(J - J1).max() < 1e-9 * np.abs(J1).max()
        legs = m.body_mass[h.legs].sum()
        assert legs == pytest.approx((h.eps + (1 - h.eps) * a) * bm.body_mass[h.legs].sum(), rel=1e-12)
    # alpha = 0: a single rigid body up to the 1 % floor (ANYmal's legs hold ~57 % of the mass)
    m0 = h.native_model(bm, 0.0, constants="stale")
    assert m0.body_mass[h.trunk] / M1 > 0.99 and bm.body_mass[h.legs].sum() / M1 > 0.55


def test_bodies_that_keep_their_own_share_conserve_the_same_invariants(native):
    """``keep``: the feet (shanks) keep all their mass at alpha = 0 while the rest moves into the
    trunk; total mass, CoM and centroidal inertia stay those of the original at every alpha, each
    body's share follows its own floor, the traced path equals the numpy one, and a name that is
    not a leg body or a share outside (0, 1] is a clear error."""
    bm, _ = native
    feet = {n: 1.0 for n in ("LF_SHANK", "RF_SHANK", "LH_SHANK", "RH_SHANK")}
    h = make_homotopy(bm, keep=feet)
    names = [mujoco.mj_id2name(bm, mujoco.mjtObj.mjOBJ_BODY, int(b)) for b in h.legs]
    shank = np.array([n in feet for n in names])
    M1, c1, J1 = composite_inertia(bm, h.nominal_qpos)
    for a in ALPHAS:
        m = h.native_model(bm, a, constants="stale")
        M, c, J = composite_inertia(m, h.nominal_qpos)
        assert abs(M - M1) < 1e-9 and np.abs(c - c1).max() < 1e-12 and np.abs(J - J1).max() < 1e-9 * np.abs(J1).max()
        np.testing.assert_allclose(m.body_mass[h.legs][shank], bm.body_mass[h.legs][shank], rtol=1e-12)
        np.testing.assert_allclose(m.body_mass[h.legs][~shank], (0.01 + 0.99 * a) * bm.body_mass[h.legs][~shank],
                                   rtol=1e-12)
        f32 = jax.tree_util.tree_map(np.asarray, jax.jit(h.fields)(jnp.float32(a)))
        np.testing.assert_allclose(f32["body_mass"], m.body_mass, rtol=1e-6)
    m0 = h.native_model(bm, 0.0, constants="stale")
    assert 0.94 < m0.body_mass[h.trunk] / M1 < 0.95  # the four shanks hold ~5 % of ANYmal C
    with pytest.raises(ActuatorlabError, match="LF_FOOT.*available:.*LF_SHANK"):
        make_homotopy(bm, keep={"LF_FOOT": 1.0})
    with pytest.raises(ModelError, match=r"LF_SHANK.*\(0, 1\]"):
        make_homotopy(bm, keep={"LF_SHANK": 1.5})


def test_inertias_physical_and_traced_fields_match_float64_for_a_grid_of_alphas(native, fields_fn):
    bm, h = native
    grid = np.linspace(0.0, 1.0, 21)
    f = jax.tree_util.tree_map(np.asarray, fields_fn(jnp.asarray(grid, jnp.float32)))
    I = f["body_inertia"][:, 1:].astype(float)  # (A, nbody - 1, 3) principal moments, world excluded
    assert (I > 0).all()
    s = np.sort(I, axis=-1)
    assert (s[..., 0] + s[..., 1] >= s[..., 2] * (1 - 1e-6)).all()  # triangle inequality
    assert np.allclose(np.linalg.norm(f["body_iquat"], axis=-1), 1.0, atol=1e-6)
    for i, a in enumerate(grid):  # float32 traced fields = the float64 numpy path (tensor, not ordering)
        ref = h.fields(float(a), np)
        for b in range(1, bm.nbody):
            def tensor(inertia, quat):
                R = np.zeros(9)
                mujoco.mju_quat2Mat(R, np.asarray(quat, float))
                R = R.reshape(3, 3)
                return R @ np.diag(inertia) @ R.T
            T32, T64 = tensor(f["body_inertia"][i, b], f["body_iquat"][i, b]), tensor(ref["body_inertia"][b],
                                                                                     ref["body_iquat"][b])
            assert np.abs(T32 - T64).max() < 1e-5 * np.abs(T64).max()
        assert np.allclose(f["body_mass"][i], ref["body_mass"], rtol=1e-6)
        assert np.allclose(f["body_ipos"][i], ref["body_ipos"], atol=1e-6)


def test_invweights_recomputed_in_jax_match_mj_setconst(native, mjx_roll):
    bm, h = native
    _, _, updates = mjx_roll
    for a in (0.0, 0.5):
        u = updates(jnp.float32(a))
        fresh = h.native_model(bm, a, constants="fresh")
        for k in ("body_invweight0", "dof_invweight0"):
            ref = getattr(fresh, k)
            assert np.abs(np.asarray(u[k]) - ref.reshape(np.shape(u[k]))).max() < 1e-5 * ref.max()


def test_derived_constant_bias_within_stated_tolerance(native):
    bm, h = native
    for a in (0.0, 0.5):
        b = constant_bias(bm, h, a, seconds=0.5)
        assert b["trunk_pos_m"] <= BIAS_TOLERANCE["trunk_pos_m"] and b["joint_rad"] <= BIAS_TOLERANCE["joint_rad"]
        assert b["trunk_travel_m"] > 0.05  # the rollout does move (pushed, contacts on)
    # keeping the alpha = 1 invweights (contact softness) instead would bias alpha = 0 by centimetres
    assert constant_bias(bm, h, 0.0, seconds=0.5, constants="stale")["trunk_pos_m"] > 0.05


def test_alpha_one_reproduces_the_original_mjx_rollout_and_alpha_zero_matches_native(native, mjx_roll):
    bm, h = native
    mx, roll, updates = mjx_roll
    u1 = updates(jnp.float32(1.0))
    # the original fields, as uncommitted arrays like the updates (a committed array would recompile)
    orig = {k: jnp.asarray(np.asarray(getattr(mx, k)), v.dtype).reshape(v.shape) for k, v in u1.items()}
    q_orig = np.asarray(roll(orig))
    q_one = np.asarray(roll(u1))
    assert np.abs(q_one - q_orig).max() < 1e-4   # float32, 100 steps with contacts (measured 1.1e-6)
    q_zero = np.asarray(roll(updates(jnp.float32(0.0))))
    assert roll._cache_size() == 1
    assert np.abs(q_zero - q_orig).max() > 1e-3  # the homotopy changes the dynamics
    m0 = h.native_model(bm, 0.0, constants="fresh")  # native MuJoCo, masses set, mj_setConst rerun
    d = mujoco.MjData(m0)
    d.qpos[:], d.ctrl[:], d.qvel[0] = h.nominal_qpos, bm.key_ctrl[0], 0.5
    qs = []
    for _ in range(100):
        mujoco.mj_step(m0, d)
        qs.append(d.qpos.copy())
    assert np.abs(q_zero[:, :3] - np.array(qs)[:, :3]).max() < 1e-3  # measured 1.2e-5 m


def test_env_interface_and_no_recompilation_when_alpha_changes(env):
    e, reset, step = env
    keys = jax.random.split(jax.random.PRNGKey(0), B)
    for a in (1.0, 0.3, 0.0):
        p = {"alpha": jnp.float32(a)}
        s = reset(keys, p)
        s = step(s, jnp.zeros((B, e.action_size)), p)
    assert step._cache_size() == 1 and reset._cache_size() == 1
    assert e.observation_size == 48 and e.action_size == 12 and s.obs.shape == (B, 48)
    assert s.obs.dtype == jnp.float32 and s.reward.dtype == jnp.float32 and s.done.dtype == jnp.float32
    for k in ("lin_vel_err_sq", "yaw_rate_err_sq", "tracking_lin_vel", "tracking_ang_vel", "feet_air_time", "trot",
              "torques", "termination", "pose"):
        assert s.metrics[k].shape == (B,) and s.metrics[k].dtype == jnp.float32
    # pose term: weight 0.5 x exp(-weighted squared deviation from home) x dt, at most 0.5 dt, near it one step after reset
    assert ((s.metrics["pose"] > 0.4 * e.dt) & (s.metrics["pose"] <= 0.5 * e.dt + 1e-7)).all()
    assert s.info["truncation"].shape == (B,)
    assert set(e.default_env_params()) == {"alpha"}


@pytest.mark.parametrize("alpha", [1.0, 0.0])
def test_standing_under_a_zero_command_earns_more_than_collapsing(env, alpha):
    e, reset, step = env
    p = {"alpha": jnp.float32(alpha)}
    rets = {}
    policies = {"stand": lambda o: jnp.clip(-4.0 * o[:, 9:21], -1.0, 1.0),   # hold the home posture
                "collapse": lambda o: jnp.ones((B, 12))}
    for name, pol in policies.items():
        s = reset(jax.random.split(jax.random.PRNGKey(1), B), p)
        s = s._replace(command=jnp.zeros((B, 3), jnp.float32))
        ret, alive, err = np.zeros(B), np.ones(B), []
        for _ in range(50):
            s = step(s, pol(s.obs), p)
            ret += alive * np.asarray(s.reward)
            alive *= 1.0 - np.asarray(s.done)
            err.append(np.asarray(s.metrics["lin_vel_err_sq"]))
        rets[name] = (ret, alive, np.asarray(s.core.arm.qpos[:, 2]), np.mean(err[10:], axis=0))
    stand, collapse = rets["stand"], rets["collapse"]
    assert (stand[1] == 1).all() and (stand[2] > 0.4).all()              # upright, never terminated
    assert (collapse[2] < 0.35).all()                                     # the trunk came down
    assert (stand[0] > collapse[0] + 1.0).all()                           # measured ~1.78 vs < 0.2
    assert (stand[3] < 0.01).all()                                        # it tracks (0, 0): |v_xy| < 0.1 m/s


def test_action_scale_option(env):
    e, _, _ = env
    assert e.core.contract.action_scale == 1.0                 # DEFAULT_ACTION_SCALE (docs/locomotion.md)
    assert np.allclose(e.pose_w, [1.0, 1.0, 0.1] * 4)          # hips 1, knees 0.1
    half = make_policy_env("anymal_c", "trot", action_scale=0.5)
    assert half.core.contract.action_scale == 0.5
    from actuatorlab.envs.timing import TimingContract

    with pytest.raises(ModelError, match="action_scale"):
        make_policy_env("anymal_c", "trot", action_scale=0.5, contract=TimingContract(action_scale=0.5))


def test_series_elastic_option_and_float32_guard(env):
    e, _, _ = env
    sea = make_policy_env("anymal_c", "trot", actuator="sea")
    assert sea.core.robot.compliant.all() and not e.core.robot.compliant.any()
    assert np.allclose(sea.core.params0["stiffness"], 200.0)
    with jax.enable_x64(True), pytest.raises(ModelError, match="float32"):
        e.reset(jax.random.PRNGKey(0), e.default_env_params())


def test_reset_on_a_fixed_command_shows_it_in_the_first_observation(env):
    e, reset, _ = env
    p = e.default_env_params()
    keys = jax.random.split(jax.random.PRNGKey(2), B)
    c = jnp.array([[0.5, -0.2, 0.3], [0.0, 0.0, 0.0]], jnp.float32)
    s = jax.jit(jax.vmap(lambda k, cc: e.reset(k, p, command=cc)))(keys, c)
    r = reset(keys, p)
    np.testing.assert_array_equal(np.asarray(s.command), np.asarray(c))
    np.testing.assert_allclose(np.asarray(s.obs[:, 45:48]), np.asarray(c) * [2.0, 2.0, 0.25], rtol=0, atol=1e-7)
    assert not np.allclose(np.asarray(r.command), np.asarray(c))              # sampled otherwise
    np.testing.assert_array_equal(np.asarray(s.obs[:, :45]), np.asarray(r.obs[:, :45]))   # same random stream


def test_bad_robot_task_actuator_and_model_names_give_clear_errors():
    with pytest.raises(ModelError, match="anymal_c"):
        make_policy_env("spot", "trot")
    with pytest.raises(ModelError, match="trot"):
        make_policy_env("anymal_c", "backflip")
    with pytest.raises(ActuatorlabError, match="builtin.*nominal.*sea"):
        make_policy_env("anymal_c", "trot", actuator="anydrive9")
    with pytest.raises(ModelError, match="divide"):
        make_policy_env("anymal_c", "trot", physics_dt=0.003)
    with pytest.raises(ModelError, match="free joint"):
        make_homotopy(load_robot("open_manipulator_x").model())
    with pytest.raises(ModelError, match="eps"):
        make_homotopy(builtin_model(load_robot("anymal_c")), eps=0.0)


def test_proprioceptive_observation_hides_the_trunk_velocity_and_stacks_its_history(env):
    """observation='proprioceptive', history 2: the actor sees [f_t, command, f_{t-1}, f_{t-2}]
    (f: gyro, gravity, joint positions and velocities, last action; no trunk linear velocity), the
    critic the true trunk velocity and the feet's contacts (privileged, 7). Same random stream as
    the privileged observation, whose entries 3..44 are the frame."""
    e, reset, _ = env
    pe = make_policy_env("anymal_c", "trot", episode_length=100, config={"observation": "proprioceptive", "history": 2})
    assert pe.observation_size == 3 * 42 + 3 and pe.privileged_size == 7 and e.privileged_size == 0
    p = pe.default_env_params()
    keys = jax.random.split(jax.random.PRNGKey(3), B)
    s0 = jax.jit(jax.vmap(pe.reset, in_axes=(0, None)))(keys, p)
    r = reset(keys, p)
    o0 = np.asarray(s0.obs)
    np.testing.assert_array_equal(o0[:, :42], np.asarray(r.obs[:, 3:45]))      # the frame, without v_b
    np.testing.assert_array_equal(o0[:, 42:45], np.asarray(r.obs[:, 45:48]))    # the command
    np.testing.assert_array_equal(o0[:, 45:87], o0[:, :42])                     # history after a reset
    np.testing.assert_array_equal(o0[:, 87:129], o0[:, :42])
    np.testing.assert_allclose(np.asarray(s0.privileged[:, :3]), np.asarray(r.obs[:, :3]), rtol=0, atol=1e-6)
    step = jax.jit(jax.vmap(pe.step, in_axes=(0, 0, None)))
    s1 = step(s0, jnp.full((B, 12), 0.3, jnp.float32), p)
    s2 = step(s1, jnp.full((B, 12), -0.3, jnp.float32), p)
    o1, o2 = np.asarray(s1.obs), np.asarray(s2.obs)
    np.testing.assert_array_equal(o2[:, 45:87], o1[:, :42])                     # f_{t-1}
    np.testing.assert_array_equal(o2[:, 87:129], o1[:, 45:87])                  # f_{t-2}
    assert not np.allclose(o2[:, :42], o1[:, :42])
    np.testing.assert_allclose(o2[:, 30:42], -0.3)                               # the last action is in the frame
    assert s2.privileged.shape == (B, 7) and set(np.unique(np.asarray(s2.privileged[:, 3:]))) <= {0.0, 1.0}
    with pytest.raises(UnknownNameError, match="proprioceptive"):
        make_policy_env("anymal_c", "trot", config={"observation": "camera"})
    with pytest.raises(ModelError, match="history"):
        make_policy_env("anymal_c", "trot", config={"history": 2})


def test_mjcf_option_swaps_only_the_contact_model(env, tmp_path):
    """``mjcf``: the hardware-contact scene (elliptic cones, condim-6 feet) is the same robot: joints, feet,
    masses identical; only the foot contact differs. A missing file names where it was looked for."""
    e, _, _ = env
    ell = make_policy_env("anymal_c", "trot", mjcf="scene_mjx_elliptic.xml")
    m0, m1 = e.core.mj_model, ell.core.mj_model
    assert m0.opt.cone == mujoco.mjtCone.mjCONE_PYRAMIDAL and m1.opt.cone == mujoco.mjtCone.mjCONE_ELLIPTIC
    assert (m0.geom_condim[e.foot_geoms] == 3).all() and (m1.geom_condim[ell.foot_geoms] == 6).all()
    assert (m0.nq, m0.nv, m0.ngeom) == (m1.nq, m1.nv, m1.ngeom)
    assert np.array_equal(e.foot_geoms, ell.foot_geoms) and np.allclose(m0.body_mass, m1.body_mass)
    assert np.allclose(m0.geom_friction, m1.geom_friction) and m0.opt.impratio == m1.opt.impratio == 100
    with pytest.raises(ModelError, match="nowhere.xml.*looked beside"):
        make_policy_env("anymal_c", "trot", mjcf=str(tmp_path / "nowhere.xml"))
