"""A randomization spec proposed from fitted model files (``actuatorlab randomize``).

:func:`propose_spec` writes, from one or more identified ``model.json`` files, a spec of the
format of :mod:`actuatorlab.sim.randomization` (docs/randomization.md): an ``identified`` entry with
the fit's own covariance in natural space (:func:`identified_covariance`: jackknife refits first,
else the Jacobian standard errors) and, from several units of one actuator type, ``unit`` entries
with the unit-to-unit spread. :func:`propose_fleet_spec` does the same from one whole-robot fit per
joint (``arm_model.json``, ``fit --robot R`` with ``per_joint``): the robot's joints are the units.
"""

from __future__ import annotations

from typing import Mapping

import numpy as np

from .. import __version__
from ..models.actuator_model import LEARNED_KINDS
from ..models.params import PARAMS, bounds_for
from ..robots.bounds import set_bounds
from ..robots.fixed_base import joint_types
from ..robots.loader import load_robot
from .randomization import RandomizationError, SPEC_FORMAT, SPEC_VERSION

__all__ = ["identified_covariance", "propose_spec", "propose_fleet_spec"]

#: what a whole-robot fit records about its parameters' uncertainty (nothing, today)
NO_ARM_UNCERTAINTY = ("the whole-robot fit (arm_model.json) records no parameter uncertainty (no jackknife refits, "
                      "no Jacobian): no identified entry; the unit spread below includes each joint's estimation error")


def _space(name: str) -> str:
    return "log" if PARAMS[name].scale == "log" else "linear"


def _natural(name: str, x):
    x = np.asarray(x, float)
    return np.log(x) if _space(name) == "log" else x


def _determination(n: str, flags: list[bool | None], units: str) -> tuple[dict | None, str]:
    """What the units' own fits say of parameter ``n`` (their sensitivity passes: a value that moved
    alone by -+10 % changes the fit's error by less than 2 % is not determined by its logs): ``flags`` one
    entry per unit, True / False, None where the fit records nothing (no sensitivity pass, a value at 0).
    Returns ({"determined": k, "of": m} over the m units that record it, or None when none does, and the
    sentence the entry's note ends with)."""
    known = [bool(f) for f in flags if f is not None]
    if not known:
        return None, ""
    k, m = sum(known), len(known)
    note = (f"; none of the {m} {units}' fits determines {n} (sensitivity pass): this spread is their estimation "
            "error, not unit variation") if k == 0 else f"; {k} of {m} {units}' fits determine {n} (sensitivity pass)"
    return {"determined": k, "of": m}, note


def identified_covariance(d: Mapping) -> tuple[list[str], np.ndarray, str, str]:
    """(names, covariance in natural space, source, note) of one model.json's identification.

    Preference: the jackknife refits (``uncertainty.estimates``: delete-a-group covariance
    ``(G-1)/G sum_g (z_g - z_bar)(z_g - z_bar)^T`` of the natural-space refits, keeps the
    autocorrelation of the residuals and the correlations between parameters); else the Jacobian
    standard errors and correlation matrix (``identifiability``, optimistic: assumes independent
    residuals), mapped to log space by the delta method (se / value); else none."""
    params = d["parameters"]
    free = [n for n, e in params.items() if e.get("free")]
    unc = d.get("uncertainty") or {}
    est = unc.get("estimates") or {}
    names = [n for n in free if n in est and len(est[n]) >= 2]
    degenerate = ""
    if names:
        Z = np.stack([_natural(n, est[n]) for n in names], axis=1)  # (G, k)
        G = Z.shape[0]
        dev = Z - Z.mean(axis=0)
        cov = (G - 1) / G * dev.T @ dev
        z_fit = np.array([_natural(n, params[n]["value"]) for n in names])
        stuck = int(np.sum(np.all(np.abs(Z - z_fit) <= 1e-9 * np.maximum(1.0, np.abs(z_fit)), axis=1)))
        note = (f"{unc.get('method') or 'jackknife'}: covariance of the refits in natural (log for positive "
                "parameters) space; keeps the autocorrelation of the residuals")
        if 2 * stuck <= G:
            return names, cov, "jackknife", note
        degenerate = (f"{stuck} of {G} jackknife refits did not move from the all-data optimum (rank "
                      f"{np.linalg.matrix_rank(cov)} spread for {len(names)} parameters; refit with a larger "
                      "budget for a usable jackknife)")
        if not (d.get("identifiability") or {}).get("stderr"):
            return names, cov, "jackknife", note + "; warning: " + degenerate
    ident = d.get("identifiability") or {}
    se = ident.get("stderr") or {}
    inames = list(ident.get("names") or [])
    names = [n for n in free if se.get(n) is not None and n in inames]
    if names:
        corr_full = ident.get("correlation")
        idx = [inames.index(n) for n in names]
        if corr_full is not None and all(corr_full[i][j] is not None for i in idx for j in idx):
            corr = np.array([[corr_full[i][j] for j in idx] for i in idx], float)
            how = "with its correlation matrix"
        else:
            corr = np.eye(len(names))
            how = "marginal only (correlations unknown: independent)"
        s = np.array([se[n] / abs(params[n]["value"]) if _space(n) == "log" else se[n] for n in names])
        return names, corr * np.outer(s, s), "jacobian", (
            (f"{degenerate}: used instead " if degenerate else "") +
            f"Jacobian standard errors {how}, log parameters by the delta method (se / value); they "
            "assume independent residuals and are optimistic (run `fit --jackknife log` for a "
            "spread that survives autocorrelation)")
    return [], np.zeros((0, 0)), "none", "the model file records no parameter uncertainty"


def propose_spec(models: list[Mapping], sources: list[str] | None = None) -> dict:
    """A spec document proposed from one or several fitted one-joint model files (loaded dicts).

    * ``identified``: the fit's parameter distribution (:func:`identified_covariance`); with several
      files the average of their covariances over the parameters they share;
    * ``unit`` (several files = several units of the same actuator): the spread of each shared free
      parameter across units (sample std, ddof 1, of the natural-space values: ``lognormal`` for
      positive parameters, ``add_normal`` otherwise); ``q_offset`` becomes a
      ``calibration_offset``. The spread across units includes each fit's estimation error, so
      it is an upper bound on the true unit-to-unit variation. How many of the units' fits
      determine the parameter (their ``determined`` flags, the sensitivity pass) is recorded
      (``source.units[n].fits``, the entry's note); a parameter none of them determines is listed in
      ``source.undetermined``: its spread is estimation error, not unit variation (the entry stays);
    * ``drift``: when the training envelope recorded winding temperature and the model has a
      temperature coefficient of R: R drifts relative, ``first_order``, c ~ N(0, tempco x half
      the temperature span seen), tau = thermal_resistance x thermal_capacitance.

    Returns a document ready for :func:`save_spec`, with ``source`` describing where it came from.
    """
    if not models:
        raise RandomizationError("randomize: no model files given")
    sources = list(sources or [f"model {i}" for i in range(len(models))])
    for d, s in zip(models, sources):
        if d.get("kind") in LEARNED_KINDS:
            raise RandomizationError(f"{s}: a learned model has no parameter distribution to randomize")
    entries: list[dict] = []
    per = [identified_covariance(d) for d in models]
    shared = [n for n in per[0][0] if all(n in p[0] for p in per)]
    if shared:
        covs = [p[1][np.ix_([p[0].index(n) for n in shared], [p[0].index(n) for n in shared])] for p in per]
        cov = np.mean(covs, axis=0)
        kinds = sorted({p[2] for p in per})
        note = per[0][3] if len(models) == 1 else (
            f"average over {len(models)} units of: " + "; ".join(sorted({p[3] for p in per})))
        p0 = models[0]["parameters"]
        bounds = ([[float(p0[n]["lower"]), float(p0[n]["upper"])] for n in shared]
                  if all(p0[n].get("lower") is not None and p0[n].get("upper") is not None for n in shared) else None)
        entries.append({"name": "identified", "kind": "identified", "parameters": shared,
                        "space": [_space(n) for n in shared], "covariance": cov.tolist(),
                        **({"bounds": bounds} if bounds else {}),
                        "per_actuator": False, "uncertainty_source": "+".join(kinds), "note": note})
    units = None
    undetermined: list[str] = []
    if len(models) >= 2:
        free = [n for n, e in models[0]["parameters"].items() if e.get("free")
                and all(m["parameters"].get(n, {}).get("free") for m in models[1:])]
        units = {}
        for n in free:
            vals = np.array([float(m["parameters"][n]["value"]) for m in models])
            z = _natural(n, vals)
            std = float(np.std(z, ddof=1))
            units[n] = {"values": vals.tolist(), "std": std}
            det, det_note = _determination(n, [m["parameters"][n].get("determined") for m in models], "units")
            if det is not None:
                units[n]["fits"] = det
                undetermined += [n] if det["determined"] == 0 else []
            common = {"name": f"{n}_unit" if n != "q_offset" else "calibration", "parameter": n,
                      "note": f"spread of the fitted {n} across {len(models)} units (sample std, "
                              f"{'log space' if _space(n) == 'log' else PARAMS[n].unit}); includes each "
                              "fit's estimation error" + det_note}
            if n == "q_offset":
                entries.append({**common, "kind": "calibration_offset", "distribution": "add_normal", "std": std})
            elif _space(n) == "log":
                entries.append({**common, "kind": "unit", "distribution": "lognormal", "std": std})
            else:
                lo, hi = models[0]["parameters"][n].get("lower"), models[0]["parameters"][n].get("upper")
                e = {**common, "kind": "unit", "distribution": "add_normal", "std": std}
                if lo is not None and hi is not None:
                    e["clip"] = [lo, hi]
                entries.append(e)
    env = models[0].get("envelope") or {}
    temp = (env.get("dimensions") or {}).get("temperature")
    p0 = models[0]["parameters"]
    if temp and "R" in p0:
        tempco = float(p0.get("resistance_tempco", {}).get("value", PARAMS["resistance_tempco"].neutral))
        tau = (float(p0.get("thermal_resistance", {}).get("value", PARAMS["thermal_resistance"].neutral))
               * float(p0.get("thermal_capacitance", {}).get("value", PARAMS["thermal_capacitance"].neutral)))
        span = float(temp["max"]) - float(temp["min"])
        entries.append({"name": "R_heating", "kind": "drift", "parameter": "R", "shape": "first_order",
                        "mode": "relative", "mean": 0.0, "std": tempco * span / 2, "time_constant": tau,
                        "note": f"winding temperature seen in training spans {span:.1f} degC; R changes by "
                                f"resistance_tempco {tempco:g}/K, with the thermal time constant R_th C_th"})
    return {"format": SPEC_FORMAT, "format_version": SPEC_VERSION,
            "description": "proposed by `actuatorlab randomize` from the identification; edit freely",
            "source": {"models": sources, "model": [m.get("model") for m in models],
                       "actuator": [m.get("actuator") for m in models],
                       "values": {n: float(models[0]["parameters"][n]["value"]) for n in shared},
                       "uncertainty": [{"file": s, "source": p[2], "note": p[3]} for s, p in zip(sources, per)],
                       "units": units, **({"undetermined": undetermined} if undetermined else {}),
                       "package_version": __version__},
            "entries": entries}


def _estimation_var(joints: list[str], of: Mapping[str, str], se: Mapping | None) -> float | None:
    """v_e = sum_t (1 - 1/n_t) sum_{j in t} se_j^2 / (n - T): the expected contribution of the joints'
    estimation errors (natural-space standard errors ``se`` {joint: se}) to the pooled within-type variance
    of :func:`propose_fleet_spec` (n joints, T types with n_t joints); None when a joint has no se."""
    if not se or any(se.get(j) is None for j in joints):
        return None
    by_type: dict[str, list[float]] = {}
    for j in joints:
        by_type.setdefault(of[j], []).append(float(se[j]) ** 2)
    return sum((1 - 1 / len(v)) * sum(v) for v in by_type.values()) / (len(joints) - len(by_type))


def _pooled_spread(n: str, vals: Mapping[str, float], of: Mapping[str, str], types: list[str]) -> tuple[float, dict]:
    """(s, the spec's ``source.units`` record) of parameter ``n``'s values per joint: the pooled within-type
    standard deviation in natural space, s^2 = sum_t sum_{j in t} (z_j - mean_t z)^2 / (n - T)."""
    z = {j: float(_natural(n, v)) for j, v in vals.items()}
    by_type = {t: [z[j] for j in vals if of[j] == t] for t in types}
    ss = sum(float(np.sum((np.array(v) - np.mean(v)) ** 2)) for v in by_type.values() if v)
    std = float(np.sqrt(ss / (len(vals) - len([v for v in by_type.values() if v]))))
    return std, {"values": dict(vals), "std": std,
                 "type_std": {t: float(np.std(v, ddof=1)) if len(v) > 1 else None for t, v in by_type.items()}}


def _less_estimation(e: dict, std: float, v_e: float, record: dict, dropped: list[dict]) -> bool:
    """The unit entry ``e`` (raw pooled spread ``std``) less the joints' estimation variance ``v_e``
    (method of moments, :func:`propose_fleet_spec`): ``e`` and the parameter's ``source.units`` ``record``
    updated in place; False, and a ``dropped`` item, when s^2 <= v_e (no unit entry)."""
    n = e["parameter"]
    s_u2 = std**2 - v_e
    corr = {"std_raw": std, "estimation_std": float(np.sqrt(v_e)), "std_corrected": float(np.sqrt(max(s_u2, 0.0)))}
    record.update(corr)
    if s_u2 <= 0:
        dropped.append({"parameter": n, **corr,
                        "note": f"the spread of the fitted {n} across joints ({std:.4g}) is not larger than "
                                f"its estimation error ({np.sqrt(v_e):.4g}, jackknife): no unit entry"})
        return False
    e.update(std=corr["std_corrected"], std_raw=std, estimation_std=corr["estimation_std"],
             note=e["note"].replace("includes each joint's estimation error",
                                    f"less each joint's estimation variance (jackknife, method of moments): "
                                    f"raw {std:.4g}, estimation {np.sqrt(v_e):.4g}, corrected "
                                    f"{corr['std_corrected']:.4g}"))
    return True


def propose_fleet_spec(d: Mapping, source: str) -> dict:
    """A spec document proposed from one whole-robot fit per joint (an ``arm_model.json`` with
    ``per_joint``, loaded dict): the robot's joints are the units of its actuator types.

    * ``unit``, one entry per fitted parameter: the spread across units *within* a type, pooled over the
      types (types: the joint-name suffixes that group the joints, :func:`~actuatorlab.robots.fixed_base.
      joint_types`, ANYmal C's HAA / HFE / KFE; else the config's actuator types), in natural space
      (z = log p for a log-scale parameter)::

          s^2 = sum_t sum_{j in t} (z_j - mean_t z)^2 / (n - T)      (n joints, T types)

      ``lognormal`` with std s for a log-scale parameter, ``add_normal`` otherwise, clipped to the
      robot config's search bounds (:mod:`actuatorlab.robots.bounds`) or the "servo" profile. The spread
      includes each joint's estimation error: an upper bound on the true unit-to-unit variation where
      the data pins each joint down, an overstatement where it does not;
    * when the fit carries the jackknife of its refits (``uncertainty.stderr_natural``, the fit job's
      ``jackknife``, :func:`~actuatorlab.identify.arm_jackknife.arm_jackknife`), each joint's estimation
      variance se_j^2 is removed from the spread by the method of moments (the ANOVA / random-effects
      variance-component estimate truncated at zero: Searle, Casella & McCulloch, "Variance Components",
      Wiley 1992, ch. 3 and 4). With z_j = mu_t + u_j + e_j, var u = s_u^2, var e_j = se_j^2,
      E[s^2] = s_u^2 + v_e with v_e = sum_t (1 - 1/n_t) sum_{j in t} se_j^2 / (n - T) (the mean se_j^2 when
      every type has as many joints), so::

          s_u^2 = max(s^2 - v_e, 0)

      the entry's ``std`` is s_u, ``std_raw`` s and ``estimation_std`` sqrt(v_e); a parameter with
      s^2 <= v_e (its spread is not distinguishable from its estimation error) gets no entry, and
      ``source.dropped`` says why. Without ``uncertainty`` the spread is s, as above;
    * when the fit carries its sensitivity pass (``identifiability.sensitivity``, :func:`~actuatorlab.identify.
      arm_fit.set_sensitivity`), how many joints' values their logs determine is recorded per parameter
      (``source.units[n].fits``, the entry's note), and a parameter that no joint's logs determine is listed
      in ``source.undetermined``: its spread is the fits' estimation error, not unit variation (the entry
      stays; the user decides);
    * no ``identified`` entry: the fit per joint is not the environment's centre (the fit by joint type is),
      and the spec's identified entry has one covariance for all units (said in the notes).

    The values that the spec scatters are those of the actuator the environment runs (e.g. the fit
    by joint type): ``source.centre`` says so, ``source.units`` keeps the per-joint values."""
    if d.get("kind", "analytic") != "analytic":
        raise RandomizationError(f"{source}: a learned model has no parameter distribution to randomize")
    robot = load_robot(str(d.get("robot")))
    params = d.get("params") or {}
    labels = sorted({j for v in params.values() if isinstance(v, Mapping) for j in v})
    if not d.get("per_joint") or not labels or not set(labels) <= set(robot.joint_names):
        raise RandomizationError(f"{source}: a whole-robot fit by parameter set gives no spread across units; "
                                 "fit one set per joint (the fit job's per_joint field) and give that arm_model.json")
    of = joint_types(robot.joint_names) or {j.name: j.actuator for j in robot.joints}
    types = sorted({of[j] for j in labels})
    if len(labels) - len(types) < 1:
        raise RandomizationError(f"{source}: {len(labels)} joints of {len(types)} types: no unit spread to pool")
    bounds = set_bounds(robot.groups)
    entries: list[dict] = []
    units: dict[str, dict] = {}
    dropped: list[dict] = []
    unc = d.get("uncertainty") or {}
    se_nat = unc.get("stderr_natural") or {}
    sens = (d.get("identifiability") or {}).get("sensitivity") or {}
    undetermined: list[str] = []
    for n, per in params.items():
        vals = {j: float(v) for j, v in per.items()}
        std, units[n] = _pooled_spread(n, vals, of, types)
        changes = (sens.get("change") or {}).get(n) or {}
        det, det_note = _determination(n, [None if changes.get(j) is None else f"{n}@{j}" not in sens["not_determined"]
                                           for j in vals], "joints")
        if det is not None:
            units[n]["fits"] = det
            undetermined += [n] if det["determined"] == 0 else []
        e = {"name": f"{n}_unit", "kind": "unit", "parameter": n, "std": std,
             "distribution": "lognormal" if _space(n) == "log" else "add_normal",
             "note": f"spread of the fitted {n} across the {len(vals)} joints within their types "
                     f"({', '.join(types)}), pooled ({'log space' if _space(n) == 'log' else PARAMS[n].unit}); "
                     "includes each joint's estimation error" + det_note}
        v_e = _estimation_var(list(vals), of, se_nat.get(n))
        if v_e is not None and not _less_estimation(e, std, v_e, units[n], dropped):
            continue
        if _space(n) != "log":
            g = robot.groups[robot.joint(labels[0]).group]
            e["clip"] = list(bounds[robot.groups.index(g)].get(n, bounds_for(n, "servo")))
        entries.append(e)
    if unc:
        note = (f"{unc.get('method') or 'jackknife'}: each joint's natural-space standard error; the unit spread "
                "is the pooled within-type spread less the mean estimation variance (method of moments); no "
                "identified entry (the fit per joint is not the environment's centre)")
        uncertainty = [{"file": source, "source": "jackknife", "note": note}]
    else:
        uncertainty = [{"file": source, "source": "none", "note": NO_ARM_UNCERTAINTY}]
    return {"format": SPEC_FORMAT, "format_version": SPEC_VERSION,
            "description": "proposed by `actuatorlab randomize` from a fit per joint (the fleet); edit freely",
            "source": {"models": [source], "model": [d.get("model")], "robot": robot.name, "types": types,
                       "centre": "the parameter sets of the actuator the environment runs (e.g. the fit by joint "
                                 "type); unit entries scatter each joint around them",
                       "uncertainty": uncertainty,
                       "unit_spread": {"file": source, "note": "pooled within-type spread across joints, natural space"},
                       **({"dropped": dropped} if unc else {}),
                       **({"undetermined": undetermined} if undetermined else {}),
                       "units": units, "package_version": __version__},
            "entries": entries}
