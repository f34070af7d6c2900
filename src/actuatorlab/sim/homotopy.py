"""Model homotopy of a floating-base robot: from a single rigid body (alpha = 0) to the full robot
(alpha = 1), with alpha a traced value (after Kang et al., "Dynamic Policy Learning for Legged Robot
with Simplified Model Pretraining and Model Homotopy Transfer", arXiv 2512.24698; the
parametrisation below is ours).

The trunk is the body of the model's free joint; the *legs* are every body below it. For a leg
body i (mass m_i, inertia I_i about its CoM) and the trunk (m_0, I_0, CoM c_0), all expressed in
the trunk frame at the nominal standing pose (the ``home`` keyframe; c_i the leg body's CoM,
Ibar_i its inertia tensor rotated into the trunk frame)::

    s(alpha) = eps + (1 - eps) alpha          share of its own mass/inertia a leg body keeps
    w(alpha) = 1 - s(alpha)                   share moved into the trunk
    leg i:   m_i(alpha) = s m_i,   I_i(alpha) = s I_i   (same CoM ``body_ipos``, same axes ``body_iquat``)
    trunk:   m_t(alpha) = m_0 + w sum_i m_i
             c_t(alpha) = c_0 + w sum_i m_i (c_i - c_0) / m_t
             J(alpha)   = I_0 + w sum_i [Ibar_i + m_i S(c_i - c_0)] - m_t S(c_t - c_0)   about c_t
    S(r) = |r|^2 1 - r r^T (parallel-axis term)
    extra armature on every leg dof: (1 - alpha) a_floor    [kg.m^2 | kg]

i.e. the trunk at alpha is the rigid composite of the original trunk and the share w of every leg
body, frozen where that body sits in the nominal pose. Consequences, exact for every alpha in
[0, 1] (up to float rounding):

* the total mass is conserved;
* the whole robot's CoM at the nominal pose is conserved (in the trunk frame);
* the composite (centroidal) inertia about that CoM at the nominal pose is conserved: at alpha = 0
  the robot is a single rigid body with the original robot's mass and centroidal inertia (up to the
  floor share eps, which the legs keep and which still counts in the composite), at alpha = 1 it is
  the original;
* every body's inertia is physical (positive definite, triangle inequality) for every alpha: the
  trunk's J is a sum of physical inertias taken about one point, each leg body's a positive
  multiple of its own. No clipping or projection is needed anywhere on the path.

Per-body floors: ``make_homotopy(..., keep={name: e_i})`` gives a named leg body its own floor e_i
(s_i = e_i + (1 - e_i) alpha, w_i = 1 - s_i, and sum_i w_i ... in the trunk's formulas above); every
invariant below holds for any shares.

The floor: leg bodies keep the share ``eps`` (default 1 %) of their mass and inertia, and every leg
dof gets ``(1 - alpha) a_floor`` of armature (default 0.01 kg.m^2, about a third of an ANYmal
knee's own joint-space inertia), so the mass matrix stays regular and swinging legs have an
inertia the explicit step and a compliant transmission's stiffness cap
(:data:`actuatorlab.sim.arm_step.STIFFNESS_CAP`) can resolve. Armature is a
joint-space (rotor) inertia: it enters M's diagonal only, never the composite rigid-body inertia,
so it changes none of the conserved quantities above.

Principal axes: MJX stores a body's inertia as a diagonal (``body_inertia``) in a frame
(``body_iquat``) relative to the body. The trunk's J(alpha) is a full tensor whose principal axes
turn with alpha, so the trunk's diagonal and frame are recomputed from it with a 3x3 symmetric
eigendecomposition (``eigh``) inside the jitted step: J expressed in the trunk's original
principal frame R_0, eigenvectors V (det V = +1), ``body_iquat = iquat_0 * quat(V)``,
``body_inertia = eig(J)``. This is valid for every alpha (any orthonormal eigenbasis gives the same
tensor; repeated eigenvalues are harmless because no gradient is taken w.r.t. alpha). The legs
keep their own iquat.

Derived constants. ``body_mass``, ``body_inertia``, ``body_ipos``, ``body_iquat``,
``body_subtreemass``, ``dof_armature`` and two of ``mj_setConst``'s constants,
``body_invweight0`` and ``dof_invweight0`` (:func:`invweights`, computed in JAX as MuJoCo does,
at qpos0), are replaced with ``mjx.Model.replace`` every step (:meth:`Homotopy.model_updates`).
The invweights set the contacts' and limits' impedance (regulariser R): kept at their alpha = 1
values they made the alpha = 0 robot's trunk drift 0.18 m from a model with fresh constants within
1 s (feet lighter, contacts softer), so they are recomputed. What stays at its alpha = 1 value:
``stat.meaninertia`` (solver tolerance scale), ``actuator_acc0`` (only used by built-in actuators
with ``dampratio``), ``dof_M0`` and ``tendon_invweight0`` (no tendons). MJX computes the CoM,
composite inertias and the mass matrix from the replaced fields at every step. The remaining bias
is measured by :func:`constant_bias` (native MuJoCo, the same alpha with the MJX path's constants
and after ``mj_setConst``): within ``BIAS_TOLERANCE`` (1e-9 m / 1e-9 rad; measured 1e-14), see
docs/locomotion.md. The float32 MJX rollout at alpha = 0 matches native MuJoCo after
``mj_setConst`` to 1.2e-5 m over 0.2 s (tested to 1e-3 m; at other alphas the MJX / native gap of
the original model, up to 1.6 cm over 0.2 s after a push, dominates).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import mujoco
import numpy as np

from ..errors import ModelError, UnknownNameError
from ..robots.loader import home_qpos, load_robot, Robot
from . import mjx_module

__all__ = ["Homotopy", "make_homotopy", "invweights", "composite_inertia", "constant_bias", "BIAS_TOLERANCE",
           "quat_from_mat", "quat_mul"]

#: Stated tolerance of the constants the MJX path leaves at alpha = 1 (``stat.meaninertia``,
#: ``actuator_acc0``, ``dof_M0``; the invweights are recomputed): largest difference of the trunk
#: position [m] and joint angles [rad] between native MuJoCo with the alpha fields and the MJX
#: path's constants and the same model after ``mj_setConst``, ANYmal C, 1 s under the MJCF's position
#: servos after a 0.5 m/s push (:func:`constant_bias`). Measured: <= 1e-14 for alpha in {0, 0.25,
#: 0.5, 0.75, 1}; keeping every constant stale instead gives 0.18 m / 0.66 rad at alpha = 0
#: (bench/locomotion.py). Asserted in tests/test_homotopy.py.
BIAS_TOLERANCE = {"trunk_pos_m": 1e-9, "joint_rad": 1e-9}


def _skew_s(r, xp):
    """S(r) = |r|^2 1 - r r^T, (..., 3) -> (..., 3, 3)."""
    eye = xp.eye(3, dtype=r.dtype)
    return xp.sum(r * r, axis=-1)[..., None, None] * eye - r[..., :, None] * r[..., None, :]


def quat_mul(a, b, xp=np):
    """Hamilton product of quaternions (w, x, y, z), (..., 4)."""
    aw, ax, ay, az = a[..., 0], a[..., 1], a[..., 2], a[..., 3]
    bw, bx, by, bz = b[..., 0], b[..., 1], b[..., 2], b[..., 3]
    return xp.stack([aw * bw - ax * bx - ay * by - az * bz, aw * bx + ax * bw + ay * bz - az * by,
                     aw * by - ax * bz + ay * bw + az * bx, aw * bz + ax * by - ay * bx + az * bw], axis=-1)


def quat_from_mat(R, xp=np):
    """Unit quaternion (w, x, y, z) of a rotation matrix (3, 3) (Shepperd's method: the candidate
    with the largest pivot, so it is well conditioned for every rotation)."""
    t = R[0, 0] + R[1, 1] + R[2, 2]
    cands = xp.stack([
        xp.stack([1.0 + t, R[2, 1] - R[1, 2], R[0, 2] - R[2, 0], R[1, 0] - R[0, 1]]),
        xp.stack([R[2, 1] - R[1, 2], 1.0 + R[0, 0] - R[1, 1] - R[2, 2], R[0, 1] + R[1, 0], R[0, 2] + R[2, 0]]),
        xp.stack([R[0, 2] - R[2, 0], R[0, 1] + R[1, 0], 1.0 - R[0, 0] + R[1, 1] - R[2, 2], R[1, 2] + R[2, 1]]),
        xp.stack([R[1, 0] - R[0, 1], R[0, 2] + R[2, 0], R[1, 2] + R[2, 1], 1.0 - R[0, 0] - R[1, 1] + R[2, 2]]),
    ])
    k = xp.argmax(xp.stack([t, R[0, 0], R[1, 1], R[2, 2]]))
    q = cands[k]
    return q / xp.sqrt(xp.sum(q * q))


def _mat_from_quat(q: np.ndarray) -> np.ndarray:
    out = np.zeros(9)
    mujoco.mju_quat2Mat(out, np.asarray(q, float))
    return out.reshape(3, 3)


@dataclass(frozen=True, eq=False)
class Homotopy:
    """The family M(alpha) of one model (module docstring). Build with :func:`make_homotopy`.

    trunk: body id of the free joint's body; legs (L,) body ids below it; leg_dofs (k,) their dof
    addresses; eps [1] floor share of leg mass/inertia; a_floor [kg.m^2 | kg] armature added to leg
    dofs at alpha = 0; body_eps (L,) [1] each leg body's floor share (eps unless ``keep`` names it);
    the original fields (alpha = 1, float64): mass (nbody,) [kg], inertia (nbody, 3) [kg.m^2], ipos
    (nbody, 3) [m], iquat (nbody, 4); in the trunk frame at the nominal pose:
    leg_m (L,) [kg], leg_rel (L, 3) [m] leg CoM minus trunk CoM, leg_J (L, 3, 3) [kg.m^2]
    Ibar_i + m_i S(c_i - c_0), all rotated into the trunk's principal frame R0 (3, 3); subtree
    (nbody, nbody) 0/1, subtree[b, c] = 1 when c is in b's subtree; nominal_qpos (nq,); nv.
    """

    trunk: int
    legs: np.ndarray
    leg_dofs: np.ndarray
    eps: float
    a_floor: float
    body_eps: np.ndarray
    mass: np.ndarray
    inertia: np.ndarray
    ipos: np.ndarray
    iquat: np.ndarray
    R0: np.ndarray
    leg_m: np.ndarray
    leg_rel: np.ndarray
    leg_J: np.ndarray
    subtree: np.ndarray
    nominal_qpos: np.ndarray
    nv: int

    # ---------------------------------------------------------------------------------------
    def fields(self, alpha, xp=None, dtype=None) -> dict:
        """body_mass (nbody,), body_inertia (nbody, 3), body_ipos (nbody, 3), body_iquat (nbody, 4),
        body_subtreemass (nbody,) at ``alpha`` (scalar, traced under jax), and ``armature_extra``
        (nv,) [kg.m^2] to add to the dof armature. ``xp``: jax.numpy (default) or numpy."""
        if xp is None:
            import jax.numpy as xp
        dt = dtype or (np.float64 if xp is np else xp.asarray(alpha).dtype)
        if xp is not np and not xp.issubdtype(dt, xp.floating):
            dt = xp.float32
        c = lambda a: xp.asarray(a, dt)  # noqa: E731
        alpha = xp.clip(c(alpha), 0.0, 1.0)
        e = c(self.body_eps)                                                   # (L,) floor share per leg body
        s = e + (1.0 - e) * alpha
        w = 1.0 - s
        L, t = self.legs, self.trunk
        m0 = c(self.mass[t])
        mt = m0 + xp.sum(w * c(self.leg_m))
        shift = (w[:, None] * c(self.leg_m[:, None] * self.leg_rel)).sum(0) / mt    # c_t - c_0, principal frame
        J = c(np.diag(self.inertia[t])) + (w[:, None, None] * c(self.leg_J)).sum(0) - mt * _skew_s(shift, xp)
        lam, V = xp.linalg.eigh(J)
        sgn = xp.where(xp.linalg.det(V) < 0, -1.0, 1.0)      # a proper rotation: flip the last axis
        V = V * xp.stack([c(1.0), c(1.0), c(sgn)])
        q_t = quat_mul(c(self.iquat[t]), quat_from_mat(V, xp), xp)
        ipos_t = c(self.ipos[t]) + c(self.R0) @ shift

        if xp is np:
            mass = self.mass.copy()
            mass[L] = s * self.mass[L]
            mass[t] = mt
            inertia, ipos, iquat = self.inertia.copy(), self.ipos.copy(), self.iquat.copy()
            inertia[L] = s[:, None] * self.inertia[L]
            inertia[t], ipos[t], iquat[t] = lam, ipos_t, q_t
        else:
            mass = c(self.mass).at[L].multiply(s).at[t].set(mt)
            inertia = c(self.inertia).at[L].multiply(s[:, None]).at[t].set(lam)
            ipos = c(self.ipos).at[t].set(ipos_t)
            iquat = c(self.iquat).at[t].set(q_t)
        extra = np.zeros(self.nv)
        extra[self.leg_dofs] = self.a_floor
        return {"body_mass": mass, "body_inertia": inertia, "body_ipos": ipos, "body_iquat": iquat,
                "body_subtreemass": c(self.subtree) @ mass, "armature_extra": (1.0 - alpha) * c(extra)}

    def model_updates(self, alpha, dof_armature, mx=None) -> dict:
        """MJX ``Model`` fields at ``alpha`` (traced): the body fields of :meth:`fields`,
        ``dof_armature`` = ``dof_armature`` (nv,) (the actuator's, e.g. the rollout's rotor
        inertias) + the floor, and, when the MJX model ``mx`` is given, ``body_invweight0`` and
        ``dof_invweight0`` recomputed for alpha (:func:`invweights`). Pass to
        ``mx.replace(**updates)`` / ``model_updates=``."""
        import jax.numpy as jnp

        dof_armature = jnp.asarray(dof_armature)
        f = self.fields(jnp.asarray(alpha, dof_armature.dtype))
        extra = f.pop("armature_extra")
        f["dof_armature"] = dof_armature + extra
        if mx is not None:
            f.update(invweights(mx.replace(**f)))
        return f

    def native_model(self, m: mujoco.MjModel, alpha: float, constants: str = "fresh") -> mujoco.MjModel:
        """A copy of the native model ``m`` at ``alpha`` (float64), its armature + the floor.
        ``constants``: "fresh" recomputes every derived constant (``mj_setConst``); "mjx" recomputes
        ``body_invweight0`` and ``dof_invweight0`` only, as :meth:`model_updates` does for MJX (the
        rest keeps ``m``'s alpha = 1 values); "stale" recomputes none."""
        import copy

        if constants not in ("fresh", "mjx", "stale"):
            raise ModelError(f"constants must be fresh, mjx or stale, got {constants!r}")
        out = copy.copy(m)
        f = self.fields(float(alpha), np)
        for k in ("body_mass", "body_inertia", "body_ipos", "body_iquat", "body_subtreemass"):
            getattr(out, k)[:] = f[k]
        out.dof_armature[:] = m.dof_armature + f["armature_extra"]
        if constants != "stale":
            fresh = copy.copy(out)
            mujoco.mj_setConst(fresh, mujoco.MjData(fresh))
            if constants == "fresh":
                return fresh
            out.body_invweight0[:] = fresh.body_invweight0
            out.dof_invweight0[:] = fresh.dof_invweight0
        return out


def invweights(mx) -> dict:
    """``body_invweight0`` (nbody, 2) and ``dof_invweight0`` (nv,) of an MJX model, computed in JAX as
    MuJoCo's ``mj_setConst`` does: at ``qpos0``, A = J M^-1 J^T for each body's CoM Jacobian
    (translation, rotation), invweight0 = (trace of the translational block / 3, trace of the
    rotational block / 3) (0 for the world body); per dof, diag(M^-1) averaged over the three
    translational and the three rotational dofs of a free joint and the three dofs of a ball joint.
    Cost: one kinematics + CRB at qpos0 and a dense nv x nv inverse (per call, i.e. once per step
    when alpha is shared by the batch)."""
    import jax
    import jax.numpy as jnp
    mjx = mjx_module.mjx()  # before its submodule, which would import it loudly
    from mujoco.mjx._src import support

    d = mjx.make_data(mx).replace(qpos=jnp.asarray(mx.qpos0, mx.body_mass.dtype))
    d = mjx.kinematics(mx, d)
    d = mjx.com_pos(mx, d)
    d = mjx.crb(mx, d)
    Minv = jnp.linalg.inv(mjx.full_m(mx, d))
    bodies = jnp.arange(1, mx.nbody)

    def one(b):
        jp_, jr = support.jac(mx, d, d.xipos[b], b)          # (nv, 3) each
        tr = jnp.trace(jp_.T @ Minv @ jp_) / 3.0
        rr = jnp.trace(jr.T @ Minv @ jr) / 3.0
        return jnp.stack([tr, rr])

    biw = jnp.concatenate([jnp.zeros((1, 2), Minv.dtype), jax.vmap(one)(bodies)], axis=0)
    diag = jnp.diag(Minv)
    groups = []  # (dof slice) averaged, per joint type
    for j in range(mx.njnt):
        a, t = int(mx.jnt_dofadr[j]), int(mx.jnt_type[j])
        if t == int(mujoco.mjtJoint.mjJNT_FREE):
            groups += [(a, a + 3), (a + 3, a + 6)]
        elif t == int(mujoco.mjtJoint.mjJNT_BALL):
            groups.append((a, a + 3))
        else:
            groups.append((a, a + 1))
    div = jnp.concatenate([jnp.broadcast_to(jnp.mean(diag[lo:hi]), (hi - lo,)) for lo, hi in groups])
    return {"body_invweight0": biw, "dof_invweight0": div}


def make_homotopy(model: Any, nominal_qpos=None, *, eps: float = 0.01, a_floor: float = 0.01,
                  keep: Mapping[str, float] | None = None) -> Homotopy:
    """The homotopy of a floating-base model: ``model`` an ``MjModel`` or a robot (name or
    :class:`~actuatorlab.robots.Robot`: its MJX model); ``nominal_qpos`` (nq,) the pose at which the
    composite inertia is conserved (default: the home / standing keyframe, else qpos0); ``eps`` the
    floor share of leg mass and inertia (0 < eps <= 1); ``a_floor`` [kg.m^2 | kg] the leg-dof armature
    at alpha = 0 (>= 0); ``keep``: leg body name -> its own floor share in (0, 1] instead of ``eps``
    (e.g. the feet keeping their mass: 1.0). Every invariant of the module docstring holds for any
    shares (each leg body moves its own share w_i = 1 - s_i into the trunk)."""
    if not isinstance(model, mujoco.MjModel):
        r = model if isinstance(model, Robot) else load_robot(model)
        model = r.model(for_mjx=True)
    m = model
    if not 0.0 < eps <= 1.0:
        raise ModelError(f"homotopy: eps (leg mass floor share) must be in (0, 1], got {eps}")
    if a_floor < 0:
        raise ModelError(f"homotopy: a_floor (leg armature floor) must be >= 0, got {a_floor}")
    free = [j for j in range(m.njnt) if m.jnt_type[j] == mujoco.mjtJoint.mjJNT_FREE]
    if len(free) != 1:
        raise ModelError(f"homotopy needs a model with exactly one free joint (a floating base); this one has "
                         f"{len(free)}")
    trunk = int(m.jnt_bodyid[free[0]])
    anc = np.zeros((m.nbody, m.nbody))
    for c in range(m.nbody):
        b = c
        while True:
            anc[b, c] = 1.0
            if b == 0:
                break
            b = int(m.body_parentid[b])
    legs = np.array([b for b in range(m.nbody) if b != trunk and anc[trunk, b] and m.body_mass[b] > 0], dtype=np.int64)
    if legs.size == 0:
        raise ModelError("homotopy: the floating base has no bodies below it (nothing to move)")
    if nominal_qpos is None:
        nominal_qpos = home_qpos(m)
    d = mujoco.MjData(m)
    d.qpos[:] = np.asarray(nominal_qpos, float)
    mujoco.mj_kinematics(m, d)
    Rt, pt = d.xmat[trunk].reshape(3, 3), d.xpos[trunk]
    R0 = _mat_from_quat(m.body_iquat[trunk])
    c0 = m.body_ipos[trunk]
    rel, J = [], []
    for b in legs:
        ci = Rt.T @ (d.xipos[b] - pt)
        Ri = Rt.T @ d.ximat[b].reshape(3, 3)
        Ibar = Ri @ np.diag(m.body_inertia[b]) @ Ri.T
        r = R0.T @ (ci - c0)
        rel.append(r)
        J.append(R0.T @ Ibar @ R0 + m.body_mass[b] * (np.dot(r, r) * np.eye(3) - np.outer(r, r)))
    leg_dofs = np.array([v for v in range(m.nv) if int(m.dof_bodyid[v]) in set(legs.tolist())], dtype=np.int64)
    names = [mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_BODY, int(b)) or "" for b in legs]
    body_eps = np.full(len(legs), float(eps))
    for name, share in (keep or {}).items():
        if name not in names:
            raise UnknownNameError("leg body (homotopy keep)", name, names)
        if not 0.0 < float(share) <= 1.0:
            raise ModelError(f"homotopy: the floor share kept by {name!r} must be in (0, 1], got {share}")
        body_eps[names.index(name)] = float(share)
    h = Homotopy(trunk=trunk, legs=legs, leg_dofs=leg_dofs, eps=float(eps), a_floor=float(a_floor), body_eps=body_eps,
                 mass=m.body_mass.copy(), inertia=m.body_inertia.copy(), ipos=m.body_ipos.copy(),
                 iquat=m.body_iquat.copy(), R0=R0, leg_m=m.body_mass[legs].copy(), leg_rel=np.array(rel),
                 leg_J=np.array(J), subtree=anc, nominal_qpos=np.asarray(nominal_qpos, float).copy(), nv=int(m.nv))
    return h


def composite_inertia(m: mujoco.MjModel, qpos) -> tuple[float, np.ndarray, np.ndarray]:
    """(total mass [kg], CoM (3,) [m], inertia about the CoM (3, 3) [kg.m^2]) of every body of ``m``
    at ``qpos``, in the frame of the free joint's body (native MuJoCo, float64)."""
    d = mujoco.MjData(m)
    d.qpos[:] = qpos
    mujoco.mj_kinematics(m, d)
    free = [j for j in range(m.njnt) if m.jnt_type[j] == mujoco.mjtJoint.mjJNT_FREE]
    t = int(m.jnt_bodyid[free[0]]) if free else 0
    Rt, pt = d.xmat[t].reshape(3, 3), d.xpos[t]
    M = float(m.body_mass[1:].sum())
    pos = np.array([Rt.T @ (d.xipos[b] - pt) for b in range(m.nbody)])
    com = (m.body_mass[:, None] * pos).sum(0) / M
    J = np.zeros((3, 3))
    for b in range(1, m.nbody):
        Rb = Rt.T @ d.ximat[b].reshape(3, 3)
        r = pos[b] - com
        J += Rb @ np.diag(m.body_inertia[b]) @ Rb.T + m.body_mass[b] * (np.dot(r, r) * np.eye(3) - np.outer(r, r))
    return M, com, J


def constant_bias(m: mujoco.MjModel, hom: Homotopy, alpha: float, *, constants: str = "mjx", seconds: float = 1.0,
                  push: float = 0.5, ctrl=None) -> dict:
    """Bias of the derived constants the MJX path does not recompute: native MuJoCo rollouts of
    ``m`` (with its own actuators holding ``ctrl``, default the first keyframe's) from the nominal
    pose with a forward and lateral push of ``push`` [m/s], once with the alpha fields and
    ``constants`` ("mjx": as :meth:`Homotopy.model_updates`; "stale": every constant at alpha = 1),
    once after ``mj_setConst``. Returns the largest differences over ``seconds``: ``trunk_pos_m``
    [m], ``joint_rad`` [rad] (joints after the free joint), and ``trunk_travel_m`` [m], how far the
    trunk moved (for scale)."""
    outs = []
    for c in (constants, "fresh"):
        mm = hom.native_model(m, alpha, constants=c)
        d = mujoco.MjData(mm)
        d.qpos[:] = hom.nominal_qpos
        d.qvel[:2] = push
        if ctrl is not None:
            d.ctrl[:] = ctrl
        elif mm.nkey and mm.nu:
            d.ctrl[:] = mm.key_ctrl[0]
        qs = []
        for _ in range(int(round(seconds / mm.opt.timestep))):
            mujoco.mj_step(mm, d)
            qs.append(d.qpos.copy())
        outs.append(np.array(qs))
    a, b = outs
    return {"trunk_pos_m": float(np.abs(a[:, :3] - b[:, :3]).max()), "joint_rad": float(np.abs(a[:, 7:] - b[:, 7:]).max()),
            "trunk_travel_m": float(np.abs(b[:, :3] - b[:1, :3]).max())}
