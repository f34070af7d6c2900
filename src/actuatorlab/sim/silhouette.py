"""A differentiable soft-silhouette renderer of a robot's meshes, in JAX.

Each visual mesh is split into a few parts (k-means on its face centroids: an approximate convex
decomposition, so that U-shaped brackets and open grippers keep their gaps) and each part is
replaced by the convex hull of its vertices, decimated to at most ``max_vertices`` hull vertices
(farthest-point sampling), with outward faces. The front-facing projected triangles of a convex
piece ``g`` tile a convex polygon; for a pixel centre ``p``, ``s_g(p)`` is its signed distance to
that polygon (negative inside; the maximum over the polygon's edges, which are the hull's contour
edges, of the distance to the edge's line) and the piece's soft mask is

    D_g(p) = sigmoid(-s_g(p) / sigma)

(``sigma`` [px]; SoftRas, Liu et al., "Soft Rasterizer", ICCV 2019, eq. 1, with the signed distance
to the union of a piece's front triangles instead of the squared distance to each triangle, which
leaves no seams inside a piece and costs one half-plane test per contour edge). The pieces and
links combine by saturation

    I(p) = 1 - prod_g (1 - D_g(p))

(per-link soft masks combined as in EasyHeC, Chen et al., "EasyHeC: Accurate and Automatic
Hand-eye Calibration via Differentiable Rendering and Space Exploration", RA-L 2023, sec. III-B).
The 0.5 level of ``D_g`` is the hard silhouette's edge. The log of the product is summed as
``log_sigmoid(s / sigma)``, which is stable for any ``sigma``.

Where ``k`` pieces meet at the silhouette's contour, the product puts the 0.5 level
``sigma ln(1 / (2^(1/k) - 1))`` px outside it (0.88 ``sigma`` for ``k = 2``): a silhouette fattened
in proportion to ``sigma``. ``union="min"`` combines the pieces by the minimum of their signed
distances instead (the union of shapes as the minimum of their distance functions: Ricci, "A
constructive geometry for computer graphics", The Computer Journal 16(2), 1973),

    I(p) = sigmoid(-min_g s_g(p) / sigma),

whose profile across the contour is one sigmoid centred on it whatever ``sigma``; inside, a seam
where two pieces abut without overlapping reads 0.5. :func:`mask_edge_profile` gives an observed
binary mask the same profile, so a pixel-wise residual between the two is zero at the true pose.

Forward kinematics (:func:`geom_poses`) is MuJoCo's ``mj_kinematics`` for trees of hinge and slide
joints, written in JAX (body pose from its parent, body offset and joint motion; geom pose in its
body), so gradients reach joint angles, the camera twist and everything upstream of them. Joints
that follow another through a joint equality are first set from their leader
(:func:`follow_joints`): a render needs only the leaders, so a jaw that no encoder measures is
drawn where its servo's crank puts it (:mod:`actuatorlab.robots.mechanisms`) and the image's
gradient reaches the servo angle through the linkage.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
from scipy.ndimage import distance_transform_edt
from scipy.spatial import ConvexHull

from ..errors import DataError
from .arm import joint_equalities
from .camera import Camera, project, se3_exp

__all__ = ["RobotMeshes", "load_meshes", "follow_joints", "geom_poses", "body_point", "soft_silhouette", "soft_iou",
           "render_frames", "mask_edge_profile"]


@dataclass(frozen=True)
class RobotMeshes:
    """A robot's kinematic tree and decimated convex hulls of its visual meshes (static numpy data).

    Attributes:
        joints: names of the hinge/slide joints, in qpos order.
        body_parent: (nbody,) parent body index (body 0 is the world).
        body_pos: (nbody, 3) [m] body offset in its parent; body_rot: (nbody, 3, 3) its rotation.
        body_joints: per body, tuple of (qpos address, is_hinge, axis (3,), anchor (3,) [m]).
        body_names: (nbody,) names.
        geom_body: (G,) body of each rendered geom; geom_pos (G, 3) [m], geom_rot (G, 3, 3).
        vertices: (G, V, 3) [m] hull vertices in the geom frame (padded by repeating vertex 0).
        faces: (G, F, 3) vertex indices, outward (counter-clockwise seen from outside).
        face_valid: (G, F) 1.0 for a real face, 0.0 for padding.
        edges: (G, E, 2) vertex indices of each hull edge; edge_faces: (G, E, 2) its two faces;
        edge_third: (G, E, 2) the third vertex of each of those faces; edge_valid: (G, E) 1.0 / 0.0.
        followers: the model's joint equalities between two joints (a mimic finger, a jaw driven
            by a crank, :mod:`actuatorlab.robots.mechanisms`): (follower qpos address, leader qpos
            address, follower qpos0, leader qpos0, polynomial coefficients (5,)) each, leaders first.
    """

    joints: tuple[str, ...]
    body_parent: np.ndarray
    body_pos: np.ndarray
    body_rot: np.ndarray
    body_joints: tuple[tuple[tuple[int, bool, tuple[float, ...], tuple[float, ...]], ...], ...]
    body_names: tuple[str, ...]
    geom_body: np.ndarray
    geom_pos: np.ndarray
    geom_rot: np.ndarray
    vertices: np.ndarray = field(repr=False)
    faces: np.ndarray = field(repr=False)
    face_valid: np.ndarray = field(repr=False)
    edges: np.ndarray = field(repr=False)
    edge_faces: np.ndarray = field(repr=False)
    edge_third: np.ndarray = field(repr=False)
    edge_valid: np.ndarray = field(repr=False)
    followers: tuple[tuple[int, int, float, float, tuple[float, ...]], ...] = ()

    def body_id(self, name: str) -> int:
        if name not in self.body_names:
            raise DataError(None, f"body {name!r} is not in the robot (bodies: {', '.join(self.body_names[1:])})")
        return self.body_names.index(name)


def _decimate(v: np.ndarray, max_vertices: int) -> tuple[np.ndarray, np.ndarray]:
    hull = ConvexHull(v, qhull_options="QJ")
    pts = v[hull.vertices]
    if len(pts) > max_vertices:  # farthest-point sampling keeps the extremes
        keep = [int(np.argmax(np.linalg.norm(pts - pts.mean(0), axis=1)))]
        d = np.linalg.norm(pts - pts[keep[0]], axis=1)
        while len(keep) < max_vertices:
            keep.append(int(np.argmax(d)))
            d = np.minimum(d, np.linalg.norm(pts - pts[keep[-1]], axis=1))
        pts = pts[keep]
    hull = ConvexHull(pts, qhull_options="QJ")
    used = np.unique(hull.simplices)
    pts = pts[used]
    faces = np.searchsorted(used, hull.simplices)
    centre = pts.mean(0)
    a, b, c = pts[faces[:, 0]], pts[faces[:, 1]], pts[faces[:, 2]]
    flip = np.einsum("ij,ij->i", np.cross(b - a, c - a), a - centre) < 0
    faces[flip] = faces[flip][:, ::-1]
    return pts, faces


def _edges(faces: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Edges of a closed triangle mesh: (E, 2) vertices, (E, 2) adjacent faces, (E, 2) third vertices."""
    seen: dict[tuple[int, int], list[tuple[int, int]]] = {}
    for fi, f in enumerate(faces):
        for k in range(3):
            a, b, c = int(f[k]), int(f[(k + 1) % 3]), int(f[(k + 2) % 3])
            seen.setdefault((min(a, b), max(a, b)), []).append((fi, c))
    keys = sorted(k for k, v in seen.items() if len(v) == 2)
    return (np.array(keys, dtype=np.int32), np.array([[seen[k][0][0], seen[k][1][0]] for k in keys], dtype=np.int32),
            np.array([[seen[k][0][1], seen[k][1][1]] for k in keys], dtype=np.int32))


def _pieces(v: np.ndarray, f: np.ndarray, n: int) -> list[np.ndarray]:
    """Split a mesh into ``n`` parts by k-means on its face centroids (farthest-point seeds, 20
    iterations); returns each part's vertices (an approximate convex decomposition)."""
    c = v[f].mean(1)
    seeds = [int(np.argmax(np.linalg.norm(c - c.mean(0), axis=1)))]
    d = np.linalg.norm(c - c[seeds[0]], axis=1)
    while len(seeds) < min(n, len(c)):
        seeds.append(int(np.argmax(d)))
        d = np.minimum(d, np.linalg.norm(c - c[seeds[-1]], axis=1))
    centres = c[seeds]
    for _ in range(20):
        lab = np.argmin(((c[:, None] - centres[None]) ** 2).sum(-1), axis=1)
        centres = np.stack([c[lab == k].mean(0) if np.any(lab == k) else centres[k] for k in range(len(centres))])
    parts = [v[np.unique(f[lab == k])] for k in range(len(centres))]
    return [p for p in parts if len(p) >= 4]


def load_meshes(model: mujoco.MjModel | str | Path, max_vertices: int = 16, pieces: int = 4,
                group: int = 2) -> RobotMeshes:
    """The :class:`RobotMeshes` of an MJCF (a path or a compiled model): every mesh geom of visual
    ``group`` (2 in the bundled robots) split into ``pieces`` parts (k-means on face centroids), the
    convex hull of each part decimated to ``max_vertices`` vertices."""
    m = model if isinstance(model, mujoco.MjModel) else mujoco.MjModel.from_xml_path(str(model))
    joints, body_joints = [], []
    for b in range(m.nbody):
        js = []
        for j in range(m.body_jntadr[b], m.body_jntadr[b] + m.body_jntnum[b]):
            if int(m.jnt_type[j]) not in (int(mujoco.mjtJoint.mjJNT_HINGE), int(mujoco.mjtJoint.mjJNT_SLIDE)):
                raise DataError(None, f"joint {m.joint(j).name!r}: only hinge and slide joints are rendered")
            js.append((int(m.jnt_qposadr[j]), int(m.jnt_type[j]) == int(mujoco.mjtJoint.mjJNT_HINGE),
                       tuple(float(x) for x in m.jnt_axis[j]), tuple(float(x) for x in m.jnt_pos[j])))
            joints.append(m.joint(j).name)
        body_joints.append(tuple(js))
    rot = np.zeros((m.nbody, 3, 3))
    for b in range(m.nbody):
        mujoco.mju_quat2Mat(rot[b].reshape(-1), m.body_quat[b])
    gids = [g for g in range(m.ngeom) if int(m.geom_type[g]) == int(mujoco.mjtGeom.mjGEOM_MESH) and m.geom_group[g] == group]
    if not gids:
        raise DataError(None, f"the model has no mesh geom in group {group} to render")
    hulls, owner = [], []
    for g in gids:
        mid = m.geom_dataid[g]
        v = m.mesh_vert[m.mesh_vertadr[mid]:m.mesh_vertadr[mid] + m.mesh_vertnum[mid]].astype(np.float64)
        f = m.mesh_face[m.mesh_faceadr[mid]:m.mesh_faceadr[mid] + m.mesh_facenum[mid]]
        for part in _pieces(v, f, pieces):
            hulls.append(_decimate(part, max_vertices))
            owner.append(g)
    gids = owner
    V = max(len(p) for p, _ in hulls)
    F = max(len(f) for _, f in hulls)
    verts = np.zeros((len(gids), V, 3))
    faces = np.zeros((len(gids), F, 3), dtype=np.int32)
    valid = np.zeros((len(gids), F))
    edge_sets = [_edges(f) for _, f in hulls]
    E = max(len(e[0]) for e in edge_sets)
    edges, efaces, ethird = (np.zeros((len(gids), E, 2), dtype=np.int32) for _ in range(3))
    evalid = np.zeros((len(gids), E))
    for k, (p, f) in enumerate(hulls):
        verts[k, :len(p)], verts[k, len(p):] = p, p[0]
        faces[k, :len(f)] = f
        valid[k, :len(f)] = 1.0
        n = len(edge_sets[k][0])
        edges[k, :n], efaces[k, :n], ethird[k, :n] = edge_sets[k]
        evalid[k, :n] = 1.0
    grot = np.zeros((len(gids), 3, 3))
    for k, g in enumerate(gids):
        mujoco.mju_quat2Mat(grot[k].reshape(-1), m.geom_quat[g])
    return RobotMeshes(tuple(joints), m.body_parentid.copy(), m.body_pos.copy(), rot, tuple(body_joints),
                       tuple(m.body(b).name for b in range(m.nbody)), m.geom_bodyid[gids].copy(),
                       m.geom_pos[gids].copy(), grot, verts, faces, valid, edges, efaces, ethird, evalid,
                       _followers(m))


def _followers(m: mujoco.MjModel) -> tuple[tuple[int, int, float, float, tuple[float, ...]], ...]:
    """The model's two-joint joint equalities as :attr:`RobotMeshes.followers`."""
    out = []
    for e in joint_equalities(m):   # leaders first: one pass resolves chains
        f, lead = (int(m.jnt_qposadr[m.eq_obj1id[e]]), int(m.jnt_qposadr[m.eq_obj2id[e]]))
        out.append((f, lead, float(m.qpos0[f]), float(m.qpos0[lead]), tuple(float(c) for c in m.eq_data[e][:5])))
    return tuple(out)


def follow_joints(rm: RobotMeshes, qpos):
    """(nq,) joint positions with every joint that follows another through a joint equality set
    from its leader as the equality holds it, ``q_f = q0_f + sum_k c_k (q_l - q0_l)^k`` (MuJoCo's
    ``polycoef``): the jaw where the crank puts it, the mimic finger with the jaw. One pass in the
    followers' order (leaders first) resolves chains; differentiable (gradients reach the leaders)."""
    qpos = jnp.asarray(qpos)
    for f, lead, q0f, q0l, c in rm.followers:
        y = qpos[lead] - q0l
        qpos = qpos.at[f].set(q0f + c[0] + y * (c[1] + y * (c[2] + y * (c[3] + y * c[4]))))
    return qpos


def _axis_rot(axis, angle):
    a = jnp.asarray(axis, dtype=angle.dtype)
    K = jnp.array([[0.0, -axis[2], axis[1]], [axis[2], 0.0, -axis[0]], [-axis[1], axis[0], 0.0]], dtype=angle.dtype)
    return jnp.cos(angle) * jnp.eye(3, dtype=angle.dtype) + jnp.sin(angle) * K + (1 - jnp.cos(angle)) * jnp.outer(a, a)


def _body_poses(rm: RobotMeshes, qpos) -> tuple[list, list]:
    qpos = follow_joints(rm, qpos)
    dt = qpos.dtype
    xpos = [jnp.zeros(3, dtype=dt)]
    xmat = [jnp.eye(3, dtype=dt)]
    for b in range(1, len(rm.body_parent)):
        p = int(rm.body_parent[b])
        pos = xpos[p] + xmat[p] @ jnp.asarray(rm.body_pos[b], dtype=dt)
        mat = xmat[p] @ jnp.asarray(rm.body_rot[b], dtype=dt)
        for adr, hinge, axis, anchor in rm.body_joints[b]:
            if hinge:
                anc = pos + mat @ jnp.asarray(anchor, dtype=dt)
                mat = mat @ _axis_rot(axis, qpos[adr])
                pos = anc - mat @ jnp.asarray(anchor, dtype=dt)
            else:
                pos = pos + mat @ jnp.asarray(axis, dtype=dt) * qpos[adr]
        xpos.append(pos)
        xmat.append(mat)
    return xpos, xmat


def geom_poses(rm: RobotMeshes, qpos):
    """(nq,) joint positions -> ((G, 3) [m] geom positions, (G, 3, 3) geom rotations) in the base
    (world) frame, as ``mj_kinematics`` computes ``geom_xpos`` / ``geom_xmat``."""
    xpos, xmat = _body_poses(rm, qpos)
    dt = qpos.dtype
    P = jnp.stack([xpos[int(b)] + xmat[int(b)] @ jnp.asarray(rm.geom_pos[k], dtype=dt)
                   for k, b in enumerate(rm.geom_body)])
    R = jnp.stack([xmat[int(b)] @ jnp.asarray(rm.geom_rot[k], dtype=dt) for k, b in enumerate(rm.geom_body)])
    return P, R


def body_point(rm: RobotMeshes, qpos, body: int, point):
    """(3,) [m] a point fixed in ``body`` (body frame) -> base frame at joint positions ``qpos``."""
    xpos, xmat = _body_poses(rm, qpos)
    return xpos[body] + xmat[body] @ jnp.asarray(point, dtype=qpos.dtype)


def _piece_distance(n_vertices, pix, uv, X, faces, face_valid, edges, edge_faces, edge_third, edge_valid):
    """Signed distance [px] (negative inside) from pixel centres (P, 2) to the projected silhouette
    of one convex piece: the maximum over its contour edges (hull edges between a front and a back
    face) of the signed distance to the edge's line. This is the exact signed distance inside the
    convex polygon that the front faces tile, and a lower bound outside near its corners."""
    n = jnp.cross(X[faces[:, 1]] - X[faces[:, 0]], X[faces[:, 2]] - X[faces[:, 0]])
    front = jax.lax.stop_gradient(jnp.sum(n * X[faces[:, 0]], -1) < 0)
    f0, f1 = front[edge_faces[:, 0]], front[edge_faces[:, 1]]
    contour = (f0 != f1) & (edge_valid > 0)
    # the projected polygon has at most as many edges as the hull has vertices: keep those
    keep = jnp.argsort(~contour)[:min(n_vertices, contour.shape[0])]
    contour, f0 = contour[keep], f0[keep]
    edges, edge_third = edges[keep], edge_third[keep]
    a, b = uv[edges[:, 0]], uv[edges[:, 1]]
    c = jnp.where(f0[:, None], uv[edge_third[:, 0]], uv[edge_third[:, 1]])  # inside, on the front face
    e = b - a
    nrm = jnp.stack([e[:, 1], -e[:, 0]], -1) / jnp.sqrt(jnp.sum(e * e, -1, keepdims=True) + 1e-12)
    nrm = jnp.where(jnp.sum(nrm * (c - a), -1, keepdims=True) > 0, -nrm, nrm)  # outward
    d = jnp.sum((pix[:, None, :] - a[None]) * nrm[None], -1)  # (P, E)
    d = jnp.where(contour[None], d, -1e6)
    return jnp.where(jnp.any(contour), jnp.max(d, axis=1), 1e6)


def soft_silhouette(rm: RobotMeshes, cam: Camera, T_cb, qpos, sigma, pix, union: str = "product"):
    """Soft mask ``I(p)`` (module docstring) at pixel centres ``pix`` (P, 2) [px]: (P,) in [0, 1].

    ``T_cb``: (4, 4) camera-from-base; ``qpos``: (nq,) joint positions; ``sigma`` [px];
    ``union``: "product" (``1 - prod_g (1 - D_g)``) or "min" (``sigmoid(-min_g s_g / sigma)``)."""
    if union not in ("product", "min"):
        raise ValueError(f"union must be 'product' or 'min', got {union!r}")
    P, R = geom_poses(rm, qpos)
    dt = qpos.dtype
    V = jnp.einsum("gij,gvj->gvi", R, jnp.asarray(rm.vertices, dtype=dt)) + P[:, None, :]
    uv, Xc = project(cam, T_cb.astype(dt), V)
    pix = jnp.asarray(pix, dtype=dt)
    arrays = (uv, Xc, jnp.asarray(rm.faces), jnp.asarray(rm.face_valid, dt), jnp.asarray(rm.edges),
              jnp.asarray(rm.edge_faces), jnp.asarray(rm.edge_third), jnp.asarray(rm.edge_valid, dt))

    if union == "min":
        def nearest(smin, piece):
            return jnp.minimum(smin, _piece_distance(rm.vertices.shape[1], pix, *piece)), None

        smin, _ = jax.lax.scan(nearest, jnp.full(pix.shape[0], 1e6, dtype=dt), arrays)
        return jax.nn.sigmoid(-smin / sigma)

    def one(logc, piece):
        s = _piece_distance(rm.vertices.shape[1], pix, *piece)
        return logc + jax.nn.log_sigmoid(s / sigma), None

    logc, _ = jax.lax.scan(one, jnp.zeros(pix.shape[0], dtype=dt), arrays)
    return -jnp.expm1(logc)


def mask_edge_profile(mask: np.ndarray, sigma: float) -> np.ndarray:
    """An observed binary mask given the renderer's edge profile: (H, W) bool -> (H, W) float in (0, 1).

        M_sigma(p) = sigmoid(-d(p) / sigma),

    ``d(p)`` [px] the signed distance (negative inside) of pixel centre ``p`` to the mask's
    boundary, taken as the Euclidean distance to the nearest pixel centre of the other class less
    0.5 px (the boundary lies between the two centres; exact distance transform of Maurer et al.,
    IEEE TPAMI 25(2), 2003, as ``scipy.ndimage.distance_transform_edt``). It matches
    :func:`soft_silhouette` with ``union="min"`` at the same ``sigma`` [px] when the shapes agree,
    so the pixel residual ``I - M_sigma`` has no optimum biased toward smaller silhouettes (the soft
    IoU of thin shapes has: docs/visual.md)."""
    m = np.asarray(mask, dtype=bool)
    if not m.any() or m.all():
        return np.full(m.shape, 1.0 if m.all() else 0.0)
    d = np.where(m, 0.5 - distance_transform_edt(m), distance_transform_edt(~m) - 0.5)
    return 0.5 * (1.0 - np.tanh(d / (2.0 * sigma)))  # = sigmoid(-d / sigma), without overflow


def soft_iou(prob, mask):
    """Soft intersection over union of a soft mask and an observed mask (same shape, values in [0, 1])."""
    inter = jnp.sum(prob * mask)
    return inter / (jnp.sum(prob + mask - prob * mask) + 1e-9)


def render_frames(rm: RobotMeshes, cam: Camera, xi, T0, qpos, sigma, pix, union: str = "product"):
    """Soft masks of several frames: twist ``xi`` (6,) on ``T0`` (4, 4), ``qpos`` (N, nq) -> (N, P);
    ``union`` as in :func:`soft_silhouette`."""
    T = se3_exp(xi) @ T0.astype(xi.dtype)
    return jax.lax.map(lambda q: soft_silhouette(rm, cam, T, q, sigma, pix, union), qpos)
