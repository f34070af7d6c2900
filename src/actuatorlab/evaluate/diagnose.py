"""Does the fitted model reach what the logs allow? The sensor floor and the structure of the residual.

A user has no truth to compare a fit with, but the logs themselves show how precisely they were
measured. :func:`sensor_floor` estimates, per log and from the logged samples only, the position
error [rad | m] that a perfect model would still show:

* encoder quantisation: positions lie on a lattice ``q = q0 + n s``; the step ``s`` is the
  smallest non-zero position difference that divides the others (:func:`lattice_step`). A
  position rounded to the nearest step has an error uniform on ``[-s/2, s/2]``, of mean absolute
  value ``s / 4`` (Widrow & Kollar, *Quantization Noise*, Cambridge UP 2008, ch. 4);
* timestamp jitter: host timestamps ``t_k = k T + e_k`` with independent ``e_k`` of standard
  deviation ``sigma_t`` give sample periods of standard deviation ``sqrt(2) sigma_t``, estimated
  robustly as ``1.4826 MAD(dt)`` (gaps are outliers and do not count). A sample stamped ``sigma_t``
  off reads ``dq e_k`` off in position, of mean absolute value ``sqrt(2/pi) sigma_t mean|dq|`` for
  Gaussian ``e_k`` (IEEE Std 1241-2010, jitter as an additive error ``dq * e``). When the stamps
  are exact and only the sampling instants vary (the device stamps its readings), this term
  overestimates the floor;
* white measurement noise, only for positions on no lattice (a lattice's noise *is* its
  quantisation): ``sigma_n = 1.4826 MAD(d2q) / sqrt(6)`` from the second differences of the
  position (``Var(d2 n) = 6 sigma_n^2`` for white ``n``), of mean absolute value
  ``sqrt(2/pi) sigma_n``.

Independent error terms add in variance; the per-log floor is the root sum of squares of the
terms' mean absolute values (exact for Gaussian terms up to the common factor, within 8 % for a
uniform one). The pooled floor weights logs by their samples, like the pooled MAE
(:func:`~actuatorlab.evaluate.metrics.summarize`).

:func:`structure_tests` asks whether the residual ``e = q_sim - q_meas`` of the in-sample replay
depends on the operating regime, for each factor:

* ``direction``: signed ``e`` by the sign of the measured velocity (moving samples only):
  directional friction, an asymmetric load, a position offset in the firmware;
* ``position``: signed ``e`` in 8 bins of the measured position (equal counts): ripple or
  cogging, an encoder offset, or on a pendulum a mechanism that follows the gravity torque (the
  side of a backlash gap, the deflection of a compliance);
* ``load``, ``gain``: ``|e|`` by the logs' ``load`` / ``gain`` condition group (only with at least
  two groups);
* ``near_reversal``, ``low_speed``, ``high_speed``: ``|e|`` inside vs outside the regime of
  :func:`~actuatorlab.evaluate.metrics.regime_masks`: backlash or stick-slip at reversals, stiction
  at low speed, the torque-speed limit or viscous friction at high speed.

The statistic is the share of the variance that the regime's bins explain, ``eta^2 =
sum_b n_b (m_b - m)^2 / sum_i (x_i - m)^2`` (Fisher's correlation ratio), computed on the ranks of
``e`` (signed factors) or ``|e|`` (the others), which makes it Kruskal-Wallis' ``epsilon^2``
(Kruskal & Wallis, JASA 1952; Tomczak & Tomczak, Trends Sport Sci. 2014): one diverged log
cannot make a regime look structured. A replay residual is
strongly autocorrelated, so samples are not exchangeable and a plain permutation test would fire
on any smooth error; the null distribution comes from circular shifts of each log's regime labels
against its residual (which keep both autocorrelations), and for the per-log condition labels from
permutations of the labels between logs. A regime is ``structured`` when ``p <= p_limit``, ``eta^2
>= eta2_min`` and its amplitude (RMS of the bin means about the mean for signed factors; the
excess of the regime's MAE over the rest for ``|e|`` factors) is above ``structure_floors`` (2)
times the sensor floor: a model that represents the actuator may reach ``ratio_limit`` (3) floors,
one of them the sensors' own, so a pattern below two floors is within what it is allowed.

:func:`diagnose` combines both: the warning fires when the in-sample MAE exceeds
``ratio_limit`` times the floor or when a regime is structured, and names the strongest regime.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, Sequence

import numpy as np

from ..logs.format import Trajectory
from ..logs.lattice import lattice_step
from .metrics import LogResult, regime_masks

__all__ = ["LogFloor", "lattice_step", "log_floor", "sensor_floor", "RegimeTest", "structure_tests",
           "DiagnoseConfig", "diagnose"]

_MAD = 1.4826  # MAD -> standard deviation of a Gaussian
_GAUSS_MAE = math.sqrt(2.0 / math.pi)  # E|x| / std(x) for a Gaussian x


@dataclass(frozen=True)
class LogFloor:
    """The measurement floor of one log, from its own samples (module docstring).

    Attributes:
        name: the log.
        n_samples: samples with a finite time and position.
        quantum: [rad | m] encoder step; 0 when the positions lie on no lattice.
        quantisation_mae: [rad | m] ``quantum / 4``.
        jitter_s: [s] timestamp jitter (standard deviation per stamp).
        jitter_mae: [rad | m] ``sqrt(2/pi) jitter_s mean|dq|``.
        noise_mae: [rad | m] white position noise off any lattice (0 on a lattice).
        mae: [rad | m] the floor: root sum of squares of the three terms.
    """

    name: str
    n_samples: int
    quantum: float
    quantisation_mae: float
    jitter_s: float
    jitter_mae: float
    noise_mae: float
    mae: float


def log_floor(traj: Trajectory) -> LogFloor:
    """The sensor floor of one log (module docstring): quantisation, jitter and noise from its samples."""
    t = np.asarray(traj.time, np.float64)
    q = np.asarray(traj["position"], np.float64)
    ok = np.isfinite(t) & np.isfinite(q)
    t, q = t[ok], q[ok]
    if t.size < 5:
        return LogFloor(traj.name, int(t.size), 0.0, 0.0, 0.0, 0.0, 0.0, 0.0)
    step = lattice_step(q)
    dt = np.diff(t)
    good = dt > 0
    dt_med = float(np.median(dt[good])) if good.any() else 0.0
    jitter = _MAD * float(np.median(np.abs(dt[good] - dt_med))) / math.sqrt(2.0) if good.any() else 0.0
    speed = np.abs(np.diff(q)[good] / dt[good]) if good.any() else np.zeros(1)
    jitter_mae = _GAUSS_MAE * jitter * float(np.mean(speed))
    noise_mae = 0.0
    if step == 0.0:
        d2 = np.diff(q, 2)
        noise_mae = _GAUSS_MAE * _MAD * float(np.median(np.abs(d2 - np.median(d2)))) / math.sqrt(6.0)
    quant_mae = step / 4.0
    return LogFloor(traj.name, int(t.size), step, quant_mae, jitter, jitter_mae, noise_mae,
                    math.sqrt(quant_mae ** 2 + jitter_mae ** 2 + noise_mae ** 2))


def sensor_floor(trajs: Sequence[Trajectory]) -> tuple[float, list[LogFloor]]:
    """(pooled floor [rad | m], per-log floors): the per-log floors weighted by their samples."""
    logs = [log_floor(tr) for tr in trajs]
    n = sum(f.n_samples for f in logs)
    return (sum(f.mae * f.n_samples for f in logs) / n if n else 0.0), logs


@dataclass(frozen=True)
class RegimeTest:
    """One factor's test of the residual (module docstring).

    Attributes:
        regime: direction | position | load | gain | near_reversal | low_speed | high_speed.
        eta2: [1] share of the variance explained by the regime's bins.
        p_value: [1] circular-shift (permutation for ``load`` and ``gain``) p-value of ``eta2``.
        amplitude: [rad | m] RMS of the bin means (signed factors), or the regime's MAE minus the
            rest's (``|e|`` factors).
        structured: p_value <= p_limit, eta2 >= eta2_min and amplitude above structure_floors floors.
        detail: where the error is, in words with numbers.
    """

    regime: str
    eta2: float
    p_value: float
    amplitude: float
    structured: bool
    detail: str


@dataclass(frozen=True)
class DiagnoseConfig:
    """Thresholds of :func:`diagnose`.

    Attributes:
        ratio_limit: [1] the warning fires above this in-sample MAE / floor (3: the in-sample
            error that issue 43 expects of a model that represents the actuator).
        p_limit: [1] significance of a regime's structure.
        structure_floors: [1] a structured regime's amplitude must exceed this many floors (2 =
            ratio_limit - 1: the error above the floor that a model that represents the
            actuator may still show; refits of in-family synthetic logs leave direction and
            position patterns of 1.2-1.5 floors).
        eta2_min: [1] smallest share of the residual's variance a regime must explain.
        shifts: circular shifts (or permutations) drawn for the null distribution.
        seed: of those draws.
    """

    ratio_limit: float = 3.0
    p_limit: float = 0.01
    structure_floors: float = 2.0
    eta2_min: float = 0.05
    shifts: int = 199
    seed: int = 0


_SIGNED = ("direction", "position")
_CONDITIONS = ("load", "gain")
_MAGNITUDE = ("near_reversal", "low_speed", "high_speed")
_WHY = {
    "direction": "directional friction or an asymmetric load",
    "position": "ripple or cogging, or a mechanism that follows the gravity load (backlash side, compliance)",
    "load": "load-dependent friction or inertia",
    "gain": "the firmware's gain law",
    "near_reversal": "backlash or stick-slip",
    "low_speed": "stiction",
    "high_speed": "the torque-speed limit or viscous friction",
}


def _eta2(x: np.ndarray, labels: np.ndarray, n_bins: int) -> float:
    """Correlation ratio of ``x`` (N,) by integer ``labels`` (N,) in [0, n_bins); -1 labels are left out."""
    keep = labels >= 0
    x, lab = x[keep], labels[keep]
    if x.size < 3:
        return 0.0
    n = np.bincount(lab, minlength=n_bins).astype(float)
    s = np.bincount(lab, weights=x, minlength=n_bins)
    m = float(x.mean())
    total = float(np.sum((x - m) ** 2))
    if total <= 0.0:
        return 0.0
    used = n > 0
    return float(np.sum((s[used] / n[used] - m) ** 2 * n[used]) / total)


def _ranks(x: np.ndarray) -> np.ndarray:
    """Ranks of ``x`` (N,) scaled to [0, 1] (ties broken by order): the statistic of a heavy-tailed error."""
    r = np.empty(x.size)
    r[np.argsort(x, kind="stable")] = np.arange(x.size)
    return r / max(x.size - 1, 1)


def _split(x: np.ndarray, like: Sequence[np.ndarray]) -> list[np.ndarray]:
    """``x`` (N,) cut into the lengths of ``like``."""
    return np.split(x, np.cumsum([a.size for a in like])[:-1])


def _bin_means(x: np.ndarray, labels: np.ndarray, n_bins: int) -> tuple[np.ndarray, np.ndarray]:
    keep = labels >= 0
    n = np.bincount(labels[keep], minlength=n_bins).astype(float)
    s = np.bincount(labels[keep], weights=x[keep], minlength=n_bins)
    return np.where(n > 0, s / np.maximum(n, 1.0), np.nan), n


def _shift_p(x: list[np.ndarray], labels: list[np.ndarray], n_bins: int, observed: float,
             rng: np.random.Generator, shifts: int) -> float:
    """p-value of ``observed`` against ``eta2`` of each log's labels rolled by a random offset
    (between 10 % and 90 % of the log) against its residual."""
    xs = np.concatenate(x)
    hits = 0
    for _ in range(shifts):
        rolled = [np.roll(lab, int(rng.integers(max(1, lab.size // 10), max(2, 9 * lab.size // 10))))
                  for lab in labels]
        hits += _eta2(xs, np.concatenate(rolled), n_bins) >= observed
    return (1 + hits) / (1 + shifts)


def _factor_labels(results: Sequence[LogResult]) -> dict[str, list[np.ndarray]]:
    """Per factor, per log: integer labels (T_i,) of the masked samples (-1: not in any bin)."""
    q_all = np.concatenate([r.q_meas[r.mask] for r in results])
    edges = np.quantile(q_all, np.linspace(0, 1, 9)[1:-1]) if q_all.size else np.zeros(0)
    out: dict[str, list[np.ndarray]] = {k: [] for k in _SIGNED + _MAGNITUDE}
    for r in results:
        masks = {k: v[r.mask] for k, v in regime_masks(r).items()}
        dq = r.dq_meas[r.mask]
        moving = ~masks["low_speed"] & np.isfinite(dq)
        out["direction"].append(np.where(moving, (dq > 0).astype(int), -1))
        out["position"].append(np.searchsorted(edges, r.q_meas[r.mask]).astype(int))
        for k in _MAGNITUDE:
            out[k].append(masks[k].astype(int))
    return out


def _detail(regime: str, x: np.ndarray, lab: np.ndarray, n_bins: int, unit: str, names: Sequence[str] = ()) -> str:
    means, n = _bin_means(x, lab, n_bins)
    k = 1e3
    u = "mrad" if unit == "rad" else "mm"
    if regime == "direction":
        return (f"mean error {k * means[1]:+.2f} {u} moving +, {k * means[0]:+.2f} {u} moving -")
    if regime == "position":
        b = int(np.nanargmax(np.abs(means - np.nansum(means * n) / n.sum())))
        return f"mean error {k * means[b]:+.2f} {u} in position bin {b + 1}/8 ({names[b] if names else ''})"
    if regime in _CONDITIONS:
        b = int(np.nanargmax(means))
        return f"MAE {k * means[b]:.2f} {u} at {regime} {names[b]} vs " + ", ".join(
            f"{k * means[j]:.2f} at {names[j]}" for j in range(n_bins) if j != b)
    return f"MAE {k * means[1]:.2f} {u} there vs {k * means[0]:.2f} {u} elsewhere ({100 * n[1] / n.sum():.0f} % of samples)"


def structure_tests(results: Sequence[LogResult], floor: float,
                    config: DiagnoseConfig = DiagnoseConfig()) -> list[RegimeTest]:
    """Each factor's test (module docstring) on the replay residuals of ``results``, strongest first."""
    rng = np.random.default_rng(config.seed)
    results = [r for r in results if r.mask.any()]
    if not results:
        return []
    unit = results[0].unit
    err = [(r.q_sim - r.q_meas)[r.mask] for r in results]
    fin = [np.isfinite(e) for e in err]
    err = [np.where(f, e, 0.0) for e, f in zip(err, fin)]
    labels = _factor_labels(results)
    labels = {k: [np.where(f, lab, -1) for lab, f in zip(v, fin)] for k, v in labels.items()}
    tests = []
    q_all = np.concatenate([r.q_meas[r.mask] for r in results])
    qe = np.quantile(q_all, np.linspace(0, 1, 9))
    pos_names = [f"{qe[i]:.3g} to {qe[i + 1]:.3g} {unit}" for i in range(8)]
    for regime, lab in labels.items():
        signed = regime in _SIGNED
        n_bins = 8 if regime == "position" else 2
        xs, ls = np.concatenate([e if signed else np.abs(e) for e in err]), np.concatenate(lab)
        x = _split(_ranks(xs), err)
        eta = _eta2(np.concatenate(x), ls, n_bins)
        means, n = _bin_means(xs, ls, n_bins)
        if (n > 0).sum() < 2:
            continue
        if signed:
            m = float(np.nansum(means * n) / n.sum())
            amp = float(np.sqrt(np.nansum(n * (means - m) ** 2) / n.sum()))
        else:
            amp = float(means[1] - means[0])
        p = _shift_p(x, lab, n_bins, eta, rng, config.shifts)
        tests.append(RegimeTest(regime, eta, p, amp, bool(p <= config.p_limit and eta >= config.eta2_min
                                                          and amp > config.structure_floors * floor),
                                _detail(regime, xs, ls, n_bins, unit, pos_names)))
    for key in _CONDITIONS:
        test = _condition_test(key, results, err, floor, config, rng)
        if test is not None:
            tests.append(test)
    return sorted(tests, key=lambda t: (not t.structured, -t.eta2))


def _condition_test(key: str, results: Sequence[LogResult], err: list[np.ndarray], floor: float,
                    config: DiagnoseConfig, rng: np.random.Generator) -> RegimeTest | None:
    """``|e|`` by the logs' condition ``key`` (None with fewer than two groups), p from permutations
    of the labels between logs."""
    groups = [r.conditions.get(key) for r in results]
    names = sorted({g for g in groups if g is not None})
    if len(names) < 2:
        return None
    idx = np.array([names.index(g) if g is not None else -1 for g in groups])
    x = np.concatenate([np.abs(e) for e in err])
    rx = _ranks(x)
    owner = np.concatenate([np.full(e.size, i) for i, e in enumerate(err)])
    eta = _eta2(rx, idx[owner], len(names))
    hits = sum(_eta2(rx, rng.permutation(idx)[owner], len(names)) >= eta for _ in range(config.shifts))
    p = (1 + hits) / (1 + config.shifts)
    means, n = _bin_means(x, idx[owner], len(names))
    amp = float(np.nanmax(means) - np.nanmin(means))
    structured = p <= config.p_limit and eta >= config.eta2_min and amp > config.structure_floors * floor
    return RegimeTest(key, eta, p, amp, bool(structured),
                      _detail(key, x, idx[owner], len(names), results[0].unit, names))


def diagnose(trajs: Sequence[Trajectory], results: Sequence[LogResult], model: str,
             config: DiagnoseConfig = DiagnoseConfig()) -> dict[str, Any]:
    """The ``diagnosis`` record of a fit: the floor of ``trajs``, the in-sample MAE of ``results``
    (the replay of ``model`` on the same logs), the ratio, the regime tests, whether the warning
    fires and its one-line message (module docstring). Keys: floor, floor_terms, unit,
    in_sample_mae, ratio, ratio_limit, regimes, structured, fired, message, per_log."""
    floor, logs = sensor_floor(trajs)
    unit = results[0].unit if results else "rad"
    e = np.concatenate([np.abs(r.q_sim - r.q_meas)[r.mask] for r in results]) if results else np.zeros(0)
    mae = float(np.mean(e)) if e.size else math.nan
    ratio = mae / floor if floor > 0 else math.nan  # no floor (positions never move): not judged
    tests = structure_tests(results, floor, config)
    structured = [t for t in tests if t.structured]
    over = not math.isfinite(mae) or (floor > 0 and not ratio <= config.ratio_limit)  # NaN: a diverged replay
    fired = bool(over or structured)
    n = sum(f.n_samples for f in logs) or 1
    terms = {k: sum(getattr(f, k) * f.n_samples for f in logs) / n
             for k in ("quantisation_mae", "jitter_mae", "noise_mae")}
    return {"floor": floor, "floor_terms": terms, "unit": unit, "in_sample_mae": mae,
            "ratio": None if not math.isfinite(ratio) else ratio, "ratio_limit": config.ratio_limit,
            "regimes": [asdict(t) for t in tests], "structured": [t.regime for t in structured],
            "strongest": _strongest(tests, floor), "fired": fired,
            "message": _message(model, mae, floor, ratio, over, fired, tests, unit),
            "per_log": [asdict(f) for f in logs]}


def _strongest(tests: Sequence[RegimeTest], floor: float) -> str | None:
    """The regime named by the message: the first structured one, else the largest ``eta2`` among
    those with ``p <= 0.05`` whose amplitude is above the floor (a weaker hint), else None."""
    hints = [t for t in tests if t.structured] or sorted(
        (t for t in tests if t.p_value <= 0.05 and t.amplitude > floor), key=lambda t: -t.eta2)
    return hints[0].regime if hints else None


def _message(model: str, mae: float, floor: float, ratio: float, over: bool, fired: bool,
             tests: Sequence[RegimeTest], unit: str) -> str:
    """The one line ``fit`` prints (a warning when ``fired``)."""
    k, u = 1e3, ("mrad" if unit == "rad" else "mm")
    if not math.isfinite(mae):
        return f"the replay of the training logs with the model ({model}) diverges: its error is not finite"
    if not fired:
        if not floor > 0:
            return (f"the model ({model}) is at {k * mae:.3g} {u} in sample; the logs show no sensor floor "
                    "(their positions never move), so the ratio is not judged")
        return (f"the model ({model}) is at {k * mae:.3g} {u} in sample, {ratio:.1f}x the sensor floor the logs "
                f"show ({k * floor:.2g} {u}), and its error has no structure above the floor")
    name = _strongest(tests, floor)
    t = next((x for x in tests if x.regime == name), None)
    if t is None:
        where = "no regime stands out (the error is spread over all of them)"
    else:
        where = (f"the error concentrates {_where(t)}" if t.structured else
                 f"the error leans {_where(t)}, p {t.p_value:.2g}, below the structure thresholds")
    head = (f"the best model ({model}) is at {k * mae:.3g} {u} in sample, {ratio:.0f}x the sensor floor the "
            f"logs show ({k * floor:.2g} {u})" if over else
            f"the model ({model}) is at {k * mae:.3g} {u} in sample ("
            + (f"{ratio:.1f}x the sensor floor, {k * floor:.2g} {u}" if floor > 0 else "the logs show no sensor floor")
            + ") but its error is structured")
    return (f"{head}; {where}: the family may not represent this actuator, "
            "or the search stopped short of the best member")


def _where(t: RegimeTest) -> str:
    place = {"direction": "in the direction of motion", "position": "by position", "load": "at one load",
             "gain": "at one controller gain",
             "near_reversal": "near reversals", "low_speed": "at low speed", "high_speed": "at high speed"}[t.regime]
    return f"{place} ({t.detail}; eta2 {t.eta2:.2f}, {_WHY[t.regime]})"
