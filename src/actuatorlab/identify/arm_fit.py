"""Multi-joint logs: open-loop replay scores and a derivative-free fit of a whole robot.

Both work on logs in the multi-joint convention of docs/synth.md (channels ``position/<joint>``
[rad | m], ``position_target/<joint>``, optional ``velocity/<joint>``, ``torque_enable/<joint>``
and a shared ``supply_voltage`` [V]; ``Setup.extra["robot"]`` and ``Setup.extra["joints"]``),
sampled on the robot's control grid (``control_dt``), and replay them with the native MuJoCo
path :func:`actuatorlab.sim.arm_native.rollout_native` (batched over windows, no gradients).

Replay score. Each log is cut into non-overlapping windows of ``h`` control steps that restart
from the *measured* state (:func:`actuatorlab.sim.arm_windows.make_windows`); the per-joint score
is the mean absolute position error over all window samples (padding excluded)::

    MAE_j(h) = sum_w sum_k |q_sim[w, k, j] - q_meas[w, k, j]| / (number of samples)   [rad | m]

Robot joints the log does not list (the OpenManipulator-X gripper in the synth logs) are held at
their rest position (target = qpos0) and not scored.

Fit. CMA-ES (Hansen, "The CMA Evolution Strategy: A Tutorial", arXiv:1604.00772) over the chosen
actuator parameters in a normalised box z in [0, 1]: parameters with search bounds in the robot
config move in them (:mod:`actuatorlab.robots.bounds`, starting inside); others with a positive nominal
value p0 move on a log scale in [0.2 p0, 5 p0]; parameters whose nominal is 0 move linearly in the
"servo" bound profile of :data:`actuatorlab.models.params.BOUND_PROFILES` (the same normalisation
as :class:`actuatorlab.identify.fit.ParamSpace`). The score is the mean squared position error
of window rollouts of ``horizon`` control steps.
"""

from __future__ import annotations

import time as _time
from typing import Any, Callable, Iterable, Sequence

import numpy as np

from ..precision import on_fixed_blas_threads, physics
from ..errors import DataError, ModelError, UnknownNameError
from ..logs.format import Trajectory
from ..models.registry import embed_params, get_model
from ..robots.bounds import set_bounds
from ..robots.loader import Robot
from ..sim.arm import ArmConfig, ArmInputs, ArmState
from ..sim.arm_native import native_model, rollout_native
from ..sim.arm_windows import Windows
from ..sim.arm_data import (_pick, _robot, evaluate_arm, fit_windows, log_arrays, per_joint_robot,
                             robot_with_model)
from .arm_grad import fit_arm_grad
from .arm_space import DEFAULT_FIT_PARAMS, ArmSpace, fit_result, fit_setup, log_groups
from .identifiability import SENSITIVITY_STEP, classify, sensitivity_rule
from .nested import MIN_GAIN, contained, judge, lowest
from .search import BestSoFar, UnitBoxCMA, cma_stream, run_cma

__all__ = ["DEFAULT_FIT_PARAMS", "ARM_LADDER", "ArmSpace", "select_arm", "fit_arm", "evaluate_logs", "set_sensitivity"]

def _box_cma(z0: np.ndarray, sigma0: float, stream: dict, **opts) -> UnitBoxCMA:
    """The whole-robot fit's CMA-ES from ``z0`` in the unit box (one-dimensional searches padded,
    :class:`~actuatorlab.identify.search.UnitBoxCMA`)."""
    return UnitBoxCMA(z0, sigma0, {**stream, "verbose": -9, "tolfun": 1e-12, "tolx": 1e-6, **opts}, pad_1d=True)


def _inside(space: ArmSpace, p: dict) -> dict:
    """``p`` with every fitted value outside the box replaced by its nominal value: the CMA-ES
    start from a contained model's fit, whose switched-off mechanism (a 0 on a log scale) would
    otherwise sit on the box edge. (The point itself has been scored as given.)"""
    out = {k: np.asarray(v, float).copy() for k, v in p.items()}
    i = 0
    for k in space.names:
        for g in space.sets:
            if not space.lower[i] <= out[k][g] <= space.upper[i]:
                out[k][g] = space.nominal[k][g]
            i += 1
    return out


def _coevolve(names, nominal: dict, sets: list[int], start: dict, score, max_evals: int,
              seed: int, sigma0: float, z_start: dict | None = None,
              bounds: tuple[dict, ...] | None = None, per_set_best: bool = False) -> tuple[dict, int]:
    """Per-joint fit by cooperative coevolution: one CMA-ES per parameter set (joint), each on the
    position error of its own joint(s). Generation g draws candidate c of every set, assembles
    them into one parameter vector per c, scores all c in one batched rollout, and tells each set's
    CMA-ES its own joint's errors. Joint coupling makes each set's score depend a little on the
    others' candidates (noise that shrinks as they converge); the best assembled vector (by the
    summed error) is kept, so the result is never worse than ``start``. The generations run on
    :func:`~actuatorlab.identify.search.run_cma` while a whole one fits in ``max_evals``; a
    sub-search that has stopped (pycma's tolerances) is no longer asked: its set keeps the best
    assembled values.
    (Potter & De Jong, "A cooperative coevolutionary approach to function optimization", PPSN 1994,
    with CMA-ES sub-searches: Hansen, arXiv:1604.00772.)

    ``per_set_best``: keep instead each set's best candidate by its own joints' error (the coevolution's
    usual collaboration rule). From an optimum (the jackknife's refits) an assembled vector that moves every
    set at once almost never beats it on the summed error, so the summed rule leaves a short refit where it
    started; per set, each joint moves to its own optimum on the refit's data."""
    spaces = [ArmSpace.build(names, nominal, [g], bounds) for g in sets]
    # the sub-searches share one private stream, seeded as pycma's global reseeding left it (by the
    # last sub-search's seed): same draws as before, NumPy's global generator untouched
    stream = cma_stream(int(seed) + 1 + sets[-1]) if sets else {}
    es = [_box_cma(sp.z_of(z_start or start), sigma0, stream) for sp in spaces]
    pop = max(e.es.popsize for e in es)
    best = BestSoFar(x={k: np.asarray(v, float).copy() for k, v in start.items()})
    f0 = score([best.x])[0]
    best.f = float(f0[sets].sum())
    set_f = {g: float(f0[g]) for g in sets}  # per_set_best: each set's best own error so far

    def assembled(Zs: list) -> dict[int, np.ndarray]:
        """Candidate c of every live set on the best vector so far, all c in one batched score; each
        set's search is told its own joints' errors."""
        cands = []
        for c in range(pop):
            p = {k: np.asarray(v, float).copy() for k, v in best.x.items()}
            for sp, Z in zip(spaces, Zs):
                if Z is not None:
                    th = sp.to_theta(Z[c])
                    for a, k in enumerate(names):
                        p[k][sp.sets[0]] = th[a]
            cands.append(p)
        f = score(cands)  # (pop, n_sets)
        if per_set_best:
            for g in sets:
                c = int(np.argmin(f[:, g]))
                if f[c, g] < set_f[g]:
                    set_f[g] = float(f[c, g])
                    for k in names:
                        best.x[k][g] = cands[c][k][g]
        else:
            best.update(f[:, sets].sum(axis=1), cands)
        return {i: f[:, g] for i, g in enumerate(sets)}

    # a generation runs only while it fits in the budget (the start counted): pop per search per generation
    used = run_cma(es, assembled, max(int(max_evals) - pop, 0))
    return best.x, 1 + int(used.max(initial=0))


def window_errors(parts: list[tuple[Robot, Windows, Any]], nominal: dict, cfg: ArmConfig) -> Callable:
    """errors(candidates) -> (P, W, L, n) position errors [rad] of candidate parameter sets on the fit windows
    of ``parts`` ((robot of the group, its windows, its private MuJoCo model), :func:`_fit_parts`), all
    candidates in one batched native rollout per group (the windows repeated once per candidate)."""

    def errors(cands: list[dict]) -> np.ndarray:
        P = len(cands)
        out = []
        for r, w, model_ in parts:
            W = len(w.start)
            batch = {k: np.repeat(np.stack([np.asarray(c[k], float) for c in cands]), W, axis=0) for k in nominal}
            x = ArmInputs(*[np.concatenate([v] * P) for v in w.inputs])
            s0 = type(w.state0)(*[np.concatenate([v] * P) for v in w.state0])
            _, o = rollout_native(r, batch, x, s0, cfg, model=model_)
            out.append(o.q.reshape((P,) + w.q_meas.shape) - w.q_meas[None])
        return np.concatenate(out, axis=1)

    return errors


def _window_scorers(robot: Robot, parts: list[tuple[Robot, Windows, Any]], wgt: np.ndarray, den: float,
                    nominal: dict, cfg: ArmConfig) -> tuple[Callable, Callable]:
    """(scores, scores_per_joint) of candidate parameter sets on the fit windows (:func:`window_errors`);
    ``robot`` gives the joint order and the parameter sets, ``wgt`` (W, L, n) the weights of the windows of
    all parts in order."""
    errors = window_errors(parts, nominal, cfg)

    def scores(cands: list[dict]) -> list[tuple[float, float]]:
        """(mean squared, mean absolute) position error of each candidate."""
        return [(float("inf"), float("inf")) if not np.all(np.isfinite(e)) else
                (float(np.sum(e**2 * wgt) / den), float(np.sum(np.abs(e) * wgt) / den)) for e in errors(cands)]

    def scores_per_joint(cands: list[dict]) -> np.ndarray:
        """(P, n_sets) mean squared position error of each candidate on the joints of each set."""
        e2 = errors(cands) ** 2 * wgt[None]  # (P, W, L, n)
        per_joint_err = e2.sum(axis=(1, 2)) / np.maximum(wgt.sum(axis=(0, 1)), 1.0)  # (P, n)
        per_joint_err = np.where(np.isfinite(per_joint_err), per_joint_err, 1e6)
        return np.stack([per_joint_err[:, [robot.index(j) for j in grp.joints]].sum(axis=1)
                         for grp in parts[0][0].groups], axis=1)

    return scores, scores_per_joint


def set_sensitivity(mse_per_set: Callable, best: dict, names, sets: list[int], labels: list[str],
                    step: float = SENSITIVITY_STEP, min_change: float = MIN_GAIN) -> dict[str, Any]:
    """What the logs determine at all, per parameter set (the one-joint fit's rule,
    :func:`~actuatorlab.identify.identifiability.sensitivity`, on the whole-robot fit's own objective):
    each fitted value ``best[k][g]`` moved alone to (1 -+ step) times itself, all candidates in one
    batched call of ``mse_per_set`` ((P, n_sets) mean squared position error over each set's joints on
    the fit windows), and the RMS error of its set compared with the optimum's:
    ``s = sqrt(MSE_moved / MSE) - 1``; :func:`~actuatorlab.identify.identifiability.classify` names
    ``k@label`` not determined (|s| < min_change on a side) or improvable (s < -min_change). A value
    at 0 has no relative move (entry None).
    Returns {"step", "min_change", "objective" (per label at the optimum: the sum over the set's joints of
    their MSE [rad^2]), "change": {k: {label: [s^-, s^+]}}, "not_determined", "improvable", "rule"}."""
    moves: list[tuple[str, int, float]] = [(k, g, f) for k in names for g in sets if float(best[k][g]) != 0.0
                                           for f in (1.0 - step, 1.0 + step)]
    cands = [best]
    for k, g, f in moves:
        c = {n: np.asarray(v, float).copy() for n, v in best.items()}
        c[k][g] *= f
        cands.append(c)
    m = np.asarray(mse_per_set(cands), float)  # (1 + len(moves), n_sets)
    m0 = m[0]
    change: dict[str, dict[str, Any]] = {k: {labels[g]: None for g in sets} for k in names}
    for i, (k, g, f) in enumerate(moves, start=1):
        rel = np.sqrt(m[i, g] / m0[g]) - 1.0 if m0[g] > 0 else float("nan")
        side = change[k][labels[g]] or [None, None]
        side[0 if f < 1.0 else 1] = float(rel) if np.isfinite(rel) else None
        change[k][labels[g]] = side
    flat = {f"{k}@{lab}": c for k in names for lab, c in change[k].items()}
    low, better = classify(flat, min_change)
    return {"step": step, "min_change": min_change, "objective": {labels[g]: float(m0[g]) for g in sets},
            "change": change, "not_determined": low, "improvable": better,
            "rule": sensitivity_rule(step, min_change, "the RMS position error of its set's joints on the fit windows")}


def _fit_parts(robot_name: str | Robot, trajs: Iterable[Trajectory], model: str | None, per_joint: bool,
               horizon: int, max_windows: int | None) -> tuple[Robot, list, np.ndarray, np.ndarray, ArmConfig]:
    """The fit windows of the logs, per group of logs recorded on the same robot
    (:func:`~actuatorlab.identify.arm_space.log_groups`; one group but for in-air logs at several gains or
    loads): (first group's fitted robot, [(fitted robot, windows, None)], (W, n) scored joints of the kept
    windows, kept window indices per part concatenated, timing). At most ``max_windows`` windows, evenly
    spread over all logs."""
    parts, scs = [], []
    cfg = None
    for rg, tg in log_groups(robot_name, trajs):
        rm = robot_with_model(rg, model) if model is not None else rg
        r = per_joint_robot(rm) if per_joint else rm
        cfg = cfg or ArmConfig.from_robot(r)
        w, sc = fit_windows(r, [log_arrays(rm, t) for t in tg], int(horizon), cfg)
        parts.append((r, w))
        scs.append(sc)
    if not parts or cfg is None:
        raise DataError(None, "no logs to fit")
    n = [len(w.start) for _, w in parts]
    keep = _pick(sum(n), max_windows)
    out, sc_all, off = [], [], 0
    for (r, w), sc, k in zip(parts, scs, n):
        idx = keep[(keep >= off) & (keep < off + k)] - off
        off += k
        if idx.size:
            out.append((r, Windows(w.start[idx], ArmInputs(*[x[idx] for x in w.inputs]),
                                   ArmState(*[x[idx] for x in w.state0]), w.q_meas[idx], w.dq_meas[idx],
                                   w.mask[idx])))
            sc_all.append(sc[idx])
    return out[0][0], out, np.concatenate(sc_all), keep, cfg


def _take_given(names: tuple[str, ...], nominal: dict, given: dict[str, Sequence[float | None]] | None,
                sets: list[int]) -> tuple[tuple[str, ...], tuple[str, ...], dict]:
    """(names left to search, names taken from ``given``, nominal values with the taken ones written in) of
    :func:`fit_arm`: a name is taken when ``given`` has a value for every fitted set."""
    given = given or {}
    taken = tuple(k for k in names if k in given and all(g < len(given[k]) and given[k][g] is not None
                                                          for g in sets))
    out = {k: np.asarray(v, float).copy() for k, v in nominal.items()}
    for k in taken:
        out[k] = np.array([float(nominal[k][g]) if v is None else float(v) for g, v in enumerate(given[k])])
    return tuple(k for k in names if k not in taken), taken, out


@physics
@on_fixed_blas_threads
def fit_arm(robot_name: str | Robot, trajs: Iterable[Trajectory], *, model: str | None = None,
            params: Iterable[str] | None = None, fixed: Iterable[str] = ("R",), per_joint: bool = False,
            max_evals: int = 300, seed: int = 0, horizon: int = 100, sigma0: float | None = None,
            init: Iterable[dict] = (), max_windows: int | None = None, per_set_best: bool = False,
            sensitivity: bool = False, given: dict[str, Sequence[float | None]] | None = None) -> dict[str, Any]:
    """Fit actuator parameters of a whole robot to multi-joint logs with CMA-ES (module docstring).

    Args:
        robot_name: a bundled robot name or a :class:`Robot`.
        trajs: logs in the multi-joint convention on the control grid.
        model: registry model of every parameter set (:func:`robot_with_model`); default: the
            robot config's own.
        params: parameter names (:data:`~actuatorlab.models.params.PARAMS`) to fit; default: the
            free parameters of ``model`` minus ``fixed`` (:data:`DEFAULT_FIT_PARAMS` when no model
            is given). The others stay nominal.
        fixed: with ``model`` and no ``params``: free parameters kept at their nominal value
            (default R: the winding resistance from the datasheet stall current; kt then sets the
            motor gain kt/R and the free viscous friction the damping).
        per_joint: one value per joint instead of one per parameter set (actuator group).
            Parameter sets of joints the logs never record stay nominal.
        max_evals: CMA-ES evaluation budget (each is one batched rollout of the fit windows).
        seed: CMA-ES seed (same seed, same result).
        horizon: window length [control steps]; logs shorter than it give one padded window.
        sigma0: initial CMA-ES step in the normalised box (default 0.3 from the nominal values,
            0.1 when ``init`` gives fitted starting points: a local refinement).
        init: starting points, parameter sets as returned in ``param_sets`` (e.g. the fits of
            contained models). Each is scored as given (even outside the box) and CMA-ES starts
            from the best, so the result is never worse on the fit windows than any of them.
        max_windows: fit on at most this many windows, evenly spread over the logs (None: all).
        per_set_best: with ``per_joint``, keep each joint's best values by its own error instead of the
            best assembled vector by the summed error (:func:`_coevolve`; the jackknife's refits).
        sensitivity: also say which fitted values the logs do not determine (:func:`set_sensitivity`,
            one batched call of 2 x the fitted values' rollouts): the result's ``sensitivity``.
        given: {parameter: [value or None per set]} measured elsewhere (:mod:`actuatorlab.identify.drive`):
            kept, not searched, where every fitted set has one (:func:`_take_given`; the result's ``given``).

    Returns:
        {"model", "params": {name: {set or joint: value}} (servo side), "nominal": same layout,
        "param_sets": {name: [value per parameter set]} (every parameter, fitted or not),
        "train_mae": [rad] pooled position MAE of the best parameters on the fit windows,
        "train_mse": [rad^2] the mean squared error CMA-ES minimised,
        "train_mae_nominal": the same with nominal parameters, "evaluations", "wall_s", "horizon",
        "n_windows", "unit", "per_joint"}.
    """
    t0 = _time.perf_counter()
    robot, names = fit_setup(robot_name, model, params, fixed, "fit_arm")
    if horizon < 1 or max_evals < 1:
        raise ModelError(f"fit_arm: horizon ({horizon}) and max_evals ({max_evals}) must be >= 1")
    r, parts, sc, keep, cfg = _fit_parts(robot_name, list(trajs), model, per_joint, horizon, max_windows)
    labels = [g.joints[0] if per_joint else g.name for g in r.groups]
    mask = np.concatenate([w.mask for _, w in parts])
    wgt = mask[..., None] * sc[:, None, :]
    den = max(float(wgt.sum()), 1.0)
    scored = np.any(sc, axis=0)
    sets = [g for g, grp in enumerate(r.groups) if any(scored[r.index(j)] for j in grp.joints)]

    nominal0 = r.nominal_params()
    names, taken, nominal = _take_given(names, nominal0, given, sets)
    # private copies per group: the armature is written in per evaluation
    scores, scores_per_joint = _window_scorers(r, [(rg, w, native_model(rg, nominal)) for rg, w in parts], wgt,
                                               den, nominal, cfg)
    done: dict[str, Any] = {"horizon": int(horizon), "n_windows": int(len(keep)), "n_log_groups": len(parts),
                            **({"given": list(taken)} if taken else {})}
    if not names:  # every fitted parameter measured elsewhere: score them as they are
        (mse, mae), = scores([nominal])
        return fit_result(model, taken, labels, sets, nominal, nominal0, (mse, mae, mae), per_joint, evaluations=1,
                          wall_s=float(_time.perf_counter() - t0), **done)
    space = ArmSpace.build(names, nominal, sets, set_bounds(r.groups))  # the config's bounds, if any

    init = list(init)
    sigma0 = float(sigma0 if sigma0 is not None else (0.1 if init else 0.3))
    starts = [space.nominal] + [{k: np.asarray(st.get(k, nominal[k]), float).copy() for k in nominal} for st in init]
    f0 = [f for f, _ in scores(starts)]
    evals = len(starts)
    b = int(np.argmin(f0))
    best_p, best_f = starts[b], f0[b]
    if per_joint and len(sets) > 1:
        best_p, n_ev = _coevolve(names, nominal, sets, best_p, scores_per_joint, max_evals, seed, sigma0,
                                 _inside(space, best_p), set_bounds(r.groups), per_set_best)
        evals += n_ev
    else:
        best = BestSoFar(best_f, best_p)

        def score(Zs: list) -> dict[int, np.ndarray]:
            cands = [space.unpack(space.to_theta(z)) for z in Zs[0]]
            fs = np.array([f if np.isfinite(f) else 1e6 for f, _ in scores(cands)])
            best.update(fs, cands)
            return {0: fs}

        es = _box_cma(space.z_of(_inside(space, best_p)), sigma0, cma_stream(int(seed) + 1),
                      maxfevals=int(max_evals))
        evals += int(run_cma([es], score)[0])
        best_p = best.x
    (mse, mae), (_, mae0) = scores([best_p, nominal])
    if sensitivity:
        done["sensitivity"] = set_sensitivity(scores_per_joint, best_p, names, sets, labels)
    return fit_result(model, names + taken, labels, sets, best_p, nominal0, (mse, mae, mae0), per_joint,
                      evaluations=evals, wall_s=float(_time.perf_counter() - t0), **done)


def evaluate_logs(robot_name: str | Robot, params: dict | None, trajs: Iterable[Trajectory],
                  horizons: Iterable[int] = (100, 300, 600), model: str | None = None) -> dict[str, Any]:
    """:func:`~actuatorlab.sim.arm_data.evaluate_arm` per group of logs recorded on the same robot
    (:func:`~actuatorlab.identify.arm_space.log_groups`: in-air logs at their gains and loads), pooled:
    per joint and horizon the groups' MAEs weighted by their window counts (windows of one horizon hold the
    same number of samples but for a log's last, padded one), ``position_mae`` at the longest horizon every
    group reaches (the mean over the scored joints, as evaluate_arm pools); ``n_log_groups`` added. One group: evaluate_arm's result as it is."""
    groups = log_groups(robot_name, trajs)
    evs = [evaluate_arm(rg, params, tg, horizons=horizons, model=model) for rg, tg in groups]
    if len(evs) == 1:
        return {**evs[0], "n_log_groups": 1}
    per_joint: dict[str, dict[str, float]] = {}
    n_windows: dict[str, int] = {}
    for h in sorted({h for ev in evs for h in ev["n_windows"]}, key=int):
        n_windows[h] = sum(ev["n_windows"].get(h, 0) for ev in evs)
        for j in {j for ev in evs for j in ev["per_joint"]}:
            got = [(ev["per_joint"][j][h], ev["n_windows"][h]) for ev in evs if h in ev["per_joint"].get(j, {})]
            if got:
                per_joint.setdefault(j, {})[h] = float(sum(v * w for v, w in got) / sum(w for _, w in got))
    common = [h for h in n_windows if all(h in ev["n_windows"] for ev in evs)]
    h = common[-1] if common else None
    # evaluate_arm pools over the scored joints' samples, which are equal in number per joint: their mean MAE
    pooled = None if h is None else float(np.mean([v[h] for v in per_joint.values() if h in v]))
    units: dict = {}
    for ev in evs:
        units.update(ev["units"])
    return {"per_joint": per_joint, "position_mae": pooled, "horizon": None if h is None else int(h), "unit": "rad",
            "units": units, "n_windows": n_windows, "n_log_groups": len(evs)}


# ---------------------------------------------------------------------------------------------
#: Nested ladder fitted by ``actuatorlab fit --robot`` without ``--model``: Coulomb + viscous,
#: Stribeck, load-dependent friction, gear-mesh efficiency, and a command delay.
ARM_LADDER: tuple[str, ...] = ("m1", "m2", "m3", "g1", "m3+delay")


@physics
@on_fixed_blas_threads
def select_arm(robot_name: str | Robot, fit_trajs: Iterable[Trajectory], val_trajs: Iterable[Trajectory],
               ladder: Iterable[str] = ARM_LADDER, *, per_joint: bool = False, max_evals: int = 300,
               seed: int = 0, horizon: int = 100, val_horizon: int = 300, min_gain: float = 0.02,
               fixed: Iterable[str] = ("R",), max_windows: int | None = 64, final_evals: int | None = None,
               method: str = "cma", child_sigma0: float = 0.2,
               progress: Callable[[str, int, int], None] | None = None,
               given: dict[str, Sequence[float | None]] | None = None) -> dict[str, Any]:
    """Nested model selection on a whole robot: each model must earn its place on validation logs.

    Every model of ``ladder`` is fitted (:func:`fit_arm`) on ``fit_trajs``, starting from the fits
    of the models it contains (:func:`~actuatorlab.models.registry.contains`), so it is never
    worse than them on the fit windows. It is scored by the pooled position MAE of
    ``val_horizon``-step window rollouts of ``val_trajs`` (:func:`evaluate_arm`; logs shorter than
    that are scored at the longest horizon that fits). A model is *eligible* when its validation
    MAE is at least ``min_gain`` (relative) below the best eligible model it contains (the rule of
    every selection, :func:`actuatorlab.identify.nested.judge`, with one validation score; a model
    without an eligible contained model is eligible only if it is the first or contains none); the eligible model with
    the lowest validation MAE is selected and refitted on fit + validation logs (``final_evals``
    evaluations, default ``max_evals // 2``), starting from its fit.

    A model that contains others starts CMA-ES from their best fit with step ``child_sigma0`` (a
    new mechanism moves the others' optimum: Coulomb friction that absorbed load-dependent
    friction in m1 must give it back in m3); the final refit starts at 0.1.

    ``method``: "cma" (:func:`fit_arm`, CMA-ES through the native path) or "grad"
    (:func:`actuatorlab.identify.arm_grad.fit_arm_grad`, Adam through the MJX rollout with its
    default window curriculum and step counts; ``max_evals``, ``horizon``, ``max_windows`` and
    ``final_evals`` do not apply to it).

    ``given``: parameter values measured by another experiment, kept in every fit that has them
    (:func:`fit_arm`; CMA-ES only).

    Returns:
        {"selected", "table": [{"model", "parent", "n_free", "train_mae", "validation_mae",
        "gain_vs_parent", "earns_place", "selected", "wall_s"}], "fits": {model: fit_arm result},
        "final": fit_arm result on all logs, "fit_names", "val_names", "val_horizon"}.
    """
    if method not in ("cma", "grad"):
        raise UnknownNameError("fit method", method, ("cma", "grad"))
    if given and method != "cma":
        raise ModelError("select_arm: given values (the drive-side identification) join the CMA-ES fits (method cma)")
    robot = _robot(robot_name)
    fit_trajs, val_trajs = list(fit_trajs), list(val_trajs)
    if not fit_trajs or not val_trajs:
        raise DataError(None, "select_arm needs fit and validation logs "
                              f"(got {len(fit_trajs)} and {len(val_trajs)})")
    ladder = tuple(get_model(m).name for m in ladder)
    fits: dict[str, dict] = {}
    val_mae: dict[str, np.ndarray] = {}  # (1,): one validation set
    eligible: dict[str, bool] = {}
    table = []
    longest = max(t.n for t in val_trajs)
    vh = int(min(val_horizon, longest))
    for i, m in enumerate(ladder):
        if progress:
            progress(m, i, len(ladder))
        inner = contained(m, fits)
        starts = [{k: [embed_params({kk: vv[g] for kk, vv in fits[x]["param_sets"].items()}, m).get(k, v[g])
                       for g in range(len(v))] for k, v in fits[x]["param_sets"].items()}
                  for x in inner]
        if method == "grad":
            r = fit_arm_grad(robot, fit_trajs, model=m, fixed=fixed, per_joint=per_joint, seed=seed + i,
                             init=starts)
        else:
            r = fit_arm(robot, fit_trajs, model=m, fixed=fixed, per_joint=per_joint, max_evals=max_evals,
                        seed=seed + i, horizon=horizon, init=starts, max_windows=max_windows,
                        sigma0=child_sigma0 if starts else None, given=given)
        fits[m] = r
        ev = evaluate_logs(robot, r["params"], val_trajs, horizons=(vh,), model=m)
        v = ev["position_mae"]
        val_mae[m] = np.array([np.inf if v is None or not np.isfinite(v) else float(v)])
        verdict = judge(val_mae[m], inner, val_mae, eligible, i == 0, min_gain)
        eligible[m] = verdict.earns_place
        table.append({"model": m, "parent": verdict.parent,
                      "n_free": (len(r["params"]) - len(r.get("given", ()))) * len(next(iter(r["params"].values()))),
                      "train_mae": r["train_mae"], "validation_mae": float(val_mae[m][0]),
                      "gain_vs_parent": verdict.gain, "earns_place": eligible[m], "wall_s": r["wall_s"]})
    if not any(eligible.values()):
        raise ModelError("select_arm: no model gave a finite validation error")
    selected = lowest(val_mae, eligible)
    for row in table:
        row["selected"] = row["model"] == selected
    if progress:
        progress(selected + " (all data)", len(ladder), len(ladder))
    if method == "grad":
        final = fit_arm_grad(robot, fit_trajs + val_trajs, model=selected, fixed=fixed, per_joint=per_joint,
                             seed=seed + 100, init=[fits[selected]["param_sets"]])
    else:
        final = fit_arm(robot, fit_trajs + val_trajs, model=selected, fixed=fixed, per_joint=per_joint,
                        max_evals=final_evals or max(max_evals // 2, 20), seed=seed + 100, horizon=horizon,
                        init=[fits[selected]["param_sets"]], max_windows=max_windows, sensitivity=True, given=given)
    return {"selected": selected, "table": table, "fits": fits, "final": final,
            "fit_names": [t.name for t in fit_trajs], "val_names": [t.name for t in val_trajs],
            "val_horizon": vh}
