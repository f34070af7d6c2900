"""Audit of one log: timing, gaps, bad timestamps, NaN, saturation, derived channels, causality.

:func:`audit_log` returns a JSON-serializable report whose ``issues`` list carries a severity
("error": the log should not be used as it is; "warning": usable with care; "info": worth
knowing). :func:`render_audit` turns a report into lines with rich markup for the terminal.

Causality check: the delay between ``position_target`` and ``position`` is estimated as the lag
that maximises the normalised cross-correlation of their increments on a uniform grid (median
step), using only torque-enabled samples,

    c(k) = sum_i dr[i] * dq[i + k] / sqrt(sum dr^2 * sum dq^2),   lag = argmax_k c(k) * dt,

with a parabolic refinement of the peak. A physical servo can only respond after its command,
so a lag below minus one sample (the response leads its command) points at mislabelled or
shifted timestamps (or a command interpolated from the future).

The increment correlation is biased by strongly nonlinear responses: a pendulum whose servo
cannot lift it any further (gravity-limited, saturated duty) stops early while its command goes
on, which makes the response look early. So the audit also checks *onsets*
(:func:`onset_delays`): where the command starts to move after a rest (or at the start of the
log, the system assumed at rest before it), the response must not leave its rest value before the
command does. The verdict: a lead at any onset is an error; a negative correlation lag is an
error unless every onset shows the response following its command, in which case it is reported
as a nonlinearity artifact (info). Works on logs loaded with ``strict=False``: samples with
non-finite or non-increasing times are left out of this check.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from actuatorlab.logs.format import Trajectory
from actuatorlab.logs.resample import uniform_grid

__all__ = ["audit_log", "render_audit", "estimate_lag", "onset_delays", "GAP_FACTOR", "MAX_LAG_S"]

#: a step longer than GAP_FACTOR x the median step is a gap.
GAP_FACTOR = 3.0
#: [s] largest command-to-response delay searched by the causality check.
MAX_LAG_S = 0.5
_MAX_LISTED = 20
_DERIVED_WORDS = ("interpolat", "hold", "resampl", "recomputed", "differentiat", "filter")


def _runs(mask: np.ndarray) -> list[tuple[int, int]]:
    """[start, stop) index pairs of the True runs of a boolean (T,) array."""
    if mask.size == 0:
        return []
    d = np.diff(np.concatenate(([0], mask.astype(np.int8), [0])))
    return list(zip(np.flatnonzero(d == 1).tolist(), np.flatnonzero(d == -1).tolist()))


def _clean_time_index(t: np.ndarray, *channels: np.ndarray) -> np.ndarray:
    """Indices of samples with finite time and channels, each later than every earlier kept one."""
    ok = np.isfinite(t)
    for x in channels:
        ok &= np.isfinite(x)
    idx = np.flatnonzero(ok)
    if idx.size == 0:
        return idx
    tt = t[idx]
    prev_max = np.concatenate(([-np.inf], np.maximum.accumulate(tt)[:-1]))
    return idx[tt > prev_max]


def _uniform(time: np.ndarray, command: np.ndarray, response: np.ndarray,
             enabled: np.ndarray | None) -> tuple[float, np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
    """(dt, grid, command, response, enabled) on a uniform grid at the median step; None if < 20 samples."""
    time = np.asarray(time, dtype=np.float64)
    command = np.asarray(command, dtype=np.float64)
    response = np.asarray(response, dtype=np.float64)
    en = np.ones(time.shape, dtype=bool) if enabled is None else np.asarray(enabled, dtype=bool)
    keep = _clean_time_index(time, command, response)
    if keep.size < 20:
        return None
    t, r, q, en = time[keep], command[keep], response[keep], en[keep]
    dt = float(np.median(np.diff(t)))
    grid = uniform_grid(float(t[0]), float(t[-1]), dt)
    eg = en[np.searchsorted(t, grid, side="right") - 1]
    return dt, grid, np.interp(grid, t, r), np.interp(grid, t, q), eg


def estimate_lag(time: np.ndarray, command: np.ndarray, response: np.ndarray,
                 enabled: np.ndarray | None = None, max_lag_s: float = MAX_LAG_S) -> dict[str, Any]:
    """Delay of ``response`` after ``command`` by cross-correlation of increments.

    Args:
        time: (T,) [s]; samples with non-finite or non-increasing times are dropped.
        command, response: (T,) in the same unit (e.g. position_target and position).
        enabled: (T,) bool, samples to use (e.g. torque on); all if None.
        max_lag_s: [s] largest |lag| searched.

    Returns:
        {"lag_s", "lag_samples", "dt_s", "peak_correlation", "n_increments"}; "lag_s" is None
        when the check is inconclusive (constant command, too few samples), with "reason".
    """
    u = _uniform(time, command, response, enabled)
    if u is None:
        return {"lag_s": None, "reason": "fewer than 20 usable samples"}
    dt, _, rg, qg, eg = u
    dr, dq = np.diff(rg), np.diff(qg)
    valid = eg[1:] & eg[:-1]
    n = dr.size
    K = int(min(round(max_lag_s / dt), n // 4))
    if K < 2 or valid.sum() < 20:
        return {"lag_s": None, "reason": "too few torque-enabled samples", "dt_s": dt}
    drv, dqv = np.where(valid, dr, 0.0), np.where(valid, dq, 0.0)
    norm = float(np.sqrt(np.sum(drv**2) * np.sum(dqv**2)))
    if norm <= 0.0:
        return {"lag_s": None, "reason": "command or response does not move while enabled", "dt_s": dt}
    from scipy.signal import correlate

    lags = np.arange(-K, K + 1)
    full = correlate(dqv, drv, mode="full", method="fft")  # full[n - 1 + k] = sum_i dr[i] dq[i + k]
    c = full[n - 1 - K: n + K] / norm
    j = int(np.argmax(c))
    frac = 0.0
    if 0 < j < c.size - 1:
        den = c[j - 1] - 2 * c[j] + c[j + 1]
        if den < 0:
            frac = float(np.clip(0.5 * (c[j - 1] - c[j + 1]) / den, -0.5, 0.5))
    lag_samples = float(lags[j]) + frac
    return {"lag_s": lag_samples * dt, "lag_samples": lag_samples, "dt_s": dt,
            "peak_correlation": float(c[j]), "n_increments": int(valid.sum()),
            "at_search_edge": bool(j in (0, c.size - 1))}


def onset_delays(time: np.ndarray, command: np.ndarray, response: np.ndarray,
                 enabled: np.ndarray | None = None, max_lag_s: float = MAX_LAG_S,
                 min_rest_s: float = 0.1) -> dict[str, Any]:
    """Delay of the response's departure after each command onset (command leaving a rest).

    Signals go onto a uniform grid at the median step. Thresholds: the command has moved once it
    is more than ``eps_r = 0.2 %`` of its range from its rest value; the response once it has
    moved more than ``eps_q = max(3 quanta, 1 % of its range)`` from its rest value *in the
    direction the command moves* (quantum: smallest non-zero step of the response; quantisation
    noise goes both ways, a reaction goes the command's way). The command threshold is the smaller
    one, so the test errs towards "response after command". Onsets: (a) the start of the log, the system assumed at rest
    before it (skipped if the response already moves within 2 samples); (b) every enabled command
    rest lasting at least ``min_rest_s`` whose first half shows a still response (a settling
    response is skipped).

    Returns:
        {"dt_s", "events": [{"t_command_s", "t_response_s", "delay_s", "delay_samples"}],
        "min_delay_samples"} (None when there is no usable onset).
    """
    u = _uniform(time, command, response, enabled)
    if u is None:
        return {"dt_s": None, "events": [], "min_delay_samples": None}
    dt, grid, r, q, en = u
    n = grid.size
    dq_raw = np.abs(np.diff(np.asarray(response, dtype=np.float64)))
    dq_raw = dq_raw[np.isfinite(dq_raw) & (dq_raw > 0)]
    quantum = float(dq_raw.min()) if dq_raw.size else 0.0
    scale_r = float(np.ptp(r[en])) if en.any() else 0.0
    scale_q = float(np.ptp(q[en])) if en.any() else 0.0
    if scale_r <= 0:
        return {"dt_s": dt, "events": [], "min_delay_samples": None}
    eps_r = 2e-3 * scale_r
    eps_q = max(3 * quantum, 1e-2 * scale_q, 1e-12)
    look = int(round(max_lag_s / dt))
    events = []

    def first_departure(x: np.ndarray, ref: float, eps: float, lo: int, hi: int, sign: float = 0.0) -> int | None:
        """First index in [lo, hi) where x leaves ref by more than eps (towards ``sign`` if non-zero)."""
        width = 64  # growing windows: cost proportional to the distance searched
        while lo < hi:
            stop = min(hi, lo + width)
            dev = x[lo:stop] - ref
            hit = np.flatnonzero((dev * sign if sign else np.abs(dev)) > eps)
            if hit.size:
                return lo + int(hit[0])
            lo, width = stop, width * 2
        return None

    # (a) start of the log
    if en[0]:
        ic = first_departure(r, r[0], eps_r, 0, n)
        if ic is not None:
            iq = first_departure(q, q[0], eps_q, 0, n, float(np.sign(r[ic] - r[0])))
            if iq is not None and iq > 2 and en[: max(ic, iq) + 1].all():
                events.append((ic, iq))
    # (b) command rests
    min_rest = max(4, int(round(min_rest_s / dt)))
    i = 0
    while i < n - 1:
        j = first_departure(r, r[i], eps_r, i, n)
        if j is None:
            break
        if j - i >= min_rest and en[i: j + 1].all():
            half = i + (j - i) // 2
            ref = q[i:half]
            if np.ptp(ref) <= eps_q:
                iq = first_departure(q, float(np.mean(ref)), eps_q, half, min(n, j + look),
                                     float(np.sign(r[j] - r[i])))
                if iq is not None and en[iq]:
                    events.append((j, iq))
        i = j
    out = [{"t_command_s": float(grid[ic]), "t_response_s": float(grid[iq]), "delay_s": float((iq - ic) * dt),
            "delay_samples": int(iq - ic)} for ic, iq in events]
    return {"dt_s": dt, "events": out[:_MAX_LISTED],
            "min_delay_samples": min((e["delay_samples"] for e in out), default=None)}


def _saturation(traj: Trajectory) -> dict[str, Any]:
    out: dict[str, Any] = {}
    t = traj.time
    if traj.has("pwm_duty"):
        d = np.asarray(traj["pwm_duty"], dtype=np.float64)
        cap = float(traj.setup.extra.get("pwm_limit", 1.0))
        at = np.abs(d) >= cap - 1e-3
        runs = _runs(at)
        longest = max((b - a for a, b in runs), default=0)
        out["pwm_duty"] = {"level": cap, "n_samples": int(at.sum()), "fraction": float(at.mean()) if d.size else 0.0,
                           "longest_run_samples": int(longest),
                           "first_times_s": [float(t[a]) for a, _ in runs[:5]]}
    if traj.has("controller_output"):
        u = np.asarray(traj["controller_output"], dtype=np.float64)
        m = float(np.nanmax(np.abs(u))) if np.isfinite(u).any() else 0.0
        at = np.abs(u) >= m * (1 - 1e-6) if m > 0 else np.zeros(u.shape, bool)
        runs = [(a, b) for a, b in _runs(at) if b - a >= 3]
        n_plateau = int(sum(b - a for a, b in runs))
        out["controller_output"] = {"level": m, "n_samples": n_plateau, "fraction": n_plateau / max(u.size, 1),
                                    "longest_run_samples": int(max((b - a for a, b in runs), default=0)),
                                    "first_times_s": [float(t[a]) for a, _ in runs[:5]]}
    if traj.has("position"):
        q = np.asarray(traj["position"], dtype=np.float64)
        if np.isfinite(q).any():
            lo, hi = float(np.nanmin(q)), float(np.nanmax(q))
            steps = np.abs(np.diff(q[np.isfinite(q)]))
            res = float(np.min(steps[steps > 0])) if np.any(steps > 0) else 0.0
            tol = max(res, 1e-9 * max(abs(lo), abs(hi), 1.0))
            ends = {}
            for label, level, at in (("min", lo, q <= lo + tol), ("max", hi, q >= hi - tol)):
                runs = _runs(at)
                a, b = max(runs, key=lambda ab: ab[1] - ab[0], default=(0, 0))
                ends[label] = {"level": level, "n_samples": int(at.sum()), "longest_run_samples": int(b - a),
                               "longest_run_s": float(t[b - 1] - t[a]) if b > a else 0.0,
                               "longest_run_start_s": float(t[a]) if b > a else None}
            out["position"] = {"range": [lo, hi], "resolution": res, "ends": ends}
    return out


def _causality_issues(lag: dict[str, Any], onsets: dict[str, Any], issue: Any) -> None:
    ev = onsets["events"]
    leads = [e for e in ev if e["delay_samples"] < -1]
    if leads:
        e = min(leads, key=lambda e: e["delay_s"])
        issue("error", "causality",
              f"position leaves its rest {-e['delay_s'] * 1e3:.3g} ms ({-e['delay_samples']} samples) before "
              f"position_target moves (command onset t={e['t_command_s']:.4g} s): the response precedes its "
              "command, likely a timestamp or causality problem")
    onset_txt = (f"at {len(ev)} command onset(s) the response starts {min(e['delay_s'] for e in ev) * 1e3:.3g} ms "
                 "or more after the command") if ev else "no command onset to check"
    if lag.get("lag_s") is None:
        issue("info", "causality", f"command-to-response lag not estimated: {lag.get('reason')}; {onset_txt}")
    elif lag["peak_correlation"] < 0.1:
        issue("info", "causality", f"command-to-response lag inconclusive (peak correlation "
                                   f"{lag['peak_correlation']:.2f}); {onset_txt}")
    elif lag["lag_samples"] < -1.0 and not leads:
        txt = (f"cross-correlation of increments puts position {-lag['lag_s'] * 1e3:.3g} ms "
               f"({-lag['lag_samples']:.1f} samples) ahead of position_target")
        if ev:
            issue("info", "causality", f"{txt}, but {onset_txt}: a nonlinear (saturated or gravity-limited) "
                                       "response, not a timestamp problem")
        else:
            issue("error", "causality", f"{txt}: the response precedes its command, likely a timestamp or "
                                        "causality problem")
    elif not leads:
        issue("info", "causality", f"position follows position_target with a lag of {lag['lag_s'] * 1e3:.3g} ms "
                                   f"({lag['lag_samples']:.1f} samples, correlation {lag['peak_correlation']:.2f}); "
                                   f"{onset_txt}")


def _audit_time(t: np.ndarray, report: dict[str, Any], issue: Callable[[str, str, str], None]) -> float:
    """Fill report["duration_s" / "timing" / "gaps" / "timestamps"]; returns the median step [s] (NaN if none)."""
    dt_all = np.diff(t)
    finite = np.isfinite(dt_all)
    dt = dt_all[finite]
    pos = dt[dt > 0]
    med = float(np.median(pos)) if pos.size else float("nan")
    report["duration_s"] = float(np.nanmax(t) - np.nanmin(t)) if np.isfinite(t).any() else 0.0
    timing: dict[str, Any] = {"dt_median_s": med, "sample_rate_hz": 1.0 / med if med > 0 else None,
                              "dt_std_s": float(np.std(pos)) if pos.size else None,
                              "dt_min_s": float(np.min(pos)) if pos.size else None,
                              "dt_max_s": float(np.max(pos)) if pos.size else None}
    timing["uniform"] = bool(pos.size and timing["dt_std_s"] <= 1e-4 * med)
    report["timing"] = timing
    if pos.size and not timing["uniform"]:
        rel = timing["dt_std_s"] / med
        issue("warning" if rel > 0.25 else "info", "non_uniform_sampling",
              f"non-uniform sampling: dt std {timing['dt_std_s'] * 1e3:.3g} ms ({rel:.1%} of the median "
              f"{med * 1e3:.3g} ms), dt range {timing['dt_min_s'] * 1e3:.3g}-{timing['dt_max_s'] * 1e3:.3g} ms; "
              "resample before fitting")

    # gaps and bad timestamps
    idx = np.flatnonzero(finite & (dt_all > GAP_FACTOR * med)) + 1 if med > 0 else np.array([], int)
    report["gaps"] = {"count": int(idx.size), "threshold_s": GAP_FACTOR * med if med > 0 else None,
                      "list": [{"sample": int(i), "t_before_s": float(t[i - 1]), "t_after_s": float(t[i]),
                                "dt_s": float(t[i] - t[i - 1])} for i in idx[:_MAX_LISTED]]}
    if idx.size:
        g = report["gaps"]["list"][0]
        issue("warning", "gap", f"{idx.size} gap(s) longer than {GAP_FACTOR:g}x the median step, first "
                                f"{g['dt_s'] * 1e3:.3g} ms at t={g['t_before_s']:.4g} s")
    dup = np.flatnonzero(finite & (dt_all == 0)) + 1
    back = np.flatnonzero(finite & (dt_all < 0)) + 1
    report["timestamps"] = {
        "duplicated": {"count": int(dup.size), "samples": dup[:_MAX_LISTED].tolist(),
                       "times_s": t[dup[:_MAX_LISTED]].tolist()},
        "non_monotonic": {"count": int(back.size), "samples": back[:_MAX_LISTED].tolist(),
                          "times_s": t[back[:_MAX_LISTED]].tolist()},
    }
    if dup.size:
        issue("error", "duplicate_timestamps",
              f"{dup.size} duplicated timestamp(s), first at sample {dup[0]} (t={t[dup[0]]:.6g} s)")
    if back.size:
        issue("error", "non_monotonic_timestamps",
              f"{back.size} timestamp(s) going back, first at sample {back[0]} "
              f"(t={t[back[0]]:.6g} s after t={t[back[0] - 1]:.6g} s)")

    return med


def _saturation_issues(sat: dict[str, Any], n: int, issue: Callable[[str, str, str], None]) -> None:
    if "pwm_duty" in sat and sat["pwm_duty"]["n_samples"]:
        s = sat["pwm_duty"]
        issue("warning", "saturation", f"pwm_duty at its cap |{s['level']:g}| for {s['n_samples']} samples "
                                       f"({s['fraction']:.1%}, longest run {s['longest_run_samples']})")
    if "controller_output" in sat and sat["controller_output"]["n_samples"]:
        s = sat["controller_output"]
        issue("warning", "saturation", f"controller_output sits on its max |value| {s['level']:.4g} for "
                                       f"{s['n_samples']} samples (runs of >= 3): likely clipped")
    if "position" in sat and sat["position"]["range"][1] - sat["position"]["range"][0] > sat["position"]["resolution"]:
        for label, e in sat["position"]["ends"].items():
            if e["longest_run_samples"] >= max(10, 0.05 * n):
                issue("info", "position_range_end",
                      f"position stays at its {label} {e['level']:.4g} for {e['longest_run_s']:.3g} s from "
                      f"t={e['longest_run_start_s']:.4g} s (a hold, a mechanical stop or a steady-state error)")



def _receive_delay(traj: Trajectory, med: float, report: dict[str, Any], issue: Callable[[str, str, str], None]) -> None:
    """Header stamp vs receive time (MCAP bags: receive_delay = log time - header stamp)."""
    if traj.has("receive_delay"):
        d = np.asarray(traj["receive_delay"], dtype=np.float64)
        d = d[np.isfinite(d)]
        if d.size:
            rd: dict[str, Any] = {"median_s": float(np.median(d)), "min_s": float(np.min(d)),
                                  "max_s": float(np.max(d)), "std_s": float(np.std(d)),
                                  "n_negative": int(np.sum(d < 0)), "time_base": traj.setup.extra.get("time_base")}
            report["receive_delay"] = rd
            if rd["n_negative"]:
                issue("error", "clock_mismatch",
                      f"{rd['n_negative']} message(s) stamped after they were received (log time - header stamp "
                      f"down to {rd['min_s'] * 1e3:.3g} ms): sender and recorder clocks disagree")
            elif med > 0 and rd["std_s"] > 0.25 * med:
                issue("warning", "receive_jitter",
                      f"receive delay varies by {rd['std_s'] * 1e3:.3g} ms (std; median {rd['median_s'] * 1e3:.3g} ms, "
                      f"max {rd['max_s'] * 1e3:.3g} ms), more than a quarter of the sample period"
                      + ("; the log-time base carries this jitter" if rd["time_base"] == "log" else ""))


def audit_log(traj: Trajectory) -> dict[str, Any]:
    """Audit ``traj`` (possibly loaded with ``strict=False``); returns a JSON-serializable dict.

    Keys: name, source_file, n_samples, duration_s, timing (median dt, sample rate, jitter std,
    min/max dt), gaps, timestamps (duplicated / non-monotonic), nan_counts, saturation,
    derived_channels, causality, latency, receive_delay (MCAP bags), issues (list of {severity, code, message}).
    """
    issues: list[dict[str, str]] = []

    def issue(severity: str, code: str, message: str) -> None:
        issues.append({"severity": severity, "code": code, "message": message})

    t = np.asarray(traj.time, dtype=np.float64)
    n = int(t.size)
    report: dict[str, Any] = {"name": traj.name, "source_file": traj.source_file, "n_samples": n,
                              "setup": {"actuator": traj.setup.actuator, "controller": traj.setup.controller}}
    if n < 10:
        issue("error", "too_few_samples", f"only {n} samples (at least 10 needed)")
    med = _audit_time(t, report, issue)

    # NaN
    nan_counts = {"time": int(np.sum(~np.isfinite(t)))}
    for name, x in traj.data.items():
        nan_counts[name] = int(np.sum(~np.isfinite(np.asarray(x, dtype=np.float64))))
    report["nan_counts"] = nan_counts
    for name, c in nan_counts.items():
        if c:
            sev = "error" if name in ("time", "position", "position_target") else "warning"
            issue(sev, "nan", f"{c} NaN/inf value(s) in {name}")

    # saturation
    sat = _saturation(traj)
    report["saturation"] = sat
    _saturation_issues(sat, n, issue)

    # derived / estimated channels
    derived = []
    for name, ch in traj.channels.items():
        words = [w for w in _DERIVED_WORDS if w in ch.source.lower()]
        if ch.kind == "estimated" or words:
            derived.append({"channel": name, "kind": ch.kind, "source": ch.source})
    report["derived_channels"] = derived
    if derived:
        issue("info", "derived_channels", "estimated or derived (not directly measured) channels: "
                                          + ", ".join(f"{d['channel']} ({d['kind']})" for d in derived))

    # latency
    neg = {name: ch.latency_s for name, ch in traj.channels.items() if ch.latency_s < 0}
    report["latency"] = {name: ch.latency_s for name, ch in traj.channels.items()}
    for name, lat in neg.items():
        issue("error", "negative_latency", f"channel {name} has negative latency {lat * 1e3:.3g} ms "
                                           "(a value cannot describe the future)")

    _receive_delay(traj, med, report, issue)

    # causality
    if traj.has("position") and traj.has("position_target"):
        enabled = traj["torque_enable"] > 0.5 if traj.has("torque_enable") else None
        lag = estimate_lag(t, traj["position_target"], traj["position"], enabled)
        onsets = onset_delays(t, traj["position_target"], traj["position"], enabled)
        report["causality"] = {**lag, "onsets": onsets}
        _causality_issues(lag, onsets, issue)
    else:
        report["causality"] = {"lag_s": None, "reason": "needs position and position_target"}

    for w in traj.setup.extra.get("warnings", []) or []:
        issue("warning", "importer", str(w))

    order = {"error": 0, "warning": 1, "info": 2}
    report["issues"] = sorted(issues, key=lambda i: order[i["severity"]])
    report["counts"] = {s: sum(i["severity"] == s for i in issues) for s in order}
    return _finite_or_none(report)


def _finite_or_none(x: Any) -> Any:
    """Recursively replace NaN/inf floats by None so that the report is strict JSON."""
    if isinstance(x, dict):
        return {k: _finite_or_none(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_finite_or_none(v) for v in x]
    if isinstance(x, (float, np.floating)):
        return float(x) if np.isfinite(x) else None
    if isinstance(x, np.integer):
        return int(x)
    if isinstance(x, np.bool_):
        return bool(x)
    return x


def render_audit(report: dict[str, Any]) -> list[str]:
    """Lines with rich markup (``console.print(line)`` each) summarising an :func:`audit_log` report."""
    from rich.markup import escape

    tm = report["timing"]
    lines = [f"[bold]{escape(report['name'])}[/bold]  {escape(report.get('source_file') or '')}"]
    rate = f"{tm['sample_rate_hz']:.1f} Hz" if tm.get("sample_rate_hz") else "n/a"
    lines.append(f"  {report['n_samples']} samples over {report['duration_s']:.3f} s; sample rate {rate} "
                 f"(median dt {tm['dt_median_s'] * 1e3:.3g} ms)" if tm.get("sample_rate_hz") else
                 f"  {report['n_samples']} samples; sample rate n/a")
    if tm.get("dt_std_s") is not None:
        lines.append(f"  jitter: dt std {tm['dt_std_s'] * 1e3:.3g} ms, dt max {tm['dt_max_s'] * 1e3:.3g} ms, "
                     f"dt min {tm['dt_min_s'] * 1e3:.3g} ms; gaps: {report['gaps']['count']}")
    ts = report["timestamps"]
    lines.append(f"  timestamps: {ts['duplicated']['count']} duplicated, {ts['non_monotonic']['count']} going back")
    nans = {k: v for k, v in report["nan_counts"].items() if v}
    lines.append("  NaN: " + (", ".join(f"{escape(k)} {v}" for k, v in nans.items()) if nans else "none"))
    c = report.get("causality", {})
    if c.get("lag_s") is not None:
        lines.append(f"  lag position_target -> position: {c['lag_s'] * 1e3:.3g} ms ({c['lag_samples']:.1f} samples, "
                     f"correlation {c['peak_correlation']:.2f})")
    style = {"error": "bold red", "warning": "yellow", "info": "cyan"}
    for i in report["issues"]:
        s = i["severity"]
        lines.append(f"  [{style[s]}]{s:7}[/{style[s]}] {escape(i['code'])}: {escape(i['message'])}")
    k = report["counts"]
    lines.append(f"  [bold]{k['error']} error(s), {k['warning']} warning(s), {k['info']} info[/bold]")
    return lines
