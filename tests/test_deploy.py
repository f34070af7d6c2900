"""Deployment on virtual hardware (issue 44 item 4): the legged drive truths on the ground, the policy fed
by the robot's sensors only. Physics directions (more delay, backlash or friction: worse joint tracking),
determinism by seed, the observation the env trains on, and the bad inputs named in one line."""

from __future__ import annotations

import dataclasses
import json
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from actuatorlab.errors import ModelError
from actuatorlab.robots.loader import home_qpos, load_robot
from actuatorlab.synth.legged import draw_units
from actuatorlab.synth.legged_ground import GroundConfig, Imu, Readings, simulate_ground
from actuatorlab.policy.deploy import DeployConfig, ObservationBuilder, deploy_policy, load_hardware
from actuatorlab.policy.ppo import ActorCritic, RunningStats
from actuatorlab.policy.train import _save_leaves, default_ppo_config
from actuatorlab.envs import make_policy_env
from actuatorlab.logs.io import load_native

ROBOT = load_robot("anymal_c")
UNITS = draw_units(np.random.default_rng([0, 0]), 12)
HOME = home_qpos(ROBOT.model())
HQ = HOME[ROBOT.qpos_adr]
KFE = [ROBOT.index(f"{leg}_KFE") for leg in ("LF", "RF", "LH", "RH")]
HFE = [ROBOT.index(f"{leg}_HFE") for leg in ("LF", "RF", "LH", "RH")]


def _squat(r: Readings) -> np.ndarray:
    """A 1.5 Hz squat: hips and knees in opposition, +-0.15 rad around the standing pose."""
    t = np.array(HQ)
    s = 0.15 * math.sin(2 * math.pi * 1.5 * r.time)
    t[HFE] += s
    t[KFE] -= 2 * s * np.sign(HQ[KFE])
    return t


def _track(units=UNITS, **cfg) -> dict[str, float]:
    """The squat on the truth: RMS [rad] of the hips' and knees' error against their targets (the static
    sag under the body's weight removed), mean electrical power [W] and |current| [A] after the first 10 ticks."""
    rec = simulate_ground(ROBOT, units, _squat, GroundConfig(ticks=75, settle=0.2, **cfg), np.random.default_rng(1))
    assert not rec.fell and len(rec.time) == 75
    idx = HFE + KFE
    e = rec.q[10:, idx] - rec.target[10:, idx]
    return {"err": float(np.sqrt(np.mean((e - e.mean(0)) ** 2))), "elec": float(np.mean(rec.elec_power[10:])),
            "current": float(np.mean(np.abs(rec.current[10:])))}


def _scaled(group: str, field: str, factor: float):
    return tuple(dataclasses.replace(a, **{group: dataclasses.replace(getattr(a, group), **{
        field: getattr(getattr(a, group), field) * factor})}) for a in UNITS)


def test_standing_on_the_truth_is_deterministic_by_seed_and_physical():
    """Holding the standing pose: the trunk stays up, the knees sag under the weight by about m g l / kp
    (the PD's static error), identical records for one seed, other IMU readings for another."""
    seen = []

    def hold(r: Readings) -> np.ndarray:
        seen.append(np.concatenate([r.gyro, r.gravity]))
        return HQ

    cfg = GroundConfig(ticks=25, settle=0.3)
    a = simulate_ground(ROBOT, UNITS, hold, cfg, np.random.default_rng(3))
    n = len(seen)
    b = simulate_ground(ROBOT, UNITS, hold, cfg, np.random.default_rng(3))
    simulate_ground(ROBOT, UNITS, hold, cfg, np.random.default_rng(4))   # another seed: its IMU readings (seen)
    for f in ("q", "tau", "linvel", "current", "elec_power"):
        np.testing.assert_array_equal(getattr(a, f), getattr(b, f))
    np.testing.assert_array_equal(seen[:n], seen[n:2 * n])
    assert not np.allclose(seen[:n], seen[2 * n:])
    assert not a.fell and np.all(a.base_height > 0.4)
    sag = np.abs(a.q[-1, KFE] - HQ[KFE])
    tau = np.abs(a.tau[-1, KFE])
    assert np.all(tau > 5) and np.allclose(sag, tau / 40.0, rtol=0.3), (sag, tau)   # kp 40 N.m/rad
    assert np.all(a.elec_power > 0) and np.all(np.diff(a.temperature[:, KFE], axis=0) >= -1e-9)


def test_each_extra_effect_of_the_truth_changes_the_result_as_physics_says():
    """On the same squat (measured: error 0.188 rad, 40.6 W): more command delay lags the joints (0.205 rad
    at +30 ms), more backlash too (0.1893 at 8x); more gear friction and a hot winding (R up, kt down)
    cost electrical power (44.2 W at 6x Coulomb, 53.2 W at 60 K above ambient) and current."""
    base = _track()
    assert _track(command_delay_add=0.03)["err"] > 1.05 * base["err"]
    assert _track(units=_scaled("gear", "backlash", 8.0))["err"] > 1.002 * base["err"]
    assert _track(units=_scaled("gear", "coulomb", 6.0))["elec"] > 1.05 * base["elec"]
    hot = _track(temperature0=60.0)
    assert hot["elec"] > 1.2 * base["elec"] and hot["current"] > 1.03 * base["current"]
    assert 0.1 < base["err"] < 0.3 and base["elec"] > 0


def test_ideal_drives_hold_the_pose_with_the_pd_law_and_track_better():
    """drives="ideal_pd" (the diagnostic without the actuator): standing, the applied torque is exactly
    kp x sag (no friction, no spring, no torque loop: the truth's is not, test above)."""
    a = simulate_ground(ROBOT, UNITS, lambda r: HQ, GroundConfig(ticks=25, settle=0.3, drives="ideal_pd"),
                        np.random.default_rng(3))
    sag = a.q[-1, KFE] - HQ[KFE]
    np.testing.assert_allclose(-40.0 * sag, a.tau[-1, KFE], rtol=0.02, atol=0.3)
    with pytest.raises(Exception, match="ideal_pd"):
        GroundConfig(drives="motor")
    with pytest.raises(Exception, match="'full' or 'training'"):
        GroundConfig(scene="mjx")


def test_imu_noise_is_what_the_config_says():
    """Gyro readings of a robot at rest: spread ~ gyro_noise, offset ~ the per-run bias."""
    g = []
    rec = simulate_ground(ROBOT, UNITS, lambda r: (g.append(r.gyro), HQ)[1],
                          GroundConfig(ticks=40, settle=0.3, imu=Imu(gyro_noise=0.05, gyro_bias=0.0)),
                          np.random.default_rng(0))
    g = np.array(g) - rec.angvel[0]
    assert 0.03 < float(np.std(g[5:])) < 0.07


def test_observation_builder_is_the_envs_proprioceptive_observation():
    """The same state read through ObservationBuilder and through the env's reset: equal observations
    (frame, command, history)."""
    pe = make_policy_env("anymal_c", "trot", episode_length=10, config={"observation": "proprioceptive", "history": 2})
    with jax.enable_x64(False):
        s = jax.jit(pe.reset)(jax.random.PRNGKey(5), pe.default_env_params())
    qpos, qvel = np.asarray(s.core.arm.qpos, np.float64), np.asarray(s.core.arm.qvel, np.float64)
    w, x, y, z = qpos[3:7]
    R = np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
                  [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
                  [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)]])
    r = Readings(0.0, qvel[3:6], R.T @ np.array([0, 0, -1.0]), qpos[pe.core.qadr], qvel[pe.core.dadr])
    obs = ObservationBuilder(pe, np.asarray(s.command))(r)
    np.testing.assert_allclose(obs, np.asarray(s.obs), rtol=0, atol=1e-5)
    b = ObservationBuilder(pe, np.zeros(3))
    f0 = b(r)[:42]
    b.last_action = np.full(12, 0.3)
    o1 = b(dataclasses.replace(r, gyro=r.gyro + 1.0))
    np.testing.assert_allclose(o1[45:87], f0, atol=1e-6)        # f_{t-1}
    np.testing.assert_allclose(o1[87:129], f0, atol=1e-6)       # f_{t-2} repeats f_0 after the reset
    np.testing.assert_allclose(o1[30:42], 0.3, atol=1e-6)       # the last action is in the frame


def _random_policy(path, observation="proprioceptive", robot="anymal_c"):
    """A run folder with an untrained policy of the trot task's layout (what train-policy writes)."""
    env_options = {"config": {"observation": observation, **({"history": 2} if observation != "privileged" else {})}}
    pe = make_policy_env("anymal_c", "trot", **env_options)
    cfg = default_ppo_config("anymal_c")
    model = ActorCritic(pe.observation_size, pe.action_size, cfg, jax.random.PRNGKey(0), pe.privileged_size)
    import equinox as eqx

    params, _ = eqx.partition(model, eqx.is_array)
    n = pe.observation_size + pe.privileged_size
    stats = RunningStats(jnp.zeros(n), jnp.ones(n), jnp.ones(()))
    path.mkdir(parents=True)
    _save_leaves(path / "policy.npz", (params, stats))
    (path / "policy.json").write_text(json.dumps({
        "format": "actuatorlab-policy", "version": 1, "robot": robot, "task": "trot", "env_options": env_options,
        "observation_size": pe.observation_size, "action_size": pe.action_size, "ppo": cfg.to_dict(),
        **({"privileged_size": pe.privileged_size} if pe.privileged_size else {})}))
    return path


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    return _random_policy(tmp_path_factory.mktemp("dep") / "run")


def test_deploy_policy_is_deterministic_by_seed_and_writes_its_record(run, tmp_path):
    hw = tmp_path / "hw.json"
    hw.write_text(json.dumps({"format": "actuatorlab-hardware", "robot": "anymal_c", "seed": 0}))
    cfg = DeployConfig(commands=((0.5, 0.0, 0.0),), steps=15, compare=False, settle=0.2)
    a = deploy_policy(run, hw, tmp_path / "a", cfg)
    b = deploy_policy(run, hw, None, cfg)
    c = deploy_policy(run, hw, None, dataclasses.replace(cfg, seed=1))
    assert a["episodes"] == b["episodes"] and a["episodes"] != c["episodes"]
    e = a["episodes"][0]
    assert 10 <= e["steps_run"] <= 15 and e["vel_rmse"] > 0 and e["torque_rms"] > 0
    assert json.loads((tmp_path / "a" / "deploy.json").read_text())["episodes"] == a["episodes"]
    assert a["logs"] == ["logs/cmd00.parquet"]
    with np.load(tmp_path / "a" / "episodes.npz") as z:
        assert z["0/q"].shape == (e["steps_run"], 12)
        q_true = z["0/q"]
    log = load_native(tmp_path / "a" / "logs" / "cmd00.parquet")     # the deployment log (kind b)
    assert log.n == e["steps_run"] and log.setup.extra["base"] == "floating"
    assert {"imu_gyro/z", "imu_gravity/z", "position/LF_KFE", "current/RH_HFE"} <= set(log.data)
    assert not any(k.startswith(("base", "linvel", "qvel")) for k in log.data)
    # the encoder reading at tick k is the truth a tick earlier within a few encoder steps of motion
    assert np.max(np.abs(log.data["position/LF_KFE"][1:] - q_true[:-1, ROBOT.index("LF_KFE")])) < 0.05
    assert log.conditions["split"] == "deployment"


def test_bad_deployments_name_both_sides(run, tmp_path):
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"format": "actuatorlab-hardware", "robot": "open_manipulator_x", "seed": 0}))
    with pytest.raises(ModelError, match=r"anymal_c.*open_manipulator_x"):
        deploy_policy(run, other, None, DeployConfig(steps=2, compare=False))
    priv = _random_policy(tmp_path / "priv", observation="privileged")
    hw = tmp_path / "hw.json"
    hw.write_text(json.dumps({"format": "actuatorlab-hardware", "seed": 0}))
    with pytest.raises(ModelError, match=r"privileged.*48 inputs.*hw.json measures gyro"):
        deploy_policy(priv, hw, None, DeployConfig(steps=2, compare=False))
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"format": "actuatorlab-hardware", "seed": 0, "motors": 3}))
    with pytest.raises(ModelError, match="bad.json: unknown hardware field.*motors"):
        load_hardware(bad)
    bad.write_text(json.dumps({"format": "actuatorlab-hardware", "seed": 0, "dataset": "x"}))
    with pytest.raises(ModelError, match="exactly one of 'seed'"):
        load_hardware(bad)
    bad.write_text(json.dumps({"format": "actuatorlab-hardware", "seed": 0, "imu": {"gyro": 1}}))
    with pytest.raises(ModelError, match="imu.*gyro_noise"):
        load_hardware(bad)


def test_eval_policy_with_hardware_refuses_the_training_env_options(run, tmp_path):
    from actuatorlab.app.policy_jobs import EvalPolicyJob, run_eval_policy_job
    from actuatorlab.errors import ActuatorlabError

    for kw, name in (({"envs": 4}, "--envs"), ({"actuator": "builtin"}, "--actuator"), ({"alpha": 0.5}, "alpha")):
        with pytest.raises(ActuatorlabError, match=f"{name} with --hardware"):
            run_eval_policy_job(EvalPolicyJob(run, hardware=tmp_path, **kw))


def test_a_fit_per_joint_type_loads_into_the_policy_environment():
    """fit --robot anymal_c writes one parameter set per joint type (anydrive@HAA, @HFE, @KFE): the
    environments' actuator takes it, each joint with its type's values."""
    from actuatorlab.envs.actuators import load_actuator

    act = load_actuator("anymal_c", {"model": "m1", "params": {"armature": {"anydrive@HAA": 0.01, "anydrive@HFE": 0.02,
                                                                            "anydrive@KFE": 0.03}}})
    per_joint = act.robot.joint_params(act.params)["armature"]
    want = [{"HAA": 0.01, "HFE": 0.02, "KFE": 0.03}[j.rsplit("_", 1)[-1]] for j in act.robot.joint_names]
    np.testing.assert_allclose(per_joint, want)
    with pytest.raises(ModelError, match="anydrive@XYZ"):
        load_actuator("anymal_c", {"model": "m1", "params": {"armature": {"anydrive@XYZ": 0.01}}})
