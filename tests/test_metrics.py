"""Metrics of replayed logs on hand-made arrays with known answers."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from actuatorlab.errors import DataError
from actuatorlab.evaluate.metrics import (
    REGIMES,
    LogResult,
    format_table,
    log_metrics,
    regime_masks,
    summarize,
)


def make(q_meas, q_sim=None, *, t=None, dq_meas=None, dq_sim=None, name="log", unit="rad", **kw):
    """A LogResult with sensible defaults (torque on, all samples valid, zero torques)."""
    q_meas = np.asarray(q_meas, dtype=float)
    n = q_meas.size
    t = np.arange(n) * 0.01 if t is None else np.asarray(t, dtype=float)
    q_sim = q_meas.copy() if q_sim is None else np.asarray(q_sim, dtype=float)
    dq_meas = np.gradient(q_meas, t) if dq_meas is None else np.asarray(dq_meas, dtype=float)
    dq_sim = dq_meas.copy() if dq_sim is None else np.asarray(dq_sim, dtype=float)
    args = dict(
        name=name,
        unit=unit,
        t=t,
        q_meas=q_meas,
        q_sim=q_sim,
        dq_meas=dq_meas,
        dq_sim=dq_sim,
        q_target=q_meas.copy(),
        torque_enable=np.ones(n),
        mask=np.ones(n, dtype=bool),
        motor_torque_sim=np.zeros(n),
        external_torque_sim=np.zeros(n),
    )
    args.update(kw)
    return LogResult(**args)


def sine_log(phase_s=0.0003, amplitude=0.5, freq=1.0, dt=0.001, duration=2.0):
    """q = A sin(2 pi f (t - phase)); velocity reversals at t = phase + 0.25 + 0.5 k."""
    t = np.arange(0.0, duration, dt)
    w = 2 * np.pi * freq
    q = amplitude * np.sin(w * (t - phase_s))
    dq = amplitude * w * np.cos(w * (t - phase_s))
    return make(q, t=t, dq_meas=dq)


# ---------------------------------------------------------------------------------- basics


def test_constant_offset_gives_offset_as_mae_rmse_and_max():
    r = sine_log()
    r = make(r.q_meas, r.q_meas + 0.01, t=r.t, dq_meas=r.dq_meas)
    m = log_metrics(r)
    assert m["position_mae"] == pytest.approx(0.01, rel=1e-12)
    assert m["position_rmse"] == pytest.approx(0.01, rel=1e-12)
    assert m["position_max_abs_error"] == pytest.approx(0.01, rel=1e-9)
    assert m["rollout_mae"] == m["position_mae"]
    expected_rel = 0.01 * math.sqrt(r.n) / np.linalg.norm(r.q_meas)
    assert m["position_relative_error"] == pytest.approx(expected_rel, rel=1e-12)
    assert m["n"] == r.n


def test_relative_error_formula_on_pythagorean_numbers():
    # e = (-3, -4), q_meas = (3, 4): ||e|| / ||q|| = 5 / 5 = 1; MAE 3.5; RMSE sqrt(12.5)
    r = make([3.0, 4.0], [0.0, 0.0])
    m = log_metrics(r)
    assert m["position_relative_error"] == pytest.approx(1.0)
    assert m["position_mae"] == pytest.approx(3.5)
    assert m["position_rmse"] == pytest.approx(math.sqrt(12.5))
    r2 = make([3.0, 4.0], [3.0, 4.0 + 2.5])  # ||e|| = 2.5 -> 0.5
    assert log_metrics(r2)["position_relative_error"] == pytest.approx(0.5)


def test_log_result_validates_shapes_and_unit():
    with pytest.raises(ValueError, match="q_sim has 3 samples"):
        make(np.zeros(4), np.zeros(3))
    with pytest.raises(ValueError, match="unit"):
        make(np.zeros(4), unit="deg")
    with pytest.raises(ValueError, match="together"):
        make(np.zeros(4), effort_meas=np.zeros(4))
    r = make([0.0, 1.0], mask=[1, 0])
    assert r.mask.dtype == bool and r.mask.tolist() == [True, False]


# ---------------------------------------------------------------------------------- regimes


def test_near_reversal_finds_sine_reversals_at_the_right_times():
    phase, window = 0.0003, 0.05
    r = sine_log(phase_s=phase)
    masks = regime_masks(r, reversal_window_s=window)
    reversals = phase + 0.25 + 0.5 * np.arange(4)  # zeros of cos in [0, 2)
    dist = np.min(np.abs(r.t[:, None] - reversals[None, :]), axis=1)
    expected = dist <= window
    np.testing.assert_array_equal(masks["near_reversal"], expected)
    # 4 reversals x (2 * 50 ms) at 1 kHz
    assert masks["near_reversal"].sum() == 4 * 100


def test_near_reversal_ignores_noise_at_standstill_and_stop_and_go():
    rng = np.random.default_rng(0)
    t = np.arange(3000) * 0.001
    dq = np.zeros(3000)
    dq[:1000] = 1.0  # move forward
    dq[1000:2000] = 1e-3 * rng.standard_normal(1000)  # stand still, noisy estimate flips sign
    dq[2000:] = 1.0  # move forward again: stop-and-go, not a reversal
    r = make(np.cumsum(dq) * 0.001, t=t, dq_meas=dq)
    assert not regime_masks(r)["near_reversal"].any()
    dq2 = dq.copy()
    dq2[2000:] = -1.0  # now it does reverse, somewhere in the standstill
    r2 = make(np.cumsum(dq2) * 0.001, t=t, dq_meas=dq2)
    near = regime_masks(r2, reversal_window_s=0.01)["near_reversal"]
    assert 0 < near.sum() <= 21
    assert t[near].min() > 0.999 and t[near].max() < 2.001


def test_speed_regimes_on_sine_match_arcsine_law():
    r = sine_log(phase_s=0.0, dt=1e-4)
    m = regime_masks(r)
    # |cos| of a uniform phase: P(|cos| <= c) = (2/pi) asin(c); v95 = A w cos(0.025 pi)
    c95 = math.cos(0.025 * math.pi)
    assert m["low_speed"].mean() == pytest.approx(2 / math.pi * math.asin(0.10 * c95), abs=2e-3)
    assert m["high_speed"].mean() == pytest.approx(1 - 2 / math.pi * math.asin(0.5 * c95), abs=2e-3)
    assert m["static"].mean() == pytest.approx(2 / math.pi * math.asin(0.02 * c95), abs=2e-3)
    assert not (m["low_speed"] & m["high_speed"]).any()
    # explicit thresholds are absolute [rad/s]
    m2 = regime_masks(r, low_speed=1.0, high_speed=2.0)
    np.testing.assert_array_equal(m2["low_speed"], np.abs(r.dq_meas) <= 1.0)
    np.testing.assert_array_equal(m2["high_speed"], np.abs(r.dq_meas) > 2.0)


def test_driving_backdriving_follow_power_sign_and_torque_enable():
    tau = np.array([1.0, 1.0, -1.0, -1.0, 0.0, 1.0, 2.0])
    dq = np.array([1.0, -1.0, 1.0, -1.0, 1.0, 0.0, 3.0])
    te = np.array([1, 1, 1, 1, 1, 1, 0.0])
    r = make(np.zeros(7), dq_sim=dq, dq_meas=dq, motor_torque_sim=tau, torque_enable=te)
    m = regime_masks(r)
    assert m["driving"].tolist() == [True, False, False, True, False, False, False]
    assert m["backdriving"].tolist() == [False, True, True, False, False, False, False]
    assert m["torque_disabled"].tolist() == [False] * 6 + [True]
    assert not (m["driving"] & m["backdriving"]).any()
    # torque-off samples are never static either
    assert not m["static"][6]


def test_stall_is_rest_with_the_controller_at_its_limit():
    """stall = torque on, at rest (static) and |effort_level| >= 0.95; a moving joint at full duty,
    a resting joint at 0.9 duty, a resting joint with the torque off and a log without a
    controller level are not stalls; the error there is reported on its own."""
    n = 10
    dq = np.array([2.0, 2.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 2.0, 2.0])
    level = np.array([1.0, -1.0, -1.0, 0.97, 0.9, 1.0, np.nan, -0.95, 0.2, 0.2])
    te = np.array([1, 1, 1, 1, 1, 0, 1, 1, 1, 1.0])
    q_meas = np.zeros(n)
    q_sim = np.where(np.arange(n) < 8, 0.1, 0.0)
    r = make(q_meas, q_sim, dq_meas=dq, torque_enable=te, effort_level=level)
    m = regime_masks(r)
    assert m["stall"].tolist() == [False, False, True, True, False, False, False, True, False, False]
    assert not (m["stall"] & ~m["static"]).any()
    st = log_metrics(r)["regimes"]["stall"]
    assert st["n_samples"] == 3 and st["position_mae"] == pytest.approx(0.1)
    # no controller level: no stall, whatever the motion
    assert not regime_masks(make(q_meas, dq_meas=dq, torque_enable=te))["stall"].any()


def test_stall_warning_only_for_a_long_stall_with_a_large_error():
    """A log with 0.3 s of stall whose error is 5x the rest is flagged by ``summarize``; the same
    error on a 0.05 s stall, or a stall error only 1.5x the log's, is not."""
    from actuatorlab.evaluate.metrics import stall_warnings

    def stalled(n_stall, err_stall, name):
        n = 200
        dq = np.full(n, 2.0)
        dq[-n_stall:] = 0.0
        level = np.full(n, 0.3)
        level[-n_stall:] = 1.0
        q_sim = np.full(n, 0.01)
        q_sim[-n_stall:] = err_stall
        return make(np.zeros(n), q_sim, dq_meas=dq, effort_level=level, name=name)

    logs = [stalled(30, 0.05, "long_bad"), stalled(5, 0.5, "short"), stalled(30, 0.012, "mild")]
    s = summarize(logs)
    assert len(s["regime_warnings"]) == 1 and s["regime_warnings"][0].startswith("long_bad: at stall")
    assert stall_warnings(logs, s["per_log"], ratio=1.1) and len(stall_warnings(logs, s["per_log"], ratio=1.1)) == 2
    json.dumps(s)


def test_masks_exclude_padding_everywhere():
    r0 = sine_log(duration=1.0)
    n, pad = r0.n, 200
    q_meas = np.concatenate([r0.q_meas, np.zeros(pad)])
    q_sim = np.concatenate([r0.q_meas + 0.002, np.full(pad, 1e3)])  # garbage in the padding
    dq = np.concatenate([r0.dq_meas, np.full(pad, -50.0)])  # would look like a reversal
    t = np.arange(n + pad) * 0.001
    mask = np.arange(n + pad) < n
    r = make(q_meas, q_sim, t=t, dq_meas=dq, mask=mask, motor_torque_sim=np.ones(n + pad),
             torque_enable=np.where(mask, 1.0, 0.0))
    masks = regime_masks(r)
    for name in REGIMES:
        assert not masks[name][~mask].any(), name
    # the reversals of the sine (0.25, 0.75 s) are found; none is invented at the padding edge
    assert not masks["near_reversal"][(t > 0.9) & mask].any()
    m = log_metrics(r)
    assert m["n"] == n
    assert m["position_mae"] == pytest.approx(0.002)
    assert m["regimes"]["torque_disabled"]["n_samples"] == 0


# ---------------------------------------------------------------------------------- pooling


def test_summarize_pools_by_samples_not_logs():
    a = make(np.ones(100), np.ones(100) + 1.0, dq_meas=np.zeros(100), name="a")  # |e| = 1
    b = make(np.ones(300) * 2.0, np.ones(300) * 2.0 - 3.0, dq_meas=np.zeros(300), name="b")  # 3
    s = summarize([a, b])
    assert s["n_samples"] == 400 and s["n_logs"] == 2 and s["pooling"] == "samples"
    assert s["position_mae"] == pytest.approx((100 * 1 + 300 * 3) / 400)  # 2.5, not 2.0
    assert s["position_rmse"] == pytest.approx(math.sqrt((100 + 300 * 9) / 400))
    assert s["position_relative_error"] == pytest.approx(
        math.sqrt(100 + 300 * 9) / math.sqrt(100 * 1 + 300 * 4)
    )
    assert [d["log"] for d in s["per_log"]] == ["a", "b"]
    assert s["per_log"][0]["position_mae"] == pytest.approx(1.0)
    assert s["per_log"][1]["position_mae"] == pytest.approx(3.0)
    assert s["per_log"][1]["n"] == 300
    for d in s["per_log"]:
        assert {"log", "position_mae", "position_rmse", "position_relative_error",
                "onestep_mae", "n"} <= set(d)
    # all samples are static (dq = 0, torque on): pooled regime MAE is pooled too
    st = s["regimes"]["static"]
    assert st["n_samples"] == 400 and st["fraction"] == pytest.approx(1.0)
    assert st["position_mae"] == pytest.approx(2.5)
    assert set(s["regimes"]) == set(REGIMES)
    json.dumps(s, allow_nan=False)


def test_onestep_and_effort_metrics_pooled_where_available():
    q = np.linspace(0.0, 1.0, 50)
    one = q + 0.002
    one[0] = np.nan  # no prediction for the first sample
    a = make(q, q + 0.01, q_onestep=one, effort_meas=np.array([3.0, 4.0] * 25),
             effort_sim=np.zeros(50), name="a")
    b = make(q, q - 0.01, name="b")  # neither one-step nor effort
    s = summarize([a, b])
    assert s["rollout_mae"] == pytest.approx(0.01)
    assert s["onestep_mae"] == pytest.approx(0.002)
    assert s["onestep_n_samples"] == 49
    assert s["effort_relative_error"] == pytest.approx(1.0)
    assert s["effort_n_samples"] == 50
    assert s["per_log"][1]["onestep_mae"] is None
    assert s["per_log"][1]["effort_relative_error"] is None
    s_b = summarize([b])
    assert s_b["onestep_mae"] is None and s_b["effort_relative_error"] is None


def test_diverged_rollout_is_reported_not_hidden():
    q = np.linspace(0.0, 1.0, 20)
    q_sim = q.copy()
    q_sim[10:] = np.nan
    s = summarize([make(q, q_sim)])
    assert s["position_mae"] is None and s["position_rmse"] is None
    json.dumps(s, allow_nan=False)


def test_summarize_rejects_mixed_units_and_empty():
    with pytest.raises(DataError, match="different position units"):
        summarize([make(np.ones(3), name="a"), make(np.ones(3), name="b", unit="m")])
    with pytest.raises(DataError, match="no replayed logs"):
        summarize([])


def test_format_table_has_rows_for_logs_total_and_regimes():
    from rich.console import Console

    s = summarize([make(np.ones(10) * 0.5, np.ones(10) * 0.6, name="log_alpha"),
                   make(np.ones(10), name="log_beta")])
    table = format_table(s)
    assert table.row_count == 2 + 1 + len(REGIMES)
    console = Console(record=True, width=200)
    console.print(table)
    text = console.export_text()
    for word in ("log_alpha", "log_beta", "TOTAL", "near_reversal", "backdriving", "0.05"):
        assert word in text
