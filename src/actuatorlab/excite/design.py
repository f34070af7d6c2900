"""Excitation design, once for a one-joint bench and a whole robot: the candidates
(:mod:`actuatorlab.excite.candidates`) are simulated on the nominal model by a backend
(:mod:`actuatorlab.excite.backends`: the fast one-joint scan or native MuJoCo), screened against
the effort (and, for a robot, range) limits, ranked by the Fisher information they carry for the
model's parameters, and a greedy D-optimal set is picked under a time budget.

**Information.** For parameters theta (positive; log scale) the backend gives the Jacobian
J_c = d q_c / d log theta of candidate c's simulated positions ((T, n, P): every recorded joint;
central differences through the backend's rollout). With the encoder noise sigma_j of joint j
(quantisation: 2 pi / 4096 / sqrt(12) rad, times |output_to_joint| behind a linkage) the Fisher
information and its Cramer-Rao bound are

    F_c = sum_j J_c[:, j]^T J_c[:, j] / sigma_j^2,     Cov(log theta) >= F^-1,     rse_i >= sqrt((F^-1)_ii)

(Fisher information of a Gaussian regression; e.g. Pintelon & Schoukens, "System Identification:
A Frequency Domain Approach", 2012, ch. 5; Swevers et al., "Optimal robot excitation and
identification", IEEE T-RA 13(5), 1997, for the D-optimal criterion). Information of independent
segments adds, so the design picks greedily, segment by segment (repeats allowed), the candidate
that most increases log det(sum F + eps I) (D-optimality), until the time budget is spent.

**Files** (:func:`write_excitation`): one command CSV per segment (one joint: time_s, target_rad,
target_deg, torque_enable; a robot: time_s, one target_<joint> column per robot joint [rad | m],
torque_enable, optionally NAME.lerobot.csv in LeRobot's degree mode) plus ``excitation.json``
(limits, the setup or robot each file runs on, the design report). :func:`excite` is the whole
``actuatorlab excite`` command for both cases.
"""

from __future__ import annotations

import math
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ActuatorlabError, ModelError, UnknownNameError
from ..files import atomic_write
from ..logs.format import Setup, Trajectory
from ..models.modelfile import load_model
from ..models.registry import get_model
from ..precision import physics
from ..robots.loader import load_robot
from ..sim.arm_data import model_params
from .backends import ExciteBackend, JointBackend, RobotBackend, design_robot_setup, load_arm_model
from .candidates import FAMILIES, Limits, RobotLimits, Segment, candidates, robot_candidates
from .in_air import floating_base, in_air_setup, truth_check

__all__ = ["EXCITATION_FORMAT", "information", "logdet", "crlb", "greedy_design", "ranked_candidates", "design",
           "write_excitation", "synthetic_logs", "compare_to_naive", "ExciteConfig", "excite"]

EXCITATION_FORMAT = "actuatorlab-excitation"


def information(backend: ExciteBackend, segments: list[Segment], params: dict) -> tuple[list[str], np.ndarray]:
    """(parameter labels (P,), F (n_segments, P, P)): Fisher information of each segment for the
    log-parameters, F = sum_j J_j^T J_j / sigma_j^2 (module doc)."""
    labels, J = backend.jacobian(segments, params)
    sigma = backend.sigma
    F = np.zeros((len(J), len(labels), len(labels)))
    for c, Jc in enumerate(J):
        for j, s in enumerate(sigma):
            rows = np.ascontiguousarray(Jc[:, j, :])
            F[c] += rows.T @ rows / s**2
    return labels, F


def _regularised(F: np.ndarray) -> np.ndarray:
    """F + eps I with eps = 1e-9 mean(diag F): a direction with no information gets a huge
    (finite) bound instead of a singular matrix."""
    p = F.shape[0]
    return F + 1e-9 * max(float(np.trace(F)) / p, 1e-300) * np.eye(p)


def logdet(F: np.ndarray) -> float:
    """log det(F + eps I) (D-optimality criterion; -inf for an indefinite matrix)."""
    sign, ld = np.linalg.slogdet(_regularised(F))
    return float(ld) if sign > 0 else -math.inf


def greedy_design(F: np.ndarray, n_pick: int) -> tuple[list[int], np.ndarray]:
    """(indices in pick order, summed information (p, p)): ``n_pick`` greedy D-optimal picks
    (repeats allowed) among candidates with information F (n, p, p): each pick is the candidate
    that most increases log det of the sum (information of independent segments adds)."""
    total = np.zeros_like(F[0])
    picked: list[int] = []
    for _ in range(max(1, int(n_pick))):
        best = int(np.argmax([logdet(total + f) for f in F]))
        picked.append(best)
        total = total + F[best]
    return picked, total


def crlb(F: np.ndarray) -> np.ndarray:
    """(p,) Cramer-Rao bound of the relative standard errors: sqrt(diag((F + eps I)^-1))."""
    return np.sqrt(np.clip(np.diag(np.linalg.inv(_regularised(F))), 0.0, None))


def ranked_candidates(ok: list, F, names) -> list[dict[str, Any]]:
    """One row per safe candidate ``(segment, peak effort)`` of ``ok`` with its Fisher information
    ``F[i]``: log det, the Cramer-Rao relative standard errors of ``names``, the peak effort and its
    rank by log det (1 = most informative)."""
    rows: list[dict[str, Any]] = []
    for (s, peak), f in zip(ok, F):
        rows.append({"name": s.name, "tags": s.tags, "duration_s": s.duration, "logdet": logdet(f),
                     "crlb_relative_stderr": dict(zip(names, crlb(f).tolist())), "peak_effort": peak})
    order = sorted(range(len(rows)), key=lambda i: -rows[i]["logdet"])
    for r, i in enumerate(order):
        rows[i]["rank"] = r + 1
    return rows


def design(backend: ExciteBackend, segments: list[Segment], params: dict, budget_s: float) -> dict[str, Any]:
    """Check the candidates on the nominal model ``params``, rank them by information and pick a
    D-optimal set within ``budget_s`` [s] (greedy, with repeats).

    Returns a JSON-serializable dict: the backend's head (``model``, ``parameters`` (labels)...);
    ``candidates`` (name, tags, log det F, CRLB relative stderr per parameter, peak effort, rank;
    best first); ``rejected`` (over an effort limit, or out of a range, with the reason);
    ``selected`` (names in pick order); ``design`` (log det, CRLB and duration of the set).
    """
    ok, rejected = [], []
    for s, sim in zip(segments, backend.simulate(segments, params)):
        peak, why = backend.screen(s, sim)
        if why is None:
            ok.append((s, peak))
        else:
            rejected.append(why)
    if not ok:
        raise ActuatorlabError(backend.no_candidate)
    labels, F = information(backend, [s for s, _ in ok], params)
    rows = ranked_candidates(ok, F, labels)
    picked, total = greedy_design(F, int(math.floor(budget_s / ok[0][0].duration + 1e-9)))
    return {**backend.head(labels), "budget_s": budget_s, "candidates": sorted(rows, key=lambda r: r["rank"]),
            "rejected": rejected, "selected": [ok[i][0].name for i in picked],
            "design": {"logdet": logdet(total), "crlb_relative_stderr": dict(zip(labels, crlb(total).tolist())),
                       "duration_s": sum(ok[i][0].duration for i in picked)}}


def write_excitation(out: str | Path, backend: ExciteBackend, segments: list[Segment],
                     report: dict[str, Any] | None = None, *, lerobot: bool = False) -> list[Path]:
    """Write each segment's command files (module doc; ``lerobot``: also ``NAME.lerobot.csv`` for a
    robot) and ``excitation.json`` (the backend's limits and setup, the design report); atomic writes."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    paths: list[Path] = []
    entries: list[dict[str, Any]] = []
    for s in segments:
        files = backend.command_files(s, lerobot)
        paths.extend(atomic_write(out / name, text) for name, text in files.values())
        entries.append({**{k: name for k, (name, _) in files.items()}, "duration_s": s.duration, "dt": s.dt,
                        "tags": s.tags, **backend.file_entry(s)})
    manifest = {"format": EXCITATION_FORMAT, "format_version": "1", **backend.manifest(segments), "files": entries,
                "design": report}
    paths.append(atomic_write(out / "excitation.json", json.dumps(manifest, indent=2, default=float) + "\n"))
    return paths


def synthetic_logs(backend: ExciteBackend, segments: list[Segment], truth: dict, *, noise: float = 0.0,
                   seed: int = 0, prefix: str = "") -> list[Trajectory]:
    """The segments run on a virtual bench or robot whose parameters are ``truth``: measured
    positions are the closed-loop rollout plus white Gaussian noise of ``noise`` [rad] (seeded;
    times |output_to_joint| behind a linkage), quantised to the 4096 counts/rev encoder."""
    rng = np.random.default_rng(seed)
    out = []
    for i, (s, sim) in enumerate(zip(segments, backend.simulate(segments, truth))):
        q = sim["q"] + rng.normal(0.0, noise, sim["q"].shape) * backend.ratios if noise > 0 else sim["q"]
        out.append(backend.trajectory(f"{prefix}{i:02d}_{s.name}", s, q, sim["dq"]))
    return out


def compare_to_naive(backend: ExciteBackend, designed: list[Segment], naive: list[Segment] | dict[str, list[Segment]],
                     heldout: list[Segment], truth: dict, *, seed: int = 0, noise: float = 0.0) -> dict[str, Any]:
    """Fit the backend's model to synthetic logs (:func:`synthetic_logs`, noise ``noise``, seed
    ``seed``) of the designed set and of each naive set (same truth, same fit budget and seed) and
    score them: relative parameter error against the truth, and the position MAE [rad] on held-out
    segments that no set contains (only quantised, so that it measures the model's error). ``naive``:
    one set (row "naive") or label -> set. Returns label -> row."""
    held = synthetic_logs(backend, heldout, truth)
    rows = {}
    for label, segs in {"designed": designed, **(naive if isinstance(naive, dict) else {"naive": naive})}.items():
        logs = synthetic_logs(backend, segs, truth, noise=noise, seed=seed)
        rows[label] = {"segments": [x.name for x in segs], "duration_s": sum(x.duration for x in segs),
                       **backend.fit_and_score(logs, held, truth, seed, segs[0].dt)}
    return rows


@dataclass(frozen=True)
class ExciteConfig:
    """What ``actuatorlab excite`` designs, for one joint or (``robot``) a whole robot.

    Attributes:
        model_file: fitted RUN/model.json (one joint: model, parameters and bench) or analytic
            RUN/arm_model.json (robot).
        model: model name when no model_file (one joint: default m1; robot: the config's).
        params: {name: value} overriding (robot: on every joint).
        joint: actuator of the one-joint bench when no model_file.
        kp, mass: one joint: firmware gains and bench loads [kg] to design over (one setup each).
        q_range: one joint: [min, max] [rad] (default [-1.5, 1.5]).
        margin, v_max, duty: [rad], [rad/s] (servo side), share in motion (:class:`Limits`).
        effort_max: one joint: [N.m] largest predicted effort.
        budget_s: [s] total duration of the design.
        segment_s: [s] one segment (default 2; 3 with robot).
        dt: [s] command period (one joint).
        write_all: write every candidate, not only the selected ones.
        robot: a bundled robot name or config file (None: one joint).
        joints: robot joints to excite (default all).
        joint_ranges: {joint: [min, max]} [rad | m] replacing MJCF ranges.
        effort_share: robot: largest predicted effort as a share of each joint's limit.
        lerobot: robot: also write NAME.lerobot.csv.
        hardware_seed: a floating-base robot (designed in the air, :mod:`actuatorlab.excite.in_air`):
            the seed of the virtual hardware whose truth the design is checked on.
    """

    model_file: Path | None = None
    model: str | None = None
    params: dict = field(default_factory=dict)
    joint: str = "xl330"
    kp: tuple[float, ...] | None = None
    mass: tuple[float, ...] | None = None
    q_range: tuple[float, ...] | None = None
    margin: float = 0.1
    v_max: float = 3.0
    duty: float = 0.8
    effort_max: float | None = None
    budget_s: float = 10.0
    segment_s: float | None = None
    dt: float = 0.01
    write_all: bool = False
    robot: str | None = None
    joints: tuple[str, ...] | None = None
    joint_ranges: dict = field(default_factory=dict)
    effort_share: float = 0.8
    lerobot: bool = False
    hardware_seed: int = 0


def _joint_case(cfg: ExciteConfig) -> tuple[JointBackend, list[Segment], dict, dict]:
    """A one-joint bench: the model and parameters of ``model_file`` (its setup the default bench)
    or ``model`` + ``params``; one setup per (kp, mass)."""
    rng = cfg.q_range or (-1.5, 1.5)
    if len(rng) != 2:
        raise ActuatorlabError("q_range must be two numbers: [min, max] [rad]")
    model = cfg.model or "m1"
    base: dict = {"actuator": cfg.joint, "joint_type": "revolute", "controller": "dynamixel_pwm",
                  "gains": {"kp": 400.0}, "supply_voltage": 7.4,
                  "bench": {"mass": 0.49, "length": 0.1, "arm_mass": 0.0}}
    values = {str(k): float(v) for k, v in cfg.params.items()}
    if cfg.model_file is not None:
        d = load_model(cfg.model_file)
        model = d["model"]
        values = {**{k: float(e["value"]) for k, e in d["parameters"].items()}, **values}
        s = d.get("setup") or {}
        base.update({k: s[k] for k in ("actuator", "joint_type", "controller", "gains", "supply_voltage", "bench")
                     if k in s and s[k] is not None})
    if base["joint_type"] != "revolute":
        raise ModelError(f"{cfg.model_file}: excitation design covers revolute pendulum benches only")
    if not values:
        raise ModelError("excite needs parameter values: --model-file RUN/model.json or --param NAME=VALUE")
    lim = Limits(q_min=rng[0], q_max=rng[1], margin=cfg.margin, v_max=cfg.v_max, duty=cfg.duty,
                 effort_max=cfg.effort_max)
    setups = []
    for g in cfg.kp or [base["gains"].get("kp", 400.0)]:
        for m in cfg.mass or [base["bench"].get("mass", 0.49)]:
            setups.append(Setup.from_dict({**base, "gains": {**base["gains"], "kp": float(g)},
                                           "bench": {**base["bench"], "mass": float(m)}}))
    segs = candidates(setups, lim, dt=cfg.dt, segment_s=cfg.segment_s or 2.0)
    return JointBackend(model, lim), segs, values, {}


def _robot_case(cfg: ExciteConfig) -> tuple[RobotBackend, list[Segment], dict, dict]:
    """A whole robot: the model and per-joint parameters of ``model_file`` (an analytic
    arm_model.json of ``fit --robot``), else the robot config's (``model`` replacing its model),
    updated by ``params``; designed for the model's free parameters minus R (as ``fit --robot``
    fits them) that have positive values on every design joint."""
    assert cfg.robot is not None
    if cfg.q_range is not None or cfg.effort_max is not None:
        raise ActuatorlabError("with --robot, give ranges per joint (joint_ranges) and the effort "
                               "limit as effort_share of each joint's configured limit")
    ranges = []
    for name, rg in cfg.joint_ranges.items():
        if not isinstance(rg, (list, tuple)) or len(rg) != 2:
            raise ActuatorlabError(f"joint_ranges: {name!r} must be [min, max], got {rg!r}")
        ranges.append((str(name), float(rg[0]), float(rg[1])))
    limits = RobotLimits(margin=cfg.margin, v_max=cfg.v_max, effort_share=cfg.effort_share, duty=cfg.duty,
                         ranges=tuple(ranges))
    base = load_robot(cfg.robot)
    home, families, in_air = None, FAMILIES, floating_base(base)
    if in_air:   # the identification protocol of a legged robot: base welded, one joint at a time
        base, home, limits = in_air_setup(base, limits)
        families = ("single",)
    model, fitted = cfg.model, dict[str, Any]()
    if cfg.model_file is not None:
        m_file, fitted = load_arm_model(cfg.model_file, base.name)
        model = model or m_file
    r, p = design_robot_setup(base, model, fitted)
    for k, v in cfg.params.items():
        if k not in p:
            raise UnknownNameError("parameter", k, tuple(p))
        p[k][:] = float(v)
    joints = list(cfg.joints or base.joint_names)
    spec_model = r.groups[0].model
    free = model_params(r, spec_model, fixed=("R",))
    names = [k for k in free if all(float(p[k][r.index(j)]) > 0 for j in joints)]
    segs = robot_candidates(r, joints, limits, segment_s=cfg.segment_s or 3.0, families=families, home=home)
    extra = {"model": get_model(spec_model).name, "skipped_parameters": [k for k in free if k not in names],
             "model_file": None if cfg.model_file is None else str(cfg.model_file),
             "protocol": "in the air (base welded, one joint at a time, the legged suite's safety box)" if in_air
             else "as configured"}
    return RobotBackend(r, tuple(names), tuple(joints), limits), segs, p, extra


@physics
def excite(out: str | Path, cfg: ExciteConfig) -> dict[str, Any]:
    """Design an excitation (``actuatorlab excite``) and write it to ``out``: the selected segments
    (``write_all``: every candidate) as command files plus ``excitation.json``. Returns the design
    report (a robot's also names the skipped parameters and the wall time ``wall_s``)."""
    t0 = time.perf_counter()
    backend, segs, params, extra = _robot_case(cfg) if cfg.robot is not None else _joint_case(cfg)
    rep = design(backend, segs, params, cfg.budget_s)
    rep.update(extra)
    by = {s.name: s for s in segs}
    chosen = segs if cfg.write_all else [by[n] for n in dict.fromkeys(rep["selected"])]
    if isinstance(backend, RobotBackend) and rep.get("protocol", "").startswith("in the air"):
        rep["truth_check"] = truth_check(backend.robot, chosen, cfg.hardware_seed)
        rep["truth_safe"] = not any(c["broken"] for c in rep["truth_check"])
    if cfg.robot is not None:
        rep["wall_s"] = time.perf_counter() - t0
    write_excitation(out, backend, chosen, rep, lerobot=cfg.lerobot)
    return rep
