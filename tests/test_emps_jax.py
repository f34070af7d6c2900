"""actuatorlab's JAX closed loop on DATA_EMPS against the NumPy reference of the benchmark.

The published IDIM-LS parameters (Janot, Gautier, Brunot 2019, section 3.4) are replayed through
``sim.rollout.make_batches`` + ``rollout_batch`` (``emps_cascade`` law, current drive,
``carriage`` plant, stick/slip Coulomb + viscous friction, semi-implicit Euler) and through
``baselines.simulate_emps_closed_loop`` (RK4) in the matching setting: the data's own 1 ms grid,
no output delay (docs/emps.md, section 3). Errors follow the paper's eq. (11) on samples 49..end:
``100 ||y - y_sim|| / ||y||`` [%], measured position ``filtfilt(butter(4, 100 Hz), qm)``, measured
force ``gtau vir``, simulated force ``gtau v``.

The log's time stamps jitter by ~2e-8 s around 1 ms; the replay uses the nominal grid
``t[0] + k dt`` (as the reference does), see :func:`test_raw_time_stamps_replay_like_the_grid`.
Skipped when ../shared is absent. About 10 s.
"""

from __future__ import annotations

import numpy as np
import pytest

from actuatorlab.baselines import (
    PUBLISHED_IDIM_LS_PARAMS,
    PUBLISHED_SIMULATION_ERRORS_PCT,
    load_emps_mat,
    measured_signals,
    relative_errors,
    EmpsLoop,
    simulate_emps_closed_loop,
)
from actuatorlab.logs import load_log
from actuatorlab.models.actuator import StepConfig
from actuatorlab.models.params import neutral_params
from actuatorlab.sim.rollout import make_batches, rollout_batch

DT = 1e-3  # [s] EMPS sample time
N_SKIP = 49  # [samples] the benchmark's start-up window
#: data setting of the reference with the published parameters (docs/emps.md section 3 table)
REF_DATA_SETTING = {"q": 0.00108, "force": 4.570}


def _params(delay: float = 0.0) -> dict:
    """Published IDIM-LS values as actuatorlab parameters (everything else neutral)."""
    p = neutral_params()
    pub = PUBLISHED_IDIM_LS_PARAMS
    p.update(armature=pub["M"], friction_viscous=pub["Fv"], friction_base=pub["Fc"],
             force_offset=pub["offset"], delay=delay)
    return p


@pytest.fixture(scope="module")
def emps(shared):
    path = shared / "data" / "emps" / "DATA_EMPS.mat"
    if not path.exists():
        pytest.skip(f"{path.name} not found under ../shared/data/emps")
    rec = load_emps_mat(path)
    raw = load_log(path)
    grid = raw.replace(time=float(raw.time[0]) + DT * np.arange(raw.n))
    meas = measured_signals(rec.t, rec.qm, rec.vir, rec.gtau)
    t_grid = rec.t[0] + DT * np.arange(rec.t.size)
    return rec, raw, grid, meas, t_grid


def _jax(tr, params: dict, substeps: int = 1) -> dict[str, np.ndarray]:
    (b,) = make_batches([tr], DT)
    cfg = StepConfig(b.law, b.plant, False, substeps)
    out = rollout_batch(cfg, params, b.arrays())
    gtau = float(b.consts.law.drive_gain[0])
    return {"q": np.asarray(out.q[0]), "qd": np.asarray(out.dq[0]),
            "force": gtau * np.asarray(out.u[0])}


def _ref(rec, t, qg, substeps: int) -> dict[str, np.ndarray]:
    return simulate_emps_closed_loop(t, qg, float(rec.qm[0]), PUBLISHED_IDIM_LS_PARAMS,
                                     EmpsLoop(rec.kp, rec.kv, rec.gtau, 10.0, substeps, output_delay=0))


def _rel(a: np.ndarray, b: np.ndarray, y: np.ndarray) -> float:
    """100 ||a - b|| / ||y|| on the scored window [%]."""
    return float(100 * np.linalg.norm((a - b)[N_SKIP:]) / np.linalg.norm(y[N_SKIP:]))


@pytest.fixture(scope="module")
def data_setting(emps):
    rec, _, grid, meas, t_grid = emps
    ref = _ref(rec, t_grid, rec.qg, 10)
    jax1 = _jax(grid, _params(), 1)
    return ref, jax1


def test_reference_reproduces_documented_data_setting(emps, data_setting):
    _, _, _, meas, _ = emps
    ref, _ = data_setting
    e = relative_errors(meas, ref, N_SKIP)
    assert e["q"] == pytest.approx(REF_DATA_SETTING["q"], abs=1e-5)
    assert e["force"] == pytest.approx(REF_DATA_SETTING["force"], abs=1e-3)


def test_jax_loop_matches_reference_in_data_setting(emps, data_setting):
    """Fitter's setting (1 substep): position error within 5 % of the reference's (measured
    0.00110 vs 0.00108 %), force error within 0.3 points (4.74 vs 4.57 %); the simulated
    positions differ by < 1e-3 % of ||q|| (measured 4.8e-4 %)."""
    _, _, _, meas, _ = emps
    ref, jax1 = data_setting
    ej, er = relative_errors(meas, jax1, N_SKIP), relative_errors(meas, ref, N_SKIP)
    assert ej["q"] == pytest.approx(er["q"], rel=0.05)
    assert abs(ej["force"] - er["force"]) < 0.3
    assert _rel(jax1["q"], ref["q"], meas["q"]) < 1e-3
    # both are far from the benchmark-delay figures: the matching setting is the one without delay
    assert ej["q"] < 0.2 * PUBLISHED_SIMULATION_ERRORS_PCT["q"]
    assert ej["force"] < PUBLISHED_SIMULATION_ERRORS_PCT["force"] - 0.8


def test_jax_loop_converges_to_reference_with_substeps(emps, data_setting):
    """With 10 substeps the semi-implicit Euler loop reaches the RK4 reference: the remaining
    difference at 1 substep is integration error, not a different model (measured 0.6 % on the
    position error, 0.02 points on the force error, force trajectories 2.2 -> 0.34 % of ||force|| apart)."""
    _, _, grid, meas, _ = emps
    ref, jax1 = data_setting
    jax10 = _jax(grid, _params(), 10)
    e10, er = relative_errors(meas, jax10, N_SKIP), relative_errors(meas, ref, N_SKIP)
    assert e10["q"] == pytest.approx(er["q"], rel=0.01)
    assert abs(e10["force"] - er["force"]) < 0.05
    assert _rel(jax10["force"], ref["force"], meas["force"]) < 0.5 * _rel(jax1["force"], ref["force"], meas["force"])


def test_one_sample_delay_is_a_reference_delay(emps, data_setting):
    """actuatorlab's ``delay`` = 1 sample delays qg (docs/emps.md: "reference qg[k-1]"), which is
    not the benchmark's unit delay on the controller output. It moves both errors the way the
    benchmark-delay setting does (position and force grow), the position one much further:
    0.0011 -> 0.059 % (benchmark: 0.0138 %), force 4.74 -> 5.95 % (benchmark: 5.85 %)."""
    rec, _, grid, meas, t_grid = emps
    _, jax0 = data_setting
    jax_d = _jax(grid, _params(delay=DT), 1)
    ref_lag = _ref(rec, t_grid, np.concatenate([rec.qg[:1], rec.qg[:-1]]), 1)
    e0, ed = relative_errors(meas, jax0, N_SKIP), relative_errors(meas, jax_d, N_SKIP)
    er = relative_errors(meas, ref_lag, N_SKIP)
    # same mechanism as the reference fed with qg[k-1]
    assert ed["q"] == pytest.approx(er["q"], rel=0.01)
    assert _rel(jax_d["q"], ref_lag["q"], meas["q"]) < 1e-3
    # towards the benchmark-delay setting ...
    pub = PUBLISHED_SIMULATION_ERRORS_PCT
    assert ed["q"] > 5 * e0["q"] and ed["force"] > e0["force"] + 0.5
    assert abs(ed["force"] - pub["force"]) < abs(e0["force"] - pub["force"])
    # ... but it overshoots the position error: not the output delay of the benchmark
    assert ed["q"] > 2 * pub["q"]


def test_raw_time_stamps_replay_like_the_grid(emps, data_setting):
    """Replaying the log with its raw (jittered) stamps equals the nominal-grid replay.
    With a 1e-12 s hold tolerance 19 474 of 24 841 targets were held from the previous sample
    (stamps jitter by 3e-8 s): position 0.046 %, force 96 %. The hold now tolerates 1e-3 dt."""
    rec, raw, _, meas, _ = emps
    (b,) = make_batches([raw], DT)
    assert np.array_equal(b.q_target[0], rec.qg)
    jr = _jax(raw, _params(), 1)
    assert relative_errors(meas, jr, N_SKIP)["force"] < 5.0
