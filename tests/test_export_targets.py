"""`actuatorlab export` to mjlab, Isaac Lab, TorchScript and ONNX: every file round-trips.

mjlab (1.6, the version on the package index) pins mujoco ~= 3.11 and this project needs mujoco >=
4, so mjlab cannot be installed beside actuatorlab (docs/export.md). The mjlab / Isaac Lab checks
below therefore run the exported files under the frameworks' *documented* semantics,
reimplemented minimally here and labelled as such: the DC-motor clip of mjlab's
``dc_motor_clip`` / Isaac Lab's ``DCMotor._clip_effort``, their command delay in whole physics
steps, and the history buffers of ``LearnedMlpActuator`` / ``ActuatorNetMLP`` (index 0 = current
step). Each is run at the physics step the file declares and compared with actuatorlab's own
rollout of the same log; the same file run at another step must miss. The same exported files
were also run in mjlab 1.6 itself, in a separate environment, by bench/mjlab_check.py (figures in
docs/export.md section 9).
"""

from __future__ import annotations

import json

import equinox as eqx
import jax.numpy as jnp
import numpy as np
import pytest

from synthetic import DT, TRUTH_M1, simulate, synthetic_set

from actuatorlab.app.cli import main
from actuatorlab.errors import ModelError
from actuatorlab.export.targets import export_targets
from actuatorlab.models.modelfile import MODEL_FORMAT, MODEL_FORMAT_VERSION, save_model
from actuatorlab.learned.joint import effort, log_set, rollout_logs
from actuatorlab.learned.joint_train import build_joint_model, save_joint_model
from actuatorlab.sim.rollout import make_batches

torch = pytest.importorskip("torch", reason="torch is the optional extra 'export' (pip install 'actuatorlab[export]')")

G = 9.81
MASS, LENGTH = 0.49, 0.1  # tests/synthetic.xl330_setup bench
#: fitted-like truth with a current limit and a 2-step command delay (DT = 5 ms)
TRUTH = {**TRUTH_M1, "current_limit": 0.9, "delay": 2 * DT}


def analytic_model(params: dict) -> dict:
    setup = {"joint_type": "revolute", "controller": "dynamixel_pwm", "gains": {"kp": 400.0},
             "supply_voltage": 7.4, "bench": {"mass": MASS, "length": LENGTH, "arm_mass": 0.0}}
    return {"format": MODEL_FORMAT, "format_version": MODEL_FORMAT_VERSION, "model": "m1+delay",
            "joint_type": "revolute", "controller": "dynamixel_pwm", "setup": setup,
            "parameters": {k: {"value": float(v), "free": True} for k, v in params.items()}, "fit": {"dt": DT}}


@pytest.fixture(scope="module")
def logs():
    return synthetic_set([("chirp", "chirp", 400)], TRUTH, duration=0.6, quantise=False, amplitude=0.8)


@pytest.fixture(scope="module")
def analytic_files(tmp_path_factory, logs):
    root = tmp_path_factory.mktemp("analytic")
    save_model(analytic_model(TRUTH), root / "model.json")
    res = export_targets(root / "model.json", {"mjlab": root / "out" / "mj.py", "isaaclab": root / "out" / "isaac.json",
                                               "mjcf": root / "out" / "bench.xml"})
    return root, res


# ---------------------------------------------------------------------------------------------
# the frameworks' documented semantics, reimplemented (test-local reference, not their code)


def dc_motor_clip(tau, S, w0, F, dq):
    """mjlab dc_motor_clip: torque-speed lines S(+-1 - dq/w0) bounded by +-F."""
    v = np.clip(dq, -w0 * (1 + F / S), w0 * (1 + F / S))
    return np.clip(tau, max(S * (-1 - v / w0), -F), min(S * (1 - v / w0), F))


def stick_slip(inertia, dq, tau_net, budget, h):
    """Passive joint friction stand-in (constant + viscous), sticking exactly as actuatorlab does."""
    stop = inertia * dq / h + tau_net
    return -np.sign(stop) * min(abs(stop), budget)


def run_dc_cfg(cfg, q_target, q0, dq0, h, armature):
    """mjlab DcMotorActuatorCfg at physics step ``h`` on the pendulum bench (q_target held per step)."""
    lag = cfg["delay_min_lag"]
    assert lag == cfg["delay_max_lag"]
    I = MASS * LENGTH**2 + armature
    q, dq, out = q0, dq0, []
    for k in range(len(q_target)):
        out.append(q)
        qt = q_target[max(k - lag, 0)]
        tau = dc_motor_clip(cfg["stiffness"] * (qt - q) - cfg["damping"] * dq, cfg["saturation_effort"],
                            cfg["velocity_limit"], cfg["effort_limit"], dq)
        tau_e = -MASS * LENGTH * G * np.sin(q)
        tau_f = stick_slip(I, dq, tau + tau_e, cfg["frictionloss"] + cfg["viscous_damping"] * abs(dq), h)
        dq = dq + h * (tau + tau_e + tau_f) / I
        q = q + h * dq
    return np.array(out)


# ---------------------------------------------------------------------------------------------
# analytic model -> mjlab / Isaac Lab configurations


def test_dc_motor_clip_is_the_pwm_motor_point_by_point(analytic_files):
    """The exported (stiffness, damping, S, w0, F) reproduce clip(kt/R (clip(V) - kt dq), +-kt i_max)."""
    root, res = analytic_files
    cfg = json.loads((root / "out" / "mj.json").read_text())["configs"]["DcMotorActuatorCfg"]
    kt, R, imax = TRUTH["kt"], TRUTH["R"], TRUTH["current_limit"]
    from actuatorlab.models.control import DEFAULT_ERROR_GAIN
    g = 7.4 * 400.0 * DEFAULT_ERROR_GAIN["dynamixel_pwm"]
    rng = np.random.default_rng(0)
    for e, dq in zip(rng.normal(0, 0.5, 300), rng.normal(0, 30.0, 300)):
        V = np.clip(g * e, -7.4, 7.4)
        motor = np.clip(kt / R * (V - kt * dq), -kt * imax, kt * imax)
        tau = dc_motor_clip(cfg["stiffness"] * e - cfg["damping"] * dq, cfg["saturation_effort"],
                            cfg["velocity_limit"], cfg["effort_limit"], dq)
        assert tau == pytest.approx(motor, rel=1e-9, abs=1e-12), (e, dq)


def test_mjlab_config_replays_the_log_at_its_declared_rate(analytic_files, logs):
    root, res = analytic_files
    doc = json.loads((root / "out" / "mj.json").read_text())
    cfg, meta = doc["configs"]["DcMotorActuatorCfg"], doc["metadata"]
    assert meta["physics_dt_s"] == DT and meta["delay"]["lag_steps"] == 2
    assert meta["position_error"].startswith("e = q_target - q")
    (q_ref, _), = simulate(logs, TRUTH, model="m1")
    tr = logs[0]
    qt, q0, dq0 = tr.data["position_target"], float(q_ref[0]), float(tr.data["velocity"][0])
    q = run_dc_cfg(cfg, qt, q0, dq0, meta["physics_dt_s"], cfg["armature"])
    err = np.max(np.abs(q - q_ref))
    assert np.ptp(q_ref) > 0.5  # the log moves
    assert err < 1e-6, err  # measured 6e-17 rad: the same law and integrator
    # the same configuration at a 2x faster physics step (commands held, lag in steps): it must miss
    q2 = run_dc_cfg(cfg, np.repeat(qt, 2), q0, dq0, meta["physics_dt_s"] / 2, cfg["armature"])[::2]
    assert np.max(np.abs(q2 - q_ref)) > 1e-2  # measured 0.018 rad


def test_isaaclab_and_mjlab_files_carry_fields_metadata_and_losses(analytic_files):
    root, res = analytic_files
    by = {r.target: r for r in res}
    assert set(by) == {"mjcf", "mjlab", "isaaclab"}
    isaac = json.loads((root / "out" / "isaac.json").read_text())
    mj = json.loads((root / "out" / "mj.json").read_text())["configs"]
    dc, delayed = isaac["configs"]["DCMotorCfg"], isaac["configs"]["DelayedPDActuatorCfg"]
    for k in ("stiffness", "damping", "saturation_effort", "velocity_limit", "effort_limit", "armature"):
        assert dc[k] == mj["DcMotorActuatorCfg"][k]
    assert delayed["min_delay"] == delayed["max_delay"] == 2
    assert dc["saturation_effort"] == pytest.approx(TRUTH["kt"] * 7.4 / TRUTH["R"])
    assert dc["velocity_limit"] == pytest.approx(7.4 / TRUTH["kt"])
    assert any("PhysX coefficient" in x for x in by["isaaclab"].not_representable)
    bdc = mj["BuiltinDcMotorActuatorCfg"]
    assert bdc["voltage_limit"] == 7.4 and bdc["motor_params"]["DcMotorPhysicalParams"]["kt"] == TRUTH["kt"]
    # MuJoCo 3.11's dcmotor controller outputs volts: kp = kp_eff R / kt [V/rad], no kd
    # (checked in mjlab 1.6 itself by bench/mjlab_check.py)
    assert bdc["stiffness"] * TRUTH["kt"] / TRUTH["R"] == pytest.approx(mj["DcMotorActuatorCfg"]["stiffness"])
    assert bdc["damping"] == 0.0 and bdc["effort_limit"] == pytest.approx(TRUTH["kt"] * TRUTH["current_limit"])
    assert json.loads((root / "out" / "mj.json").read_text())["metadata"]["recommended"] == "DcMotorActuatorCfg"
    text = (root / "out" / "mj.py").read_text()
    assert "from mjlab.actuator import" in text and "DcMotorActuatorCfg(" in text
    compile(text, "mj.py", "exec")  # valid Python to paste
    readme = (root / "out" / "README.md").read_text()
    for s in ("## mjcf", "## mjlab", "## isaaclab", "physics step 0.005 s (200 Hz)", "q_target - q"):
        assert s in readme, s


def test_pd_law_exports_as_ideal_pd_with_its_delay(tmp_path):
    """pd law: tau = clip(kp e - kd dq, +-u_max) -> mjlab IdealPd, Isaac Lab DelayedPD (3 steps)."""
    d = analytic_model({"armature": 0.01, "friction_viscous": 0.02, "delay": 3 * DT + 1e-4})
    d.update(controller="pd", setup={**d["setup"], "controller": "pd", "gains": {"kp": 20.0, "kd": 0.5, "u_max": 3.0}})
    save_model(d, tmp_path / "model.json")
    res = {r.target: r for r in export_targets(tmp_path / "model.json", {"mjlab": tmp_path / "m.json",
                                                                          "isaaclab": tmp_path / "i.json"})}
    mj = json.loads((tmp_path / "m.json").read_text())["configs"]
    isaac = json.loads((tmp_path / "i.json").read_text())["configs"]
    assert mj == {"IdealPdActuatorCfg": {"target_names_expr": ["joint"], "armature": 0.01, "frictionloss": 0.0,
                                         "viscous_damping": 0.02, "delay_min_lag": 3, "delay_max_lag": 3,
                                         "stiffness": 20.0, "damping": 0.5, "effort_limit": 3.0}}
    assert isaac["DelayedPDActuatorCfg"]["min_delay"] == 3 and "DCMotorCfg" not in isaac
    assert any("rounded to 3 physics step" in x for x in res["mjlab"].not_representable)


# ---------------------------------------------------------------------------------------------
# learned models -> TorchScript / ONNX / Isaac Lab / mjlab actuator nets


TINY = {"actuator_net": dict(width=16, depth=2, stride=1), "actuator_lstm": dict(hidden=8, n_layers=2), "mlp": dict(width=16, depth=1, d=8, head_width=8),
        "transformer": dict(d=8, n_heads=2, n_layers=1, ff=16, head_width=8)}


@pytest.fixture(scope="module")
def rest_logs():
    """Logs that start at rest on their target (so Isaac Lab's zero-filled history equals actuatorlab's)."""
    return synthetic_set([("sine", "sine", 400)], TRUTH_M1, duration=0.5, quantise=False, amplitude=0.6)


@eqx.filter_jit
def batched_effort(m, windows):
    """actuatorlab's effort (learned.joint.effort) of raw windows (N, history + 1, n_features)."""
    return eqx.filter_vmap(lambda w: effort(m, w, jnp.float32))(windows)


def learned_run(root, arch, logs, history=4, stride=1):
    (b,) = make_batches(logs, DT)
    sizes = {**TINY[arch], **({"stride": stride} if arch == "actuator_net" else {})}
    m = build_joint_model("learned", arch, [b], history=history, sizes=sizes, seed=3)
    from actuatorlab.models.nets import arch_sizes
    save_joint_model(root, m, arch=arch, sizes=arch_sizes(arch, **sizes), base=None,
                     setup={"joint_type": "revolute", "controller": "dynamixel_pwm"}, data={"dt": DT}, training={})
    return m, b


@pytest.mark.parametrize("target", ["isaaclab", "mjlab"])
def test_actuator_net_file_matches_the_network_and_replays_at_its_rate(tmp_path, rest_logs, target):
    m, b = learned_run(tmp_path, "actuator_net", rest_logs)
    (r,) = export_targets(tmp_path / "model.json", {target: tmp_path / "out" / "net.py"})
    doc = json.loads((tmp_path / "out" / "net.json").read_text())
    (name, cfg), = doc["configs"].items()
    assert name == {"isaaclab": "ActuatorNetMLPCfg", "mjlab": "LearnedMlpActuatorCfg"}[target]
    extra = {"actuatorlab.json": ""}
    net = torch.jit.load(str(tmp_path / "out" / cfg["network_file"]), _extra_files=extra)
    meta = json.loads(extra["actuatorlab.json"])
    assert meta["scales"] == doc["metadata"]["scales"] and meta["physics_dt_s"] == DT
    idx = cfg["input_idx"] if target == "isaaclab" else list(range(cfg["history_length"]))
    assert idx == [0, 1, 2, 3, 4] and meta["history"]["lag_s"] == pytest.approx([i * DT for i in idx])
    # 1. torques on the same inputs (random windows of err, dq): float32, 1e-5 relative
    rng = np.random.default_rng(0)
    win = rng.normal(0, 1, (64, 5, 2)).astype(np.float32) * np.array([0.2, 3.0], np.float32)
    ref = np.asarray(batched_effort(m, jnp.asarray(win)))
    rows = win[:, ::-1]  # history index 0 = current frame = last row
    v = np.concatenate([rows[:, idx, 0] * cfg["pos_scale"], rows[:, idx, 1] * cfg["vel_scale"]], axis=1)
    got = net(torch.from_numpy(v)).numpy()[:, 0] * cfg["torque_scale"]
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5 * np.max(np.abs(ref)))
    assert np.ptp(ref) > 0.05  # the network is not flat

    # 2. closed loop at the declared physics step, framework history semantics, vs actuatorlab's rollout
    ls = log_set(m, b)
    q_ref = np.asarray(rollout_logs(m, ls).q)[0]
    qt = np.asarray(ls.qt)[0]
    I = MASS * LENGTH**2 + cfg["armature"]

    def run(h, qt):
        q, dq = float(q_ref[0]), 0.0
        hist = np.zeros((max(idx) + 1, 2))  # Isaac Lab: zeros at reset (at rest on target: = backfill)
        out = []
        for k in range(len(qt)):
            out.append(q)
            hist = np.roll(hist, 1, axis=0)
            hist[0] = (qt[k] - q, dq)
            x = np.concatenate([hist[idx, 0] * cfg["pos_scale"], hist[idx, 1] * cfg["vel_scale"]])[None]
            tau = float(net(torch.from_numpy(x.astype(np.float32)))[0, 0]) * cfg["torque_scale"]
            tau = float(np.clip(tau, -cfg["effort_limit"], cfg["effort_limit"]))
            dq = dq + h * (tau - MASS * LENGTH * G * np.sin(q)) / I
            q = q + h * dq
        return np.array(out)

    assert abs(qt[0] - q_ref[0]) < 1e-9  # starts on target
    dt = doc["metadata"]["physics_dt_s"]
    assert dt == DT
    err = np.max(np.abs(run(dt, qt) - q_ref))
    assert np.ptp(q_ref) > 0.05 and err < 1e-6, err  # measured 7e-9 rad (float32 network)
    wrong = np.max(np.abs(run(dt / 2, np.repeat(qt, 2))[::2] - q_ref))
    assert wrong > 1e-3, (err, wrong)  # measured 0.010 rad


def test_isaaclab_lstm_file_has_the_layout_isaac_lab_reads_and_replays_at_its_rate(tmp_path, rest_logs):
    """ActuatorNetLSTM: ``network.lstm`` (layers = len(state_dict) / 4, hidden = weight_hh_l0.shape[1]),
    ``network(x (N, 1, 2), (h, c)) -> (torque, (h, c))``, state zero at reset and carried."""
    m, b = learned_run(tmp_path, "actuator_lstm", rest_logs, history=0)
    export_targets(tmp_path / "model.json", {"isaaclab": tmp_path / "out" / "lstm.py"})
    doc = json.loads((tmp_path / "out" / "lstm.json").read_text())
    cfg = doc["configs"]["ActuatorNetLSTMCfg"]
    net = torch.jit.load(str(tmp_path / "out" / cfg["network_file"]))
    sd = net.lstm.state_dict()
    n_layers, hidden = len(sd) // 4, sd["weight_hh_l0"].shape[1]
    assert (n_layers, hidden) == (2, 8)
    # 1. torques on the same input sequences (8 random sequences of 20 steps), state carried
    rng = np.random.default_rng(4)
    seq = (rng.normal(0, 1, (8, 20, 2)) * np.array([0.2, 3.0])).astype(np.float32)

    def eqx_seq(x):
        def body(st, f):
            st, t = m.net.step(st, m.norm.apply(f))
            return st, jnp.clip(m.effort_scale * t[0], -m.effort_bound, m.effort_bound)
        import jax
        return jax.lax.scan(body, m.net.init_state(), x)[1]

    ref = np.asarray(eqx.filter_jit(eqx.filter_vmap(eqx_seq))(jnp.asarray(seq)))
    h = torch.zeros(n_layers, 8, hidden)
    c = torch.zeros(n_layers, 8, hidden)
    got = []
    for k in range(20):
        tau, (h, c) = net(torch.from_numpy(seq[:, k:k + 1].copy()), (h, c))
        got.append(tau.reshape(8).numpy())
    np.testing.assert_allclose(np.stack(got, 1), ref, rtol=1e-5, atol=1e-5 * np.max(np.abs(ref)))
    assert np.ptp(ref) > 1e-2
    # 2. closed loop at the declared step from Isaac Lab's zero state vs actuatorlab's rollout
    ls = log_set(m, b)
    q_ref = np.asarray(rollout_logs(m, ls).q)[0]
    qt = np.asarray(ls.qt)[0]
    I = MASS * LENGTH**2 + cfg["armature"]

    def run(hstep, qt):
        q, dq = float(q_ref[0]), 0.0
        hc = (torch.zeros(n_layers, 1, hidden), torch.zeros(n_layers, 1, hidden))
        out = []
        for k in range(len(qt)):
            out.append(q)
            x = torch.tensor([[[qt[k] - q, dq]]], dtype=torch.float32)
            tau, hc = net(x, hc)
            dq = dq + hstep * (float(tau[0, 0]) - MASS * LENGTH * G * np.sin(q)) / I
            q = q + hstep * dq
        return np.array(out)

    dt = doc["metadata"]["physics_dt_s"]
    err = np.max(np.abs(run(dt, qt) - q_ref))
    wrong = np.max(np.abs(run(dt / 2, np.repeat(qt, 2))[::2] - q_ref))
    assert np.ptp(q_ref) > 0.05 and err < 1e-6, err  # measured 1.3e-8 rad
    assert wrong > 1e-3, (err, wrong)  # measured 2.5e-3 rad
    with pytest.raises(ModelError, match="no recurrent learned actuator"):
        export_targets(tmp_path / "model.json", {"mjlab": tmp_path / "m.py"})


def test_isaaclab_input_idx_with_stride_and_mjlab_refuses_it(tmp_path, rest_logs):
    learned_run(tmp_path, "actuator_net", rest_logs, history=4, stride=2)
    export_targets(tmp_path / "model.json", {"isaaclab": tmp_path / "i.py"})
    assert json.loads((tmp_path / "i.json").read_text())["configs"]["ActuatorNetMLPCfg"]["input_idx"] == [0, 2, 4]
    with pytest.raises(ModelError, match="contiguous history"):
        export_targets(tmp_path / "model.json", {"mjlab": tmp_path / "m.py"})


@pytest.mark.parametrize("arch", ["mlp", "transformer", "actuator_net"])
def test_torchscript_window_module_matches_the_network(tmp_path, rest_logs, arch):
    m, b = learned_run(tmp_path, arch, rest_logs)
    export_targets(tmp_path / "model.json", {"torchscript": tmp_path / "a.pt"})
    extra = {"actuatorlab.json": ""}
    net = torch.jit.load(str(tmp_path / "a.pt"), _extra_files=extra)
    meta = json.loads(extra["actuatorlab.json"])
    assert meta["physics_dt_s"] == DT and meta["layout"]["per_channel"] == list(m.layout.per_channel)
    assert meta["history"]["frame_lag_s"] == pytest.approx([4 * DT, 3 * DT, 2 * DT, DT, 0.0])
    rng = np.random.default_rng(1)
    mean, std = np.asarray(m.norm.mean), np.asarray(m.norm.std)
    win = (mean + std * rng.normal(0, 1.5, (32, 5, len(mean)))).astype(np.float32)
    ref = np.asarray(batched_effort(m, jnp.asarray(win)))
    got = net(torch.from_numpy(win)).numpy()[:, 0]
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5 * np.max(np.abs(ref)))
    assert np.ptp(ref) > 1e-3


@pytest.mark.parametrize("arch", ["mlp", "transformer"])
def test_onnx_export_carries_its_layout_and_matches(tmp_path, rest_logs, arch):
    pytest.importorskip("onnxruntime", reason="extra 'onnx'")
    import onnx

    from actuatorlab.learned.onnx_export import OnnxActuator

    m, b = learned_run(tmp_path, arch, rest_logs)
    export_targets(tmp_path / "model.json", {"onnx": tmp_path / "a.onnx"})
    props = {p.key: p.value for p in onnx.load(str(tmp_path / "a.onnx")).metadata_props}
    meta = json.loads(props["actuatorlab"])
    assert float(props["physics_dt_s"]) == DT and "NORMALIZED" in props["input_layout"]
    assert meta["normalizer"]["std"] == pytest.approx(np.asarray(m.norm.std).tolist())
    rng = np.random.default_rng(2)
    x = rng.normal(0, 1, (16, 5, m.layout.n_features)).astype(np.float32)
    got = OnnxActuator(tmp_path / "a.onnx")(x).torque[:, 0]
    ref = np.asarray(eqx.filter_jit(eqx.filter_vmap(lambda w: m.net(w).torque[0]))(jnp.asarray(x)))
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5 * np.max(np.abs(ref)))
    assert (tmp_path / "README.md").exists()


# ---------------------------------------------------------------------------------------------
# the command line


def test_cli_refuses_targets_that_cannot_represent_the_model(tmp_path, rest_logs, capsys):
    save_model(analytic_model(TRUTH), tmp_path / "a" / "model.json")
    learned_run(tmp_path / "l", "mlp", rest_logs)
    cases = [(["export", tmp_path / "a" / "model.json"], "at least one target"),
             (["export", tmp_path / "a" / "model.json", "--onnx", tmp_path / "x.onnx"], "no network"),
             (["export", tmp_path / "l" / "model.json", "--mjcf", tmp_path / "x.xml"], "no MuJoCo equivalent"),
             (["export", tmp_path / "l" / "model.json", "--isaaclab", tmp_path / "x.py"],
              "missing a learned model with arch actuator_net"),
             (["export", tmp_path / "a" / "model.json", "--mjlab", tmp_path / "x.txt"], "name the configuration"),
             (["export", tmp_path / "l" / "model.json", "--torchscript", tmp_path / "x.pt", "--isaaclab",
               tmp_path / "x.py"], "actuator_net")]
    (tmp_path / "arm_model.json").write_text(json.dumps({"format": "actuatorlab-arm-model", "kind": "learned"}))
    cases.append((["export", tmp_path / "arm_model.json", "--onnx", tmp_path / "x.onnx"], "whole-robot model is one"))
    for argv, msg in cases:
        capsys.readouterr()
        assert main([str(a) for a in argv]) == 2
        assert msg in capsys.readouterr().err.replace("\n", " "), msg
    assert not any((tmp_path / n).exists() for n in ("x.onnx", "x.py", "x.pt", "x.xml"))  # nothing written
    assert main(["export", str(tmp_path / "a" / "model.json"), "--mjlab", str(tmp_path / "o" / "m.py"),
                 "--isaaclab", str(tmp_path / "o" / "i.py")]) == 0
    assert sorted(p.name for p in (tmp_path / "o").iterdir()) == ["README.md", "i.json", "i.py", "m.json", "m.py"]
