"""Mixed robots in the environments (``builtin_joints``): some joints keep MuJoCo's built-in
actuator, the others run an identified model, in one rollout (actuatorlab.envs.actuators.mixed_robot).

The reference for the mixed robot is built independently: the robot's MJCF with only joint1's
actuator replaced by the MuJoCo form of the same fitted model (the one-joint MJCF export, exact for
a frictionless PWM servo), run as an all-builtin environment."""

from __future__ import annotations

import dataclasses

import jax
import numpy as np
import pytest

from actuatorlab.envs import MjxEnv, TimingContract
from actuatorlab.envs.actuators import load_actuator
from actuatorlab.envs.gym_env import NativeBatch
from actuatorlab.errors import ModelError, UnknownNameError
from actuatorlab.robots import load_robot

ROBOT = "open_manipulator_x"
ARM = {"format": "actuatorlab-arm-model", "format_version": "1", "robot": ROBOT, "model": "m1",
       "params": {"kt": 2.478, "R": 5.217, "armature": 0.045, "friction_base": 0.0}}
CONTRACT = TimingContract(decimation=5, action_scale=0.5)
ACTIONS = np.array([[1.0, 1.0, -1.0, 1.0, 0.5], [-1.0, 0.3, 0.5, -0.5, -0.5]] * 3)
OTHERS = ("joint2", "joint3", "joint4", "gripper_left_joint")


def run(env) -> np.ndarray:
    """qpos (steps, nq) after every policy step of ACTIONS, from PRNGKey(0)."""
    env.reset(np.asarray(jax.random.PRNGKey(0))[None])
    out = []
    for a in ACTIONS:
        env.step(a[None])
        out.append(env.arm.qpos[0].copy())
    return np.array(out)


@pytest.fixture(scope="module")
def builtin_q():
    return run(NativeBatch(ROBOT, "builtin", contract=CONTRACT))


@pytest.fixture(scope="module")
def mixed_q():
    return run(NativeBatch(ROBOT, ARM, contract=CONTRACT, builtin_joints=OTHERS))


def test_every_joint_builtin_is_the_builtin_env(builtin_q):
    act = load_actuator(ROBOT, ARM, builtin_joints=load_robot(ROBOT).joint_names)
    assert act.kind == "builtin"
    np.testing.assert_array_equal(run(NativeBatch(ROBOT, ARM, contract=CONTRACT,
                                                  builtin_joints=load_robot(ROBOT).joint_names)), builtin_q)


def test_mixed_robot_keeps_the_builtin_joints_and_models_the_others(tmp_path, builtin_q, mixed_q):
    from actuatorlab.export.mjcf import export_mjcf
    from actuatorlab.export.robot import joint_model_dicts

    env = NativeBatch(ROBOT, ARM, contract=CONTRACT, builtin_joints=OTHERS)
    m, ref_m = env.mj_model, NativeBatch(ROBOT, "builtin").mj_model
    assert env.model_robot.joint_names == ("joint1",) and m.nu == 4
    for j in OTHERS:  # the built-in joints keep the MJCF's joint properties
        dof = m.joint(j).dofadr[0]
        assert m.dof_damping[dof] == ref_m.dof_damping[dof] and m.dof_armature[dof] == ref_m.dof_armature[dof]
        assert m.dof_frictionloss[dof] == ref_m.dof_frictionloss[dof]
    # reference: the MJCF with joint1's actuator replaced by the exported fitted servo, all builtin
    r, models, _ = joint_model_dicts(ARM)
    res = export_mjcf(models["joint1"], tmp_path / "j1.xml", base_xml=r.mjcf_path, joint="joint1")
    ref = run(NativeBatch(dataclasses.replace(load_robot(ROBOT), mjcf_path=str(res.path)), "builtin",
                          contract=CONTRACT))
    err = np.abs(mixed_q - ref).max()
    assert err < 1e-9, err  # measured 5.6e-17
    # and it is neither the all-builtin robot (joint1 differs) nor the all-identified one (the others differ)
    assert np.abs(mixed_q - builtin_q)[:, 0].max() > 0.05
    ident = run(NativeBatch(ROBOT, ARM, contract=CONTRACT))
    assert np.abs(mixed_q - ident)[:, 1:4].max() > 0.05


def test_mixed_mjx_env_agrees_with_the_native_one(mixed_q):
    env = MjxEnv(ROBOT, ARM, contract=CONTRACT, builtin_joints=OTHERS, precision="float64")
    with env.precision_context():
        reset, step = jax.jit(env.reset), jax.jit(env.step)
        s = reset(jax.random.PRNGKey(0))
        q = []
        for a in ACTIONS:
            s = step(s, a)
            q.append(np.asarray(s.arm.qpos))
    err = np.abs(np.array(q) - mixed_q).max()
    assert err < 3e-3, err  # the native-vs-MJX tolerance of tests/test_envs.py; measured 6.1e-5 (finger)


def test_mixed_robot_errors():
    with pytest.raises(UnknownNameError, match="joint9"):
        load_actuator(ROBOT, ARM, builtin_joints=["joint9"])
    with pytest.raises(ModelError, match="twice"):
        load_actuator(ROBOT, ARM, builtin_joints=["joint2", "joint2"])
    from actuatorlab.learned.arm import make_learned_arm
    from actuatorlab.models.features import Normalizer

    r = load_robot(ROBOT)
    lm = make_learned_arm(r, "mlp", channels=r.joint_names[:2], per_channel=("q", "dq"),
                          normalizer=Normalizer(np.zeros(4), np.ones(4)), effort_scale=0.2, residual=True,
                          history=1, key=jax.random.PRNGKey(0), width=4, depth=1, d=4, head_width=4)
    with pytest.raises(ModelError, match="mixed robots take analytic models"):
        load_actuator(r, lm, builtin_joints=["joint3"])
