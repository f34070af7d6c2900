"""Mechanisms between a servo and the joint it moves: the offset crank-slider of a parallel gripper.

A robot config's ``"mechanisms"`` section (docs/robots.md) names a rotary servo joint that the
MJCF does not have, the crank, and the slide joint it drives, the jaw. When the model is built
(:func:`add_mechanisms`) the crank becomes a hinge joint of a massless body under ``parent`` (the
actuated joint: the servo's encoder reads it and its actuator model drives it, ``output_to_joint``
1) and the jaw follows it through a MuJoCo joint equality whose quartic polynomial is fitted by
least squares to the closed form below and to its derivative over the servo's travel. The
equality's constraint force passes the servo torque to the jaw by the polynomial's derivative,
which is virtual work with the fitted ratio: ``F_jaw = tau / (dq/dtheta)``; the fit is refused
when it misses the position by more than :data:`POLY_TOLERANCE` or the ratio by more than
:data:`RATIO_TOLERANCE` anywhere on the travel.

Closed form (offset slider-crank position analysis: R. L. Norton, "Design of Machinery", 5th ed.,
McGraw-Hill 2012, sec. 4.6, eqs. 4.16-4.17). Crank radius ``a``, rod (coupler) length ``b``,
offset ``e`` of the slide line from the crank centre, crank angle ``phi = theta - theta0`` from the
slide direction; the slider's distance from the crank centre along its line is

    x(phi) = a cos(phi) + sqrt(b^2 - (a sin(phi) - e)^2)

and the jaw coordinate is ``q = sign (x - d)`` (``d``: the value of ``x`` at the jaw's zero). Its
derivative, the position-dependent transmission ratio [m/rad], is

    dq/dtheta = sign (-a sin(phi) - a cos(phi) (a sin(phi) - e) / sqrt(b^2 - (a sin(phi) - e)^2)).

The ratio is zero at the dead centres (crank and rod aligned); the servo's travel must avoid them
so that the map from servo angle to jaw position is invertible (:meth:`CrankSlider.inverse`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import mujoco
import numpy as np

from .checks import config_error, fields, number

__all__ = ["POLY_DEGREE", "POLY_TOLERANCE", "RATIO_TOLERANCE", "CrankSlider", "parse_mechanisms", "add_mechanisms"]

#: degree of the joint equality's polynomial (MuJoCo's ``polycoef`` holds degree 4 at most)
POLY_DEGREE = 4
#: [m] largest allowed distance between the equality's polynomial and the closed form on the travel
POLY_TOLERANCE = 5e-5
#: [1] largest allowed relative error of the polynomial's slope (the force ratio) on the travel
RATIO_TOLERANCE = 0.03
#: [rad] weight of the slope rows against the position rows in the fit (1 rad: both in metres)
_SLOPE_WEIGHT = 1.0
#: samples of the travel where the fit and the dead centres are checked
_GRID = 2001
#: [m/rad] smallest |dq/dtheta| on the travel: below it the travel counts as reaching a dead centre
_MIN_RATIO = 1e-4
_KEYS = {"type", "parent", "slider", "crank_radius", "rod_length", "offset", "theta0", "jaw_zero",
         "travel", "sign", "sources"}
_REQUIRED = ("type", "parent", "slider", "crank_radius", "rod_length", "theta0", "jaw_zero", "travel")


@dataclass(frozen=True)
class CrankSlider:
    """An offset crank-slider from a servo (crank) to a slide joint (jaw); equations in the module
    docstring.

    name: the crank's hinge joint (added to the model; the actuated joint); slider: the jaw's slide
    joint in the MJCF; parent: the body the crank's body hangs from; crank_radius a [m];
    rod_length b [m]; offset e [m] of the slide line from the crank centre; theta0 [rad] servo angle
    at which the crank points along the slide (phi = 0); jaw_zero d [m] slider distance x at the jaw
    coordinate 0; travel (lo, hi) [rad] the servo's range; sign (+1 | -1) jaw coordinate along
    (+1) or against (-1) x.
    """

    name: str
    slider: str
    parent: str
    crank_radius: float
    rod_length: float
    offset: float
    theta0: float
    jaw_zero: float
    travel: tuple[float, float]
    sign: float = 1.0

    def position(self, theta: Any, xp: Any = np) -> Any:
        """Jaw coordinate q [m] at servo angle ``theta`` [rad] (any shape; ``xp`` numpy or jax.numpy)."""
        a, b, e = self.crank_radius, self.rod_length, self.offset
        phi = xp.asarray(theta) - self.theta0
        x = a * xp.cos(phi) + xp.sqrt(b * b - (a * xp.sin(phi) - e) ** 2)
        return self.sign * (x - self.jaw_zero)

    def ratio(self, theta: Any, xp: Any = np) -> Any:
        """Transmission ratio dq/dtheta [m/rad] at servo angle ``theta`` [rad] (the jaw force a
        servo torque tau holds is tau / ratio)."""
        a, b, e = self.crank_radius, self.rod_length, self.offset
        phi = xp.asarray(theta) - self.theta0
        s = a * xp.sin(phi) - e
        return self.sign * (-a * xp.sin(phi) - a * xp.cos(phi) * s / xp.sqrt(b * b - s * s))

    @property
    def jaw_range(self) -> tuple[float, float]:
        """(min, max) [m] of the jaw coordinate over the travel (the ends of travel: q is monotonic)."""
        q = self.position(np.asarray(self.travel))
        return float(q.min()), float(q.max())

    def inverse(self, q: Any, xp: Any = np) -> Any:
        """Servo angle [rad] that puts the jaw at ``q`` [m] (any shape; values outside
        :attr:`jaw_range` map to the nearer end of travel). Bisection on the travel, where q is
        monotonic, to machine precision (60 halvings of the travel)."""
        lo, hi = self.travel
        rising = float(self.ratio(0.5 * (lo + hi))) > 0
        target = xp.clip(xp.asarray(q, dtype=float), *self.jaw_range)
        left, right = xp.full_like(target, lo), xp.full_like(target, hi)
        for _ in range(60):
            mid = 0.5 * (left + right)
            below = (self.position(mid, xp) > target) == rising  # the root lies below mid
            left, right = xp.where(below, left, mid), xp.where(below, mid, right)
        return 0.5 * (left + right)

    def polynomial(self, theta_ref: float, q_ref: float) -> tuple[np.ndarray, float, float]:
        """Coefficients c (POLY_DEGREE + 1,) of ``q(theta) - q_ref ~ sum_k c_k (theta - theta_ref)^k``
        (MuJoCo's joint-equality ``polycoef`` about the joints' reference positions): least squares
        on the travel of the position and of the slope (the slope rows weighted by 1 rad), and the
        largest position error [m] and relative slope error [1] there."""
        th = np.linspace(*self.travel, _GRID)
        vander = np.vander(th - theta_ref, POLY_DEGREE + 1, increasing=True)
        slope = np.hstack([np.zeros((th.size, 1)), vander[:, :-1] * np.arange(1, POLY_DEGREE + 1)])
        q, r = self.position(th) - q_ref, self.ratio(th)
        c, *_ = np.linalg.lstsq(np.vstack([vander, _SLOPE_WEIGHT * slope]), np.r_[q, _SLOPE_WEIGHT * r], rcond=None)
        return c, float(np.abs(vander @ c - q).max()), float(np.abs(slope @ c / r - 1).max())


def parse_mechanisms(path: Path | str, section: Any) -> tuple[CrankSlider, ...]:
    """The config's ``"mechanisms"`` section (crank joint name -> settings) as crank-sliders
    (:class:`CrankSlider`). An error names the file and the field: a non-positive length, a rod
    that cannot reach the slide line at every crank angle (b <= a + |e|), a travel that reaches a
    dead centre, or one whose quartic polynomial misses the closed form by more than
    :data:`POLY_TOLERANCE` or its slope by more than :data:`RATIO_TOLERANCE`."""
    if not isinstance(section, dict):
        raise config_error(path, "mechanisms must be an object (crank joint name -> settings)")
    out = []
    for name, d in section.items():
        where = f"mechanisms.{name}"
        d = fields(path, where, d, _KEYS, _REQUIRED)
        if d["type"] != "crank_slider":
            raise config_error(path, f"{where}.type: unknown mechanism {d['type']!r}; available: crank_slider")
        for k in ("parent", "slider"):
            if not isinstance(d[k], str) or not d[k]:
                raise config_error(path, f"{where}.{k} must be a name, got {d[k]!r}")
        a = number(path, f"{where}.crank_radius", d["crank_radius"], True)
        b = number(path, f"{where}.rod_length", d["rod_length"], True)
        e = number(path, f"{where}.offset", d.get("offset", 0.0))
        if b <= a + abs(e):
            raise config_error(path, f"{where}.rod_length {b:g} m must exceed crank_radius + |offset| = "
                                     f"{a + abs(e):g} m (else the rod cannot reach the slide line at every crank angle)")
        tr = d["travel"]
        if not isinstance(tr, list) or len(tr) != 2:
            raise config_error(path, f"{where}.travel must be [lower, upper] servo angles [rad], got {tr!r}")
        lo, hi = (number(path, f"{where}.travel", t) for t in tr)
        if not lo < hi:
            raise config_error(path, f"{where}.travel: lower {lo:g} rad must be below upper {hi:g} rad")
        sign = number(path, f"{where}.sign", d.get("sign", 1.0))
        if sign not in (1.0, -1.0):
            raise config_error(path, f"{where}.sign must be 1 or -1, got {d.get('sign')!r}")
        m = CrankSlider(name, d["slider"], d["parent"], a, b, e, number(path, f"{where}.theta0", d["theta0"]),
                        number(path, f"{where}.jaw_zero", d["jaw_zero"]), (lo, hi), sign)
        th = np.linspace(lo, hi, _GRID)
        r = m.ratio(th)
        if np.abs(r).min() < _MIN_RATIO or r.min() * r.max() < 0:
            bad = float(th[np.argmin(np.abs(r))])
            raise config_error(path, f"{where}.travel [{lo:g}, {hi:g}] rad reaches a dead centre of the crank "
                                     f"(dq/dtheta = {r[np.argmin(np.abs(r))]:.2g} m/rad at theta = {bad:.3f} rad): "
                                     "the jaw would not follow the servo one to one")
        _, miss, slope_miss = m.polynomial(0.5 * (lo + hi), 0.0)
        if miss > POLY_TOLERANCE or slope_miss > RATIO_TOLERANCE:
            raise config_error(path, f"{where}: the geometry is too far from a quartic on its travel: the "
                                     f"joint equality's polynomial misses the closed form by {miss * 1e3:.3f} mm "
                                     f"(allowed {POLY_TOLERANCE * 1e3:g} mm) and its ratio by {slope_miss:.1%} "
                                     f"(allowed {RATIO_TOLERANCE:.0%}); shorten the travel or lengthen the rod")
        out.append(m)
    return tuple(out)


_QPOS_SIZE = {mujoco.mjtJoint.mjJNT_FREE: 7, mujoco.mjtJoint.mjJNT_BALL: 4}
_DOF_SIZE = {mujoco.mjtJoint.mjJNT_FREE: 6, mujoco.mjtJoint.mjJNT_BALL: 3}


def _before(body: Any, name: str, size: dict) -> tuple[int, bool]:
    """qpos (``size`` :data:`_QPOS_SIZE`) or qvel (:data:`_DOF_SIZE`) entries of the joints that
    precede joint ``name`` in MuJoCo's depth-first body order under ``body``, and whether ``name``
    was found."""
    n = 0
    for j in body.joints:
        if j.name == name:
            return n, True
        n += size.get(j.type, 1)
    for child in body.bodies:
        k, found = _before(child, name, size)
        n += k
        if found:
            return n, True
    return n, False


def add_mechanisms(spec: mujoco.MjSpec, mechanisms: tuple[CrankSlider, ...], path: Path | str) -> None:
    """Put ``mechanisms`` into ``spec`` (edited in place): per crank, a massless body (1e-6 kg) under
    its parent with the crank's hinge joint (limited to the travel, reference position the servo
    angle of the slider's reference position), a joint equality slider = polynomial(crank) and the
    crank's angle inserted into every keyframe (the angle that puts the jaw where the keyframe has
    it; velocity 0 where the keyframe lists velocities). The slider keeps the MJCF's armature, damping and frictionloss (the config's
    ``joint_overrides`` edit them). Errors name the config file ``path``."""
    for m in mechanisms:
        where = f"mechanisms.{m.name}"
        joints = {j.name: j for j in spec.joints if j.name}
        if m.name in joints:
            raise config_error(path, f"{where}: the mjcf already has a joint named {m.name!r}")
        if m.slider not in joints or joints[m.slider].type != mujoco.mjtJoint.mjJNT_SLIDE:
            raise config_error(path, f"{where}.slider: {m.slider!r} is not a slide joint of the mjcf; joints "
                                     f"there: {', '.join(sorted(joints))}")
        parent = spec.body(m.parent)
        if parent is None:
            raise config_error(path, f"{where}.parent: no body named {m.parent!r} in the mjcf")
        sl = joints[m.slider]
        lo, hi = m.jaw_range
        if sl.limited != mujoco.mjtLimited.mjLIMITED_FALSE and (lo < sl.range[0] - 1e-9 or hi > sl.range[1] + 1e-9):
            raise config_error(path, f"{where}: the jaw travels {lo:.4g} .. {hi:.4g} m, outside the range "
                                     f"{sl.range[0]:g} .. {sl.range[1]:g} m of {m.slider!r}")
        theta_ref = float(m.inverse(float(sl.ref)))
        coef, _, _ = m.polynomial(theta_ref, float(sl.ref))
        body = parent.add_body(name=f"{m.name}_link", mass=1e-6, inertia=[1e-9] * 3, explicitinertial=True)
        body.add_joint(name=m.name, type=mujoco.mjtJoint.mjJNT_HINGE, axis=[0.0, 0.0, 1.0], ref=theta_ref,
                       range=list(m.travel), limited=mujoco.mjtLimited.mjLIMITED_TRUE)
        eq = spec.add_equality(type=mujoco.mjtEq.mjEQ_JOINT, objtype=mujoco.mjtObj.mjOBJ_JOINT,
                               name=f"{m.name}_to_{m.slider}", name1=m.slider, name2=m.name)
        eq.data = np.r_[coef, np.zeros(len(eq.data) - coef.size)]
        at, dof = _before(spec.worldbody, m.name, _QPOS_SIZE)[0], _before(spec.worldbody, m.name, _DOF_SIZE)[0]
        slider_at = _before(spec.worldbody, m.slider, _QPOS_SIZE)[0]
        for k in spec.keys:
            qpos, qvel = list(k.qpos), list(k.qvel)
            if qpos:
                jaw = qpos[slider_at - (1 if slider_at > at else 0)]
                k.qpos = qpos[:at] + [float(m.inverse(jaw))] + qpos[at:]
            if qvel:
                k.qvel = qvel[:dof] + [0.0] + qvel[dof:]
