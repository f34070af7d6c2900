"""The actuator zoo (synth/zoo*.py): logs pass the repo's checks, each mechanism moves the logs in the
expected direction, friction never adds energy, bad specs are refused by name, and the CLI round trip
synth --suite bench -> fit runs (short logs, 1-2 kHz physics)."""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pytest

from cli_run import run as _cli
from actuatorlab.errors import UnknownNameError
from actuatorlab.logs import load_logs, save_trajectory, validate_trajectory
from actuatorlab.evaluate.replay import replay_batches
from actuatorlab.models.params import neutral_params
from actuatorlab.models.registry import get_model
from actuatorlab.sim.rollout import make_batches
from actuatorlab.synth.zoo import ZOO, ZooError, actuator_from_dict, get_actuator
from actuatorlab.synth.zoo_family import zoo_mechanisms, zoo_params
from actuatorlab.synth.zoo_bench import BenchLog, bench_command, bench_trajectory, run_bench
from actuatorlab.synth.zoo_sim import ZooRun, mechanical_energy, sensor_floor, simulate_zoo


def _with(name: str, group: str, **changes):
    a = get_actuator(name)
    return dataclasses.replace(a, **{group: dataclasses.replace(getattr(a, group), **changes)})


def _run(a, cmd, enable=None, kp=None, h=0.001, mass=None, preroll=0.2):
    kp = a.bench.gains[0] if kp is None else kp
    en = np.ones_like(cmd) if enable is None else enable
    return simulate_zoo(a, ZooRun(cmd, en, kp, a.bench.kd_per_kp * kp, a.bench.mass if mass is None else mass,
                                  physics_dt=h, preroll=preroll), np.random.default_rng(0))


def _lag(t, x, y, f):
    """Phase lag [rad] of y behind x at frequency f [Hz] (projection on the sine and cosine)."""
    w = 2 * np.pi * f
    ph = [math.atan2(np.sum(v * np.cos(w * t)), np.sum(v * np.sin(w * t))) for v in (x - x.mean(), y - y.mean())]
    return (ph[0] - ph[1]) % (2 * np.pi)


@pytest.mark.parametrize("name", list(ZOO))
def test_every_truth_writes_logs_that_pass_the_checks_and_load(name, tmp_path):
    a = get_actuator(name)
    log = BenchLog("sin_sin_x", "train", "sin_sin", a.bench.mass, a.bench.gains[0])
    traj, r = bench_trajectory(a, log, seed=0, index=0, duration=1.0)
    validate_trajectory(traj)
    for k, v in traj.data.items():
        assert np.all(np.isfinite(v)), k
    save_trajectory(traj, tmp_path / traj.name)
    (back,) = load_logs([tmp_path])
    assert back.conditions["excitation"] == "sin_sin" and back.setup.bench["mass"] == a.bench.mass
    assert np.all(np.diff(back.time) > 0)


def test_more_delay_more_phase_lag():
    a = get_actuator("xl330_like")
    t = np.arange(0, 3.0, a.sensors.log_dt)
    cmd = 0.4 * np.sin(2 * np.pi * 1.5 * t)
    lags = []
    for d in (0.0, 0.02, 0.05):
        r = _run(_with("xl330_like", "interface", command_delay=d), cmd, kp=800.0)
        lags.append(_lag(r.time[100:], cmd[100:], r.position[100:], 1.5))
    assert lags[0] < lags[1] < lags[2]


def _dead_band(r):
    """[rad] span of the rotor-to-link angle theta - q: the lost motion the rotor travels when the
    transmitted torque reverses (here where gravity changes sign on a swing through q = 0)."""
    return float(np.ptp(r.theta - r.q))


def test_more_backlash_larger_dead_band_at_reversals():
    a = get_actuator("xl330_like")
    t = np.arange(0, 3.0, a.sensors.log_dt)
    cmd = 0.5 * np.sin(2 * np.pi * 0.7 * t)
    small = _run(_with("xl330_like", "gear", backlash=0.001), cmd, kp=800.0)
    large = _run(_with("xl330_like", "gear", backlash=0.03), cmd, kp=800.0)
    assert _dead_band(small) >= 0.001 and _dead_band(large) >= 0.03
    assert _dead_band(large) - _dead_band(small) > 0.02


def _longest_stuck(r):
    moving = np.abs(np.diff(r.q)) > 1e-6
    best = run = 0
    for m in moving:
        run = 0 if m else run + 1
        best = max(best, run)
    return best


def test_more_stick_slip_friction_longer_stuck_intervals():
    t = np.arange(0, 4.0, 0.005)
    cmd = 0.02 * t  # a slow ramp
    lo = _run(_with("xl330_like", "gear", stribeck=0.0, coulomb=0.01), cmd, kp=200.0)
    hi = _run(_with("xl330_like", "gear", stribeck=0.15, coulomb=0.08), cmd, kp=200.0)
    assert _longest_stuck(hi) > _longest_stuck(lo)


def test_harmonic_drive_is_softer_near_zero_torque():
    a = get_actuator("harmonic_drive")
    g = a.gear
    d = np.array([1e-4, 3e-3])
    k_eff = g.stiffness + 3 * g.stiffness_cubic * d ** 2
    assert k_eff[0] < 0.5 * k_eff[1]
    # in the simulated logs: the deflection per unit of transmitted torque is larger at low torque
    t = np.arange(0, 3.0, a.sensors.log_dt)
    cmd = 1.2 * np.sin(2 * np.pi * 0.3 * t)
    r = _run(_with("harmonic_drive", "gear", hysteresis=0.0, ripple=0.0), cmd, h=0.0005)  # the spring alone
    defl = np.abs(r.theta - r.q)
    tc = np.abs(r.tau_c)
    low, high = (tc > 0.5) & (tc < 2.0), tc > 6.0
    assert np.median(defl[low] / tc[low]) > 1.5 * np.median(defl[high] / tc[high])


def test_bldc_current_loop_bandwidth_sets_torque_rise_time():
    def rise(bw):
        a = _with("bldc_module", "motor", current_bandwidth=bw)
        a = dataclasses.replace(a, interface=dataclasses.replace(a.interface, law="torque", command_delay=0.0),
                                sensors=dataclasses.replace(a.sensors, log_dt=0.0001, jitter=0.0, receive_delay=0.0))
        cmd = np.where(np.arange(300) >= 50, 2.0, 0.0)
        r = _run(a, cmd, h=0.00005, preroll=0.0)
        k0 = np.argmax(r.tau_m > 0.05)
        return int(np.argmax(r.tau_m >= 0.9 * r.tau_m[-1]) - k0)

    assert rise(2 * np.pi * 100) > rise(2 * np.pi * 1000) > 0


@pytest.mark.parametrize("name", list(ZOO))
def test_energy_never_increases_with_torque_disabled(name):
    a = get_actuator(name)
    t = np.arange(0, 2.0, a.sensors.log_dt)
    cmd = np.minimum(t / 0.4, 1.0) * 0.8
    en = (t < 0.6).astype(float)
    r = _run(a, cmd, en, h=0.0005)
    e = mechanical_energy(a, a.bench.mass, r)[t > 0.65]
    rise = np.max(e - np.minimum.accumulate(e))
    assert rise <= 1e-3 * max(e[0], 1e-3) + 1e-6
    assert e[-1] < e[0]


def test_non_physical_parameter_is_refused_by_name():
    d = get_actuator("harmonic_drive").to_dict()
    d["gear"]["rotor_inertia"] = -1e-5
    with pytest.raises(ZooError, match=r"gear\.rotor_inertia"):
        actuator_from_dict(d)
    d = get_actuator("xl330_like").to_dict()
    d["motor"]["R"] = 0.0
    with pytest.raises(ZooError, match=r"motor\.R"):
        actuator_from_dict(d)
    d["motor"]["R"] = float("nan")
    with pytest.raises(ZooError, match=r"motor\.R"):
        actuator_from_dict(d)
    assert actuator_from_dict(get_actuator("bldc_module").to_dict()) == get_actuator("bldc_module")


def test_unknown_name_lists_the_names():
    with pytest.raises(UnknownNameError) as e:
        get_actuator("xl320")
    assert all(n in str(e.value) for n in ZOO)


def test_commands_are_finite_and_lift_and_drop_disables_torque():
    t = np.arange(0, 6.0, 0.005)
    for fam in ("sin_time_square", "sin_sin", "up_and_down", "lift_and_drop", "chirp", "steps", "slow_ramp"):
        q, en = bench_command(fam, t, math.pi / 2, np.random.default_rng(0))
        assert np.all(np.isfinite(q)) and np.max(np.abs(q)) < 3.0
    q, en = bench_command("lift_and_drop", t, math.pi / 2, np.random.default_rng(0))
    assert en[0] == 1.0 and en[-1] == 0.0


def test_bench_suite_is_deterministic_and_split_by_condition(tmp_path):
    s = run_bench("sts3250_like", tmp_path / "a", seed=3, scale=0.01)
    run_bench("sts3250_like", tmp_path / "b", seed=3, scale=0.01)
    assert set(s["splits"]) == {"train", "heldout/excitation", "heldout/load", "heldout/gain"}
    fa = sorted(p.relative_to(tmp_path / "a") for p in (tmp_path / "a").rglob("*.parquet"))
    for rel in fa:
        assert (tmp_path / "a" / rel).read_bytes() == (tmp_path / "b" / rel).read_bytes()
    card = json.loads((tmp_path / "a" / "dataset.json").read_text())
    assert card["truth"]["gear"]["backlash"] == get_actuator("sts3250_like").gear.backlash
    train = load_logs([tmp_path / "a" / "train"])
    assert {tr.conditions["excitation"] for tr in train} == {"sin_time_square", "sin_sin", "up_and_down",
                                                             "lift_and_drop"}
    with pytest.raises(Exception, match="not empty"):
        run_bench("sts3250_like", tmp_path / "a", seed=3, scale=0.01)


def test_cli_bad_actuator_names_and_suite_mismatch(tmp_path):
    r = _cli("synth", "--suite", "bench", "--actuator", "nope", "--out", tmp_path / "x")
    assert r.returncode != 0 and "xl330_like" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    r = _cli("synth", "--suite", "smoke", "--actuator", "xl330_like", "--out", tmp_path / "y")
    assert r.returncode != 0 and "--actuator" in r.stderr
    assert not (tmp_path / "x").exists() and not (tmp_path / "y").exists()


def test_cli_synth_bench_then_fit_m1(tmp_path):
    r = _cli("synth", "--suite", "bench", "--actuator", "xl330_like", "--out", tmp_path / "D", "--scale", "0.01")
    assert r.returncode == 0, r.stderr
    r = _cli("fit", tmp_path / "D" / "train", "--model", "m1", "--budget", "quick", "--out", tmp_path / "run")
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "run" / "model.json").is_file()


def _family_logs(a, duration=2.0):
    """Two training-like logs of ``a`` (sin_sin at the first gain, up_and_down at the last)."""
    logs = [BenchLog("sin_sin_x", "train", "sin_sin", a.bench.mass, a.bench.gains[0]),
            BenchLog("up_and_down_x", "train", "up_and_down", a.bench.mass, a.bench.gains[-1])]
    return [bench_trajectory(a, log, seed=0, index=i, duration=duration) for i, log in enumerate(logs)]


def test_sensor_floor_is_the_quantisation_and_vanishes_with_ideal_sensors():
    a = get_actuator("xl330_family")  # no receive delay, no jitter, the device ticks at the log period
    step = 2 * np.pi / a.sensors.encoder_counts
    floors = [sensor_floor(r) for _, r in _family_logs(a)]
    assert all(0.5 * step / 4 < f < 2 * step / 4 for f in floors)  # uniform rounding error: step / 4
    ideal = dataclasses.replace(a, sensors=dataclasses.replace(a.sensors, encoder_counts=2.0 ** 40))
    assert all(sensor_floor(r) < 1e-9 for _, r in _family_logs(ideal))
    # a reading's age adds to the floor at the timestamps, not to the one at the reading instants
    like = get_actuator("xl330_like")
    (_, r), _ = _family_logs(like)
    assert sensor_floor(r) > 2 * sensor_floor(r, "reading") > 0.0


def test_dataset_card_records_the_sensor_floor_per_log_split_and_pooled(tmp_path):
    s = run_bench("xl330_family", tmp_path / "a", seed=0, scale=0.01)
    card = json.loads((tmp_path / "a" / "dataset.json").read_text())
    f = card["sensor_floor"]
    assert f["unit"] == "rad" and f == s["sensor_floor"]
    assert set(f["splits"]) == set(card["splits"])
    step = 2 * np.pi / 4096
    assert 0.5 * step / 4 < f["pooled"] < 2 * step / 4
    assert all(r["sensor_floor_rad"] > 0 for r in card["logs"])


def _member_mae(a, model, **override):
    """Pooled position MAE [rad] of ``model`` at the truth's parameters replaying logs of ``a``, and the floor."""
    pairs = _family_logs(a)
    p = neutral_params() | {k: v for k, (v, _) in zoo_params(a).items()} | override
    p["current_limit"] = a.motor.current_limit
    res = replay_batches(model, p, make_batches([t for t, _ in pairs]))
    err = np.concatenate([np.abs(r.q_sim - r.q_meas) for r in res])
    floor = float(np.mean(np.concatenate([np.abs(r.position - r.q_stamp) for _, r in pairs])))
    return float(np.mean(err)), floor


@pytest.mark.parametrize("name,drive", [("xl330_family", "voltage"), ("bldc_family", "effort")])
def test_in_family_truth_replayed_by_its_member_reproduces_its_logs_to_the_floor(name, drive):
    a = get_actuator(name)
    assert a.member == "m2+delay" and a.gear.rigid
    mae, floor = _member_mae(a, a.member)
    assert mae < 1.3 * floor
    # the check can fail: without the delay the member is far from the logs
    off, _ = _member_mae(a, a.member, delay=0.0)
    assert off > 3 * floor
    # every mechanism of the truth is a free parameter of its member, every shared parameter too
    free = set(get_model(a.member).free_for(drive))
    assert all(set(ps) & free for ps in zoo_mechanisms(a).values())
    assert set(zoo_params(a)) - {"kt", "R"} <= free


def test_rigid_gear_refuses_mechanisms_it_does_not_have():
    d = get_actuator("xl330_family").to_dict()
    d["gear"]["backlash"] = 0.01
    with pytest.raises(ZooError, match=r"gear\.rigid.*backlash"):
        actuator_from_dict(d)
