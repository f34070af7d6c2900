"""MJX's Warp implementation as the environments' physics (``impl="warp"``, sim/arm.py ``_WarpPhysics``):
the sparse mass-matrix layout it reads, the errors that name what is missing, and, where MuJoCo Warp is
installed (the ``warp`` extra; not in CI), the trot environment on Warp against the same environment on
JAX's implementation."""

from __future__ import annotations

import mujoco
import numpy as np
import pytest

from actuatorlab.envs.core import EnvSpec
from actuatorlab.errors import ModelError
from actuatorlab.robots import load_robot
from actuatorlab.sim import mjx_module
from actuatorlab.sim.arm import IMPLS, _mjx_physics, put_mjx_model


def test_the_warp_physics_reads_mujocos_sparse_mass_matrix_as_the_dense_one():
    """Warp hands the mass matrix over as MuJoCo's sparse lower triangle (d.M); the index arrays the
    Warp physics builds must scatter it into mj_fullM's matrix and pick its diagonal, at a pose where
    the legs couple (off-diagonal entries non-zero)."""
    robot = load_robot("anymal_c")
    m = robot.model(for_mjx=True)
    phys = _mjx_physics(robot, m, None, None, "warp")
    d = mujoco.MjData(m)
    rng = np.random.default_rng(0)
    d.qpos[:] = m.qpos0
    d.qpos[7:] += rng.uniform(-0.5, 0.5, m.nq - 7)
    mujoco.mj_forward(m, d)
    full = np.zeros((m.nv, m.nv))
    mujoco.mj_fullM(m, d, full)
    dense = np.zeros((m.nv, m.nv))
    dense[phys.rows, phys.cols] = d.M
    dense[phys.cols, phys.rows] = d.M
    assert np.abs(full[np.tril_indices(m.nv, -1)]).max() > 1e-2     # coupled: the test can see a transposition
    np.testing.assert_allclose(dense, full, rtol=0, atol=1e-12)
    np.testing.assert_allclose(d.M[phys.diag], np.diag(full), rtol=0, atol=1e-12)
    assert phys.compliant == bool(robot.compliant.any())


def test_an_unknown_or_missing_mjx_implementation_is_named(monkeypatch):
    m = load_robot("anymal_c").model(for_mjx=True)
    with pytest.raises(ModelError, match=r"'cuda' unknown; known: jax, warp"):
        put_mjx_model(m, "cuda")
    mjx_module.mjx()
    import mujoco.mjx.warp as mjx_warp

    monkeypatch.setattr(mjx_warp, "WARP_INSTALLED", False)
    with pytest.raises(ModelError, match=r"needs MuJoCo Warp: install the warp-lang package"):
        put_mjx_model(m, "warp")
    with pytest.raises(ModelError, match=r"impl must be one of jax, warp .* got 'warp' with backend 'native'"):
        EnvSpec("anymal_c", backend="native", impl="warp")
    with pytest.raises(ModelError, match=r"got 'warp' with backend 'mjx' in float64"):   # Warp computes in float32
        EnvSpec("anymal_c", impl="warp", precision="float64")
    with pytest.raises(ModelError, match=r"worlds must be a whole number >= 1, got 0"):
        EnvSpec("anymal_c", impl="warp", worlds=0)
    assert IMPLS == ("jax", "warp")


def test_the_warp_physics_senses_what_the_jax_physics_senses():
    """One state (legs bent, every joint moving), sensed by both physics (compliant: the load inertia
    from the whole mass matrix too): positions, velocities, M's diagonal, the load inertias and the
    smooth joint torques agree to float32 rounding."""
    pytest.importorskip("warp")
    import dataclasses

    import jax
    import jax.numpy as jnp

    from actuatorlab.sim.arm import make_mjx_data

    robot = load_robot("anymal_c")
    m = robot.model(for_mjx=True)
    rng = np.random.default_rng(0)
    qpos = m.qpos0.copy()
    qpos[7:] += rng.uniform(-0.4, 0.4, m.nq - 7)
    qvel = rng.normal(0.0, 0.5, m.nv)
    sensed = {}
    with jax.enable_x64(False):
        for impl in IMPLS:
            mx = put_mjx_model(m, impl)
            template = make_mjx_data(m, mx, 1)
            phys = dataclasses.replace(_mjx_physics(robot, m, template, mjx_module.mjx(), impl), compliant=True)
            d = template.replace(qpos=jnp.asarray(qpos, jnp.float32), qvel=jnp.asarray(qvel, jnp.float32))
            sensed[impl] = jax.tree.map(np.asarray, jax.jit(phys.sense)(mx, d)[1])
    assert np.abs(sensed["jax"].tau_smooth).max() > 1.0          # gravity and Coriolis terms are there to compare
    for field in sensed["jax"]._fields:
        np.testing.assert_allclose(getattr(sensed["warp"], field), getattr(sensed["jax"], field), rtol=1e-4,
                                   atol=1e-4, err_msg=field)


def test_the_trot_env_on_warp_follows_the_same_env_on_jax():
    """The same trot environment (series-elastic drives, no randomization) on both implementations, from
    the same reset, under the same actions: the trunk and joints stay together to float32 rounding over
    10 policy steps (100 physics steps with contacts)."""
    pytest.importorskip("warp")
    import jax
    import jax.numpy as jnp

    from actuatorlab.envs import make_policy_env

    with jax.enable_x64(False):
        envs = {impl: make_policy_env("anymal_c", "trot", actuator="sea", impl=impl) for impl in IMPLS}
        p = {"alpha": jnp.float32(1.0)}
        keys = jax.random.split(jax.random.PRNGKey(0), 2)
        acts = jnp.asarray(np.random.default_rng(0).uniform(-0.3, 0.3, (10, 2, 12)), jnp.float32)
        qpos = {}
        for impl, env in envs.items():
            s = jax.vmap(env.reset, in_axes=(0, None))(keys, p)
            step = jax.jit(jax.vmap(env.step, in_axes=(0, 0, None)))
            for a in acts:
                s = step(s, a, p)
            qpos[impl] = np.asarray(s.core.arm.qpos)
    moved = np.abs(qpos["jax"][:, 7:] - np.asarray(envs["jax"].core.home[7:])).max()
    assert moved > 0.05                                      # the legs moved: the comparison is not at rest
    np.testing.assert_allclose(qpos["warp"], qpos["jax"], atol=2e-3)
