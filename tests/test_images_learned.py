"""Camera silhouettes supervising a learned whole-robot actuator (actuatorlab.learned.arm_images;
docs/visual.md "Learned actuator from images").

Small scene, as tests/test_images.py: OpenManipulator-X chirp logs made by the native path with a
known truth (viscous friction 0.3 N.m.s/rad, nominal 0), masks of an 80 x 60 camera at 50
frames/s from the exact rasteriser, joint2's encoder withheld; 48-step logs, 16-step windows, a
tiny MLP (the MJX gradient still compiles for about a minute on a 2-core CPU)."""

from __future__ import annotations

import json

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from test_arm_fit import chirp_logs
from test_images import T_TRUE, write_masks

from actuatorlab.identify.images import ImageOptions, image_term, load_image_supervision, withhold_encoders
from actuatorlab.learned.arm import arm_log, learned_windows, make_learned_arm
from actuatorlab.learned.arm_images import channel_mask, unmeasured_joints, with_standins
from actuatorlab.learned.arm_train import ArmTrainConfig, train_arm
from actuatorlab.learned.distill import DistillConfig
from actuatorlab.logs.io import save_trajectory
from actuatorlab.models.features import Normalizer
from actuatorlab.precision import physics_precision
from actuatorlab.robots import load_robot
from actuatorlab.sim.arm import make_mjx_rollout
from actuatorlab.sim.arm_learned import trainable

from cli_run import cli

ROBOT = "open_manipulator_x"
ARM = ("joint1", "joint2", "joint3", "joint4")
FEATS = ("q_target", "q", "dq", "err")
OPTS = ImageOptions(weight=1e-2, settle_s=0.05)


@pytest.fixture(scope="module")
def robot():
    return load_robot(ROBOT)


@pytest.fixture(scope="module")
def scene(robot, tmp_path_factory):
    """(logs without joint2's encoder: two to train on, one to validate; the masks folder)."""
    truth = robot.nominal_params()
    truth["friction_viscous"] = np.full_like(truth["kt"], 0.3)
    with physics_precision():
        logs = chirp_logs(robot, truth, T=48, n_logs=3, amp=(0.5, 0.2), prefix="img")
    d = write_masks(robot, logs, tmp_path_factory.mktemp("masks"), rate=50.0)
    return [withhold_encoders(t, ["joint2"]) for t in logs], d


def test_image_gradient_reaches_the_network_through_mjx(robot, scene):
    """d J_img / d(network parameters) through renderer, kinematics and the MJX rollout: finite and
    non-zero, and non-zero on joint2's torque output, which nothing but the cameras sees."""
    withheld, d = scene
    sup = load_image_supervision(robot, withheld, d, options=OPTS)
    assert channel_mask(robot, withheld[0], sup)[robot.index("joint2")]
    assert not channel_mask(robot, withheld[0], None)[robot.index("joint2")]
    with physics_precision():
        model = make_learned_arm(robot, "mlp", channels=ARM, per_channel=FEATS, normalizer=Normalizer(
            np.zeros(16), np.ones(16)), effort_scale=0.2, residual=True, history=2, width=8, depth=1, d=8,
            head_width=8)
        logs = [arm_log(robot, t, ARM, FEATS) for t in withheld[:1]]
        assert unmeasured_joints(robot, logs) == ["joint2"]
        logs = with_standins(logs, (robot, robot.nominal_params()))
        i = robot.index("joint2")
        assert np.all(logs[0].base.q_meas[1:, i] != logs[0].base.inputs.q_target[1:, i])  # not the command
        w = learned_windows(robot, logs, 16, model, images=sup).take(np.array([0, 1]))
        assert float(np.sum(w.img[0][1])) >= 6 and float(np.sum(w.wgt[..., i])) == 0.0  # frames; joint2 unscored
        roll = jax.vmap(make_mjx_rollout(robot), in_axes=(None, 0, 0, None))
        term = image_term(sup)
        diff, static = eqx.partition(model, trainable(model))

        @jax.jit
        def grad(dd):
            return jax.grad(lambda x: term(roll(eqx.combine(x, static), w.inputs, w.state0, None)[1].q, w.img))(dd)

        g = grad(diff)
    leaves = [np.asarray(x) for x in jax.tree.leaves(g)]
    assert all(np.all(np.isfinite(x)) for x in leaves)
    assert sum(float(np.sum(x * x)) for x in leaves) > 0.0
    last = g.net.heads.torque.layers[-1]
    row = ARM.index("joint2")
    assert float(jnp.abs(last.weight[row]).sum() + jnp.abs(last.bias[row])) > 0.0


def test_training_on_images_alone_lowers_the_image_term(robot, scene, tmp_path):
    """A few BPTT steps, joint2 withheld, a teacher with no viscous friction (truth 0.3): the image
    term on all the training windows (every step sees all of them) falls from step 0."""
    withheld, d = scene
    sup = load_image_supervision(robot, withheld, d, options=OPTS)
    budget = dict(steps=8, batch=6, curriculum=(16,), stage_fraction=(1,), eval_every=8, max_val_windows=2,
                  one_shape=True, lr=1e-2)
    opts = ArmTrainConfig(arch="mlp", sizes=dict(width=8, depth=1, d=8, head_width=8), history=2, per_channel=FEATS,
                          budget=budget, teacher={"model": None, "params": {"friction_viscous": 0.0}},
                          distill=DistillConfig(steps=20, batch=64))
    with physics_precision():
        r = train_arm(ROBOT, withheld[:2], withheld[2:], opts, out=tmp_path / "run", progress=False, images=sup)
    assert "joint2" in r["layout"]["channels"] and r["training"]["unmeasured"] == ["joint2"]
    assert r["training"]["val_criterion"] == "position_mse+image_term"
    rows = [json.loads(s) for s in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    img = [x["image"] for x in rows if "loss" in x]  # J_img [rad^2] before each step
    assert len(img) == 8 and all(np.isfinite(img)), img
    # the first step is at lr 0 (warm-up); then every step lowers it (80 x 60 px: the silhouettes'
    # soft IoU stays near 0.6 even at the true motion, so there is little room: 0.0042 -> 0.0040)
    assert img[-1] < 0.97 * img[0] and all(b < a for a, b in zip(img[1:], img[2:])), img
    vals = [x for x in rows if "val" in x]
    assert vals[0]["step"] == 0 and "image" in vals[0] and vals[0]["image"] > 0  # the validation log's masks


def test_bad_image_options_are_one_line(scene, tmp_path):
    withheld, d = scene
    data = tmp_path / "logs"
    data.mkdir()
    save_trajectory(withheld[0], data / f"{withheld[0].name}.parquet")
    cal = tmp_path / "camera_calibration.json"
    cal.write_text(json.dumps({"cameras": [{"camera": "cam0", "camera_from_base": T_TRUE.tolist()}]}))
    cfg = tmp_path / "job.json"
    cfg.write_text(json.dumps({"masks": str(d)}))  # the config's key, as fit's
    for args, msg in (((data, "--robot", ROBOT, "--config", cfg), "--masks and --camera go together"),
                      ((data, "--robot", ROBOT, "--camera", cal), "--masks and --camera go together"),
                      ((data, "--masks", d, "--camera", cal), "camera masks supervise a whole-robot model"),
                      ((data, "--robot", ROBOT, "--masks", d, "--camera", cal, "--image-weight", "-1"),
                       "--image-weight must be > 0")):
        rc, out, err = cli("train", *args, "--out", tmp_path / "run")
        assert rc == 2 and len(err.strip().splitlines()) == 1, (args, err)
        assert msg in err, (args, err)
        assert not (tmp_path / "run").exists()
