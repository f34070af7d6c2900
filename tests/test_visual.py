"""Cameras, the soft-silhouette renderer and hand-eye calibration (docs/visual.md).

Small scenes: an 80 x 60 camera, three frames, masks from the exact rasteriser of the full meshes
(the calibration's renderer sees decimated convex pieces, so it is never judged by itself)."""

from __future__ import annotations

import dataclasses
import json

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest
import scipy.linalg

from actuatorlab.errors import DataError
from actuatorlab.identify.handeye import HandEyeConfig, MaskFrames, calibrate_camera, load_mask_frames, pose_error
from actuatorlab.logs import Channel, Setup, Trajectory
from actuatorlab.robots import load_robot
from actuatorlab.sim.camera import Camera, pixel_centres, read_cameras, se3_exp, write_cameras
from actuatorlab.sim.silhouette import geom_poses, load_meshes, mask_edge_profile, soft_iou, soft_silhouette
from actuatorlab.synth.cameras import (CameraRig, MaskDefects, _project_np, draw_rig, look_at, mesh_triangles,
                                       rasterize, record_masks)

from cli_run import cli

CAM = Camera("cam0", 80, 60, 100.0, 100.0, 40.0, 30.0)
T_TRUE = look_at(np.array([0.55, 0.35, 0.45]), np.array([0.12, 0.0, 0.17]))
POSES = np.array([[0.3, -0.5, 0.4, 0.6], [-0.4, 0.2, -0.3, 0.9], [0.8, -0.1, 0.6, -0.5]])


@pytest.fixture(scope="module")
def robot():
    m = mujoco.MjModel.from_xml_path(str(load_robot("open_manipulator_x").mjcf_path))
    return m, load_meshes(m)


def _qpos(m, q4):
    q = np.zeros(m.nq)
    q[:4] = q4
    return q


def _hard(m, q, cam=CAM, T=T_TRUE):
    d = mujoco.MjData(m)
    d.qpos[:] = q
    mujoco.mj_kinematics(m, d)
    return rasterize(_project_np(cam, T, mesh_triangles(m, d)), cam.width, cam.height)


def test_kinematics_match_mujoco(robot):
    m, rm = robot
    d = mujoco.MjData(m)
    for q4 in POSES:
        d.qpos[:] = _qpos(m, q4)
        mujoco.mj_kinematics(m, d)
        P, R = geom_poses(rm, jnp.asarray(d.qpos))
        ids = sorted(set(int(g) for g in np.flatnonzero((m.geom_type == 7) & (m.geom_group == 2))))
        # every piece sits on its mesh geom's frame
        for k in range(len(rm.geom_body)):
            g = next(i for i in ids if m.geom_bodyid[i] == rm.geom_body[k])
            np.testing.assert_allclose(np.asarray(P[k]), d.geom_xpos[g], atol=1e-9)
            np.testing.assert_allclose(np.asarray(R[k]).ravel(), d.geom_xmat[g], atol=1e-9)


def test_se3_exp_is_the_matrix_exponential():
    xi = np.array([0.3, -0.2, 0.5, 0.1, 0.2, -0.3])
    hat = np.zeros((4, 4))
    hat[:3, :3] = [[0, -xi[2], xi[1]], [xi[2], 0, -xi[0]], [-xi[1], xi[0], 0]]
    hat[:3, 3] = xi[3:]
    np.testing.assert_allclose(np.asarray(se3_exp(jnp.asarray(xi))), scipy.linalg.expm(hat), atol=1e-12)
    np.testing.assert_allclose(np.asarray(se3_exp(jnp.zeros(6))), np.eye(4), atol=0)


def test_rasterizer_counts_pixel_centres():
    sq = np.array([[[10, 10], [20, 10], [20, 20]], [[10, 10], [20, 20], [10, 20]]], dtype=float)
    assert rasterize(sq, 40, 30).sum() == 100  # centres 10.5 .. 19.5 in both axes
    assert rasterize(sq + 0.6, 40, 30).sum() == 100
    assert rasterize(sq[:1], 40, 30).sum() == 55  # the diagonal's centres are on the edge: counted


def _hard_pieces(rm, q, T=T_TRUE):
    """Exact rasterisation of the renderer's own convex pieces."""
    P, R = geom_poses(rm, jnp.asarray(q))
    hard = np.zeros((CAM.height, CAM.width), bool)
    for k in range(len(rm.geom_body)):
        V = rm.vertices[k] @ np.asarray(R[k]).T + np.asarray(P[k])
        hard |= rasterize(_project_np(CAM, T, V[rm.faces[k][rm.face_valid[k] > 0]]), CAM.width, CAM.height)
    return hard


def test_soft_edge_is_the_hard_edge(robot):
    """The 0.5 level of the soft mask is the hard silhouette of the same convex pieces (sigma -> 0)."""
    m, rm = robot
    q = _qpos(m, POSES[0])
    hard = _hard_pieces(rm, q)
    soft = np.asarray(soft_silhouette(rm, CAM, jnp.asarray(T_TRUE), jnp.asarray(q), 0.05,
                                      pixel_centres(CAM.width, CAM.height))).reshape(hard.shape)
    assert hard.sum() > 200
    assert np.sum((soft > 0.5) != hard) <= 0.01 * hard.sum()
    # and the decimated pieces overlap the full meshes' silhouette
    full = _hard(m, q)
    assert (hard & full).sum() / (hard | full).sum() > 0.85


def test_renderer_gradients_match_finite_differences(robot):
    m, rm = robot
    pix = pixel_centres(CAM.width, CAM.height)
    obs = jnp.asarray(_hard(m, _qpos(m, POSES[0])).ravel(), jnp.float64)
    q0 = jnp.asarray(_qpos(m, POSES[0] + np.array([0.02, -0.03, 0.02, 0.01])))
    T0 = jnp.asarray(T_TRUE)

    @jax.jit
    def f(xi, q):
        return soft_iou(soft_silhouette(rm, CAM, se3_exp(xi) @ T0, q, 1.5, pix), obs)

    xi0 = jnp.array([0.004, -0.003, 0.002, 0.003, -0.002, 0.004])
    g_xi, g_q = jax.grad(f, argnums=(0, 1))(xi0, q0)
    h = 1e-6
    for k in range(6):
        e = jnp.zeros(6).at[k].set(h)
        fd = (f(xi0 + e, q0) - f(xi0 - e, q0)) / (2 * h)
        assert float(g_xi[k]) == pytest.approx(float(fd), rel=2e-3, abs=1e-5)
    for k in range(4):
        e = jnp.zeros_like(q0).at[k].set(h)
        fd = (f(xi0, q0 + e) - f(xi0, q0 - e)) / (2 * h)
        assert float(g_q[k]) == pytest.approx(float(fd), rel=2e-3, abs=1e-5)
    assert np.all(np.abs(np.asarray(g_xi)) > 1e-4)  # every twist direction moves the silhouette


def _offset_frames(m, rm, masks):
    offset = np.asarray(se3_exp(jnp.array([0.03, -0.02, 0.02, 0.015, -0.02, 0.01])))
    cam = Camera(CAM.name, CAM.width, CAM.height, CAM.fx, CAM.fy, CAM.cx, CAM.cy,
                 tuple(map(tuple, offset @ T_TRUE)))
    frames = MaskFrames(cam, ("a", "b", "c"), np.array([0.0, 0.1, 0.2]), masks,
                        np.stack([_qpos(m, q) for q in POSES]), (0, 1, 2, 3))
    return frames, pose_error(offset @ T_TRUE, T_TRUE)


def test_known_camera_offset_is_recovered_soft_iou(robot):
    """The former optimiser (L-BFGS on 1 - soft IoU), on masks of the renderer's own shape model."""
    m, rm = robot
    frames, e0 = _offset_frames(m, rm, np.stack([_hard_pieces(rm, _qpos(m, q)) for q in POSES]))
    cfg = HandEyeConfig(n_frames=3, sigmas=(2.0, 1.0, 0.5, 0.25), strides=(1, 1, 1, 1), iterations=(10, 8, 8, 8),
                        margin=10, method="soft_iou")
    r = calibrate_camera(frames, rm, cfg)
    e1 = pose_error(r.camera_from_base, T_TRUE)
    print("offset", e0, "->", e1, "soft IoU", r.iou_before, "->", r.iou_after, "std", r.twist_std)
    assert e0[0] > 20.0 and e0[1] > 2.0
    # measured 2026-12-05: 26.9 mm / 2.36 deg -> 12.7 mm / 1.59 deg, soft IoU 0.46 -> 0.90 (sigma
    # 0.25 px): the soft IoU's optimum is biased for thin shapes and L-BFGS stalls (docs/visual.md)
    assert e1[0] < 0.6 * e0[0] and e1[1] < 0.8 * e0[1], (e0, e1)
    assert r.iou_after > 0.85 and r.iou_after > r.iou_before + 0.3
    assert np.all(r.twist_std > 0) and np.all(np.isfinite(r.twist_std))


LM_SMALL = HandEyeConfig(n_frames=3, lm_sigmas=(4.0, 2.0, 1.0, 0.5), lm_strides=(1, 1, 1, 1),
                         lm_iterations=(8, 8, 8, 6), margin=10)


@pytest.mark.parametrize("shape", ["pieces", "full_meshes"])
def test_known_camera_offset_is_recovered(robot, shape):
    """Levenberg-Marquardt on edge-profile pixel residuals (the default): on masks of the
    renderer's own pieces, and on masks of the full meshes (the pieces differ from them)."""
    m, rm = robot
    hard = _hard_pieces if shape == "pieces" else (lambda rm_, q: _hard(m, q))
    frames, e0 = _offset_frames(m, rm, np.stack([hard(rm, _qpos(m, q)) for q in POSES]))
    r = calibrate_camera(frames, rm, LM_SMALL)
    e1 = pose_error(r.camera_from_base, T_TRUE)
    print(shape, "offset", e0, "->", e1, "soft IoU", r.iou_before, "->", r.iou_after, "std", r.twist_std)
    assert e0[0] > 20.0 and e0[1] > 2.0
    # measured 2026-12-05 (80 x 60 px, 3 frames; 1 px ~ 6 mm at the robot): 26.9 mm / 2.36 deg ->
    # pieces 3.4 mm / 0.36 deg, full meshes 6.0 mm / 0.59 deg (the soft IoU method: 12.7 mm / 1.59 deg)
    tol_mm, tol_deg = (5.0, 0.5) if shape == "pieces" else (9.0, 0.9)
    assert e1[0] < tol_mm and e1[1] < tol_deg, (e0, e1)
    assert r.iou_after > r.iou_before + 0.2
    assert np.all(r.twist_std > 0) and np.all(np.isfinite(r.twist_std))


def test_joint_refinement_recovers_an_encoder_error(robot):
    """With ``refine_joints``, a log that misreads joint 1 by 0.04 rad in one frame is corrected
    (masks of the renderer's own pieces; camera started at the known offset)."""
    m, rm = robot
    frames, e0 = _offset_frames(m, rm, np.stack([_hard_pieces(rm, _qpos(m, q)) for q in POSES]))
    q_log = frames.qpos.copy()
    q_log[1, 0] += 0.04
    frames = MaskFrames(frames.camera, frames.logs, frames.time, frames.masks, q_log, frames.joints)
    r = calibrate_camera(frames, rm, dataclasses.replace(LM_SMALL, refine_joints=True))
    e1 = pose_error(r.camera_from_base, T_TRUE)
    print("offset", e0, "->", e1, "corrections [rad]", r.joint_corrections)
    # measured 2026-12-05: -0.026 rad for the misread joint, the others within 0.026 rad (the
    # pixel residuals are correlated, so the prior weighs less than it should); 7.4 mm / 0.61 deg
    assert r.joint_corrections.shape == (3, 4)
    assert -0.06 < r.joint_corrections[1, 0] < -0.015
    assert abs(r.joint_corrections[1, 0]) >= np.abs(r.joint_corrections[:, 0]).max()
    assert e1[0] < 11.0 and e1[1] < 1.0, (e0, e1)


def test_edge_profiles_agree_at_the_true_pose(robot):
    """The observed mask's edge profile is the sigmoid of the distance to a straight edge, and
    the min-union render of the pieces matches the profile of its own hard mask (zero mean
    residual) where the product union is fattened."""
    x = np.arange(40) + 0.5
    half = np.tile(x < 20.0, (30, 1))  # boundary at u = 20 px
    prof = mask_edge_profile(half, 1.5)
    np.testing.assert_allclose(prof[10], 1.0 / (1.0 + np.exp((x - 20.0) / 1.5)), atol=1e-12)
    m, rm = robot
    q = _qpos(m, POSES[0])
    hard = _hard_pieces(rm, q)
    pix = pixel_centres(CAM.width, CAM.height)
    out = {}
    for union in ("min", "product"):
        soft = np.asarray(soft_silhouette(rm, CAM, jnp.asarray(T_TRUE), jnp.asarray(q), 1.0, pix, union))
        out[union] = float(np.sum(soft - mask_edge_profile(hard, 1.0).ravel()))
    print("sum of residuals [px]", out, "mask", hard.sum())
    assert out["product"] > 0.02 * hard.sum()
    assert abs(out["min"]) < 0.3 * out["product"]


def _log(name, t):
    ch = {f"position/joint{k}": Channel("rad", "measured", "output") for k in range(1, 5)}
    data = {c: np.zeros_like(t) for c in ch}
    return Trajectory(name=name, time=t, data=data, channels=ch, setup=Setup("xm430-w350"))


def _camera_dir(tmp_path, masks, times, cam=CAM):
    write_cameras(tmp_path / "cameras.json", [cam])
    np.savez_compressed(tmp_path / "a.npz", time_cam0=times, masks_cam0=masks)
    return tmp_path


def test_bad_mask_resolution_names_file(robot, tmp_path):
    _, rm = robot
    d = _camera_dir(tmp_path, np.zeros((2, 50, 70), np.uint8), np.array([0.1, 0.2]))
    with pytest.raises(DataError, match=r"a\.npz: masks_cam0 are 70 x 50 px .* declares 80 x 60"):
        load_mask_frames([_log("a", np.linspace(0, 1, 101))], d, CAM, rm)


def test_mask_frame_without_log_time_names_file(robot, tmp_path):
    _, rm = robot
    d = _camera_dir(tmp_path, np.zeros((2, 60, 80), np.uint8), np.array([0.5, 1.7]))
    with pytest.raises(DataError, match=r"a\.npz: mask frame 1 at t = 1\.7 s has no matching log time"):
        load_mask_frames([_log("a", np.linspace(0, 1, 101))], d, CAM, rm)


def test_non_rigid_camera_file_is_one_line(tmp_path):
    T = np.eye(4)
    T[0, 0] = 1.2
    doc = {"format": "actuatorlab-cameras", "version": 1,
           "cameras": [dict(CAM.to_dict(), camera_from_base=T.tolist())]}
    (tmp_path / "cameras.json").write_text(json.dumps(doc))
    with pytest.raises(DataError, match=r"cameras\.json: camera 'cam0' camera_from_base is not a rigid transform"):
        read_cameras(tmp_path / "cameras.json")
    (tmp_path / "logs").mkdir()
    rc, out, err = cli("calibrate-camera", tmp_path / "logs", tmp_path)
    assert rc == 2 and len(err.strip().splitlines()) == 1


def test_record_masks_frames_and_defects(robot):
    m, _ = robot
    t = np.arange(0, 1.0, 0.01)
    q = np.tile(POSES[0], (len(t), 1))
    rig = [(CAM, T_TRUE)]
    clean = record_masks(m, ("joint1", "joint2", "joint3", "joint4"), t, q, rig, MaskDefects(0, 0, 0, 0, 0), 10.0,
                         np.random.default_rng(0))
    np.testing.assert_allclose(clean["time_cam0"], np.arange(0.05, 0.99, 0.1))
    assert clean["masks_cam0"].shape == (10, 60, 80) and clean["masks_cam0"].dtype == np.uint8
    assert np.array_equal(clean["masks_cam0"][0] > 0, _hard(m, _qpos(m, POSES[0])))
    noisy = record_masks(m, ("joint1", "joint2", "joint3", "joint4"), t, q, rig, MaskDefects(), 10.0,
                         np.random.default_rng(0))
    diff = np.mean(noisy["masks_cam0"] != clean["masks_cam0"])
    assert 0.001 < diff < 0.05
    cams = draw_rig(CameraRig(), np.random.default_rng(1))
    assert [c.name for c, _ in cams] == ["cam0", "cam1"]
    for _, T in cams:
        np.testing.assert_allclose(T[:3, :3] @ T[:3, :3].T, np.eye(3), atol=1e-12)
