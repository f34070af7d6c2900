"""The fit's diagnosis (evaluate/diagnose.py): the sensor floor read from the logs themselves, the
structure test of the replay residual, and the warning of `fit` (issue 43 item 3): it fires on a
truth outside the family and stays silent on logs made by the fitted model itself."""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pytest

from cli_run import run as _cli
from actuatorlab.evaluate import LogResult
from actuatorlab.evaluate.diagnose import DiagnoseConfig, diagnose, lattice_step, log_floor, structure_tests
from actuatorlab.evaluate.replay import replay_batches
from actuatorlab.identify.fit import fit_model
from actuatorlab.models.params import neutral_params
from actuatorlab.sim.rollout import make_batches
from synthetic import ENCODER_STEP, TRUTH_M1, make_trajectory, synthetic_set, xl330_setup


def _log(step: float, jitter: float, noise: float = 0.0, *, dt: float = 0.005, n: int = 4000, seed: int = 0,
         f: float = 0.7, amplitude: float = 1.0):
    """A sine of ``f`` [Hz] sampled at host times k dt + N(0, jitter), read by an encoder of ``step``
    [rad] (0: continuous) with white noise ``noise`` [rad]."""
    rng = np.random.default_rng(seed)
    t = dt * np.arange(n) + jitter * rng.standard_normal(n)
    t[0] = 0.0
    q = amplitude * np.sin(2 * np.pi * f * t) + noise * rng.standard_normal(n)
    if step:
        q = np.round(q / step) * step + 0.3  # an encoder offset: the lattice need not hold 0
    return make_trajectory("log", t, q, setup=xl330_setup(), position=q), q, t


def test_floor_recovers_quantisation_step_and_jitter():
    tr, q, t = _log(ENCODER_STEP, 0.0005)
    f = log_floor(tr)
    assert f.quantum == pytest.approx(ENCODER_STEP, rel=1e-9)
    assert f.quantisation_mae == pytest.approx(ENCODER_STEP / 4, rel=1e-9)
    assert f.jitter_s == pytest.approx(0.0005, rel=0.1)
    speed = np.mean(np.abs(np.diff(q) / np.diff(t)))
    assert f.jitter_mae == pytest.approx(math.sqrt(2 / math.pi) * f.jitter_s * speed, rel=1e-9)
    assert f.noise_mae == 0.0 and f.mae == pytest.approx(math.hypot(f.quantisation_mae, f.jitter_mae))
    # q / 4 is the mean absolute rounding error of a moving signal
    exact = np.sin(2 * np.pi * 0.7 * t) + 0.3
    assert np.mean(np.abs(q - exact)) == pytest.approx(f.quantisation_mae, rel=0.05)


def test_floor_of_a_fast_log_and_of_continuous_noisy_positions():
    # fast: most samples move several counts; the step is still found (a fraction of the smallest difference)
    rng = np.random.default_rng(1)
    counts = np.cumsum(rng.choice([2, 3, 5, -2, -3], size=500))
    assert lattice_step(counts * 0.01 + 0.123) == pytest.approx(0.01, rel=1e-9)
    # no lattice: white noise off the lattice is the floor
    tr, _, _ = _log(0.0, 0.0, noise=0.002, dt=0.002, n=6000, f=0.2)
    f = log_floor(tr)
    assert f.quantum == 0.0 and f.jitter_s == pytest.approx(0.0, abs=1e-12)
    assert f.noise_mae == pytest.approx(math.sqrt(2 / math.pi) * 0.002, rel=0.15)


def _results(residual, *, n_logs: int = 6, n: int = 1500, dt: float = 0.005, seed: int = 0) -> list[LogResult]:
    """Logs of sines of several frequencies whose replay error is ``residual(q, dq, rng)``."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n_logs):
        t = dt * np.arange(n)
        f = 0.3 + 0.17 * i
        q = np.sin(2 * np.pi * f * t + i)
        dq = 2 * np.pi * f * np.cos(2 * np.pi * f * t + i)
        e = residual(q, dq, rng)
        z = np.zeros(n)
        out.append(LogResult(name=f"l{i}", unit="rad", t=t, q_meas=q, q_sim=q + e, dq_meas=dq, dq_sim=dq,
                             q_target=q, torque_enable=np.ones(n), mask=np.ones(n, bool), motor_torque_sim=z,
                             external_torque_sim=z, conditions={"load": f"m{i % 2}"}))
    return out


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_structure_test_is_silent_on_white_noise(seed):
    tests = structure_tests(_results(lambda q, dq, rng: 0.003 * rng.standard_normal(q.size), seed=seed), floor=0.0)
    assert {t.regime for t in tests} >= {"direction", "position", "load", "near_reversal", "high_speed"}
    assert not [t for t in tests if t.structured]
    assert max(t.eta2 for t in tests) < 0.01


def test_structure_test_finds_a_planted_position_ripple_and_a_direction_asymmetry():
    def ripple(q, dq, rng):
        return 0.003 * rng.standard_normal(q.size) + 0.004 * np.sin(9 * q)

    def asymmetry(q, dq, rng):
        return 0.003 * rng.standard_normal(q.size) + 0.003 * np.sign(dq)

    for residual, regime in ((ripple, "position"), (asymmetry, "direction")):
        tests = structure_tests(_results(residual), floor=0.001)
        assert tests[0].regime == regime and tests[0].structured, tests
        assert tests[0].p_value <= 0.01 and tests[0].eta2 > 0.1
    # the same ripple below the sensor floor is not reported
    assert not [t for t in structure_tests(_results(ripple), floor=0.01) if t.structured]


def test_silent_on_logs_made_by_the_fitted_model():
    specs = [("chirp400", "chirp", 400.0), ("sine800", "sine", 800.0), ("drop400", "drop", 400.0),
             ("steps400", "steps", 400.0)]
    logs = synthetic_set(specs, TRUTH_M1, duration=1.5)
    fit = fit_model(logs, "m1", seed=0, max_evals=600, n_starts=1, grad_steps=60)
    d = diagnose(logs, replay_batches(fit.model, fit.params, make_batches(logs, fit.dt)), fit.model)
    assert d["floor"] == pytest.approx(ENCODER_STEP / 4, rel=1e-6)  # on-grid stamps: no jitter term
    assert d["ratio"] <= d["ratio_limit"] and not d["structured"]
    assert not d["fired"] and "no structure" in d["message"]


def test_fit_warns_on_a_harmonic_drive(tmp_path):
    """Hardening compliance, hysteresis and ripple are outside the family: fit --model m1 says so in one
    line, model.json records it and the report shows it."""
    r = _cli("synth", "--suite", "bench", "--actuator", "harmonic_drive", "--out", tmp_path / "D", "--scale", "0.01")
    assert r.returncode == 0, r.stderr
    r = _cli("fit", tmp_path / "D" / "train", "--model", "m1", "--budget", "quick", "--out", tmp_path / "run")
    assert r.returncode == 0, r.stderr
    d = json.loads((tmp_path / "run" / "model.json").read_text())["diagnosis"]
    assert d["fired"] and d["ratio"] > d["ratio_limit"]
    # the floor is the logs' own: a 2^19-count encoder and 0.3 ms jitter at 2.5 ms
    assert d["per_log"][0]["quantum"] == pytest.approx(2 * math.pi / 524288, rel=1e-6)
    assert d["per_log"][0]["jitter_s"] == pytest.approx(0.0003, rel=0.3)
    lines = [x for x in " ".join(r.stdout.split()).split("warning: ")[1:] if "sensor floor" in x]
    assert len(lines) == 1 and "x the sensor floor the logs show" in lines[0]
    assert "the in-sample error against the sensor floor" in (tmp_path / "run" / "report.html").read_text()


def test_diagnose_config_limits_the_ratio():
    logs = synthetic_set([("sine", "sine", 400.0)], TRUTH_M1, duration=1.0)
    bad = {**neutral_params(), **TRUTH_M1, "friction_base": 0.06}  # twice the truth's Coulomb friction
    res = replay_batches("m1", bad, make_batches(logs))
    loose, strict = (diagnose(logs, res, "m1", DiagnoseConfig(ratio_limit=k)) for k in (1e6, 1.0))
    assert loose["ratio"] == strict["ratio"] > 1.0
    assert strict["fired"] and "sensor floor" in strict["message"]


def test_a_diverged_replay_fires_and_a_log_without_motion_is_not_judged():
    logs = synthetic_set([("sine", "sine", 400.0)], TRUTH_M1, duration=1.0)
    res = replay_batches("m1", {**neutral_params(), **TRUTH_M1}, make_batches(logs))
    broken = [dataclasses.replace(r, q_sim=np.where(r.t > 0.5, np.nan, r.q_sim)) for r in res]
    d = diagnose(logs, broken, "m1")
    assert d["fired"] and "diverges" in d["message"]
    still = [tr.replace(data={**tr.data, "position": np.full(tr.time.size, 0.1)}) for tr in logs]
    d = diagnose(still, res, "m1")
    assert d["floor"] == 0.0 and d["ratio"] is None and not d["fired"] and "not judged" in d["message"]
