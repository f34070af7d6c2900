"""Run an exported mjlab actuator configuration in mjlab itself and compare it with actuatorlab.

mjlab (1.6) pins mujoco ~= 3.11 and actuatorlab needs mujoco >= 4, so the two cannot share an
environment (docs/export.md). This script has three steps, the middle one in a separate virtual
environment that has mjlab (``python -m venv V && V/bin/pip install mjlab torch==2.13.0``)::

    PYTHONPATH=src python bench/mjlab_check.py prepare OUT      # actuatorlab: model, export, log
    V/bin/python bench/mjlab_check.py run OUT                   # mjlab: replay the log on CPU
    PYTHONPATH=src python bench/mjlab_check.py compare OUT      # table, then one JSON line

``prepare`` writes, for two models (:data:`CASES`: a fitted-like XL330 with the tests' truth, a
current limit and a 2-step delay; the same without joint friction), the model file, its mjlab
export (``mj.py`` / ``mj.json``), a 2 s chirp log at 200 Hz and actuatorlab's own rollout of it.
``run`` builds the pendulum bench as an mjlab ``Entity`` with each exported configuration
(``DcMotorActuatorCfg``, ``BuiltinDcMotorActuatorCfg``) and replays the log's targets at the
declared physics step (one ``write_data_to_sim`` + ``sim.step`` per sample, MuJoCo-Warp on the
CPU), then at half the step (the wrong rate). ``compare`` prints the position MAE / max error
against actuatorlab's rollout. Measured figures: bench/README.md.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import numpy as np

MASS, LENGTH, G = 0.49, 0.1, 9.81
#: joint solimpfriction of the bench (docs/export.md section 4: MuJoCo's default lets a joint held by
#: friction creep); set MJLAB_CHECK_SOLIMP=default to run with MuJoCo's default impedance
SOLIMP = None if os.environ.get("MJLAB_CHECK_SOLIMP") == "default" else "0.999 0.9999 0.001"


def prepare(out: Path) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from synthetic import DT, simulate, synthetic_set
    from test_export_targets import TRUTH, analytic_model

    from actuatorlab.export.targets import export_targets
    from actuatorlab.models.modelfile import save_model
    from actuatorlab.precision import physics_precision

    with physics_precision():
        logs = synthetic_set([("chirp", "chirp", 400)], TRUTH, duration=2.0, quantise=False, amplitude=0.8)
    tr = logs[0]
    for case, params in CASES.items():
        p = {**TRUTH, **params}
        with physics_precision():
            (q_ref, dq_ref), = simulate(logs, p, model="m1")
        d = out / case
        d.mkdir(parents=True, exist_ok=True)
        save_model(analytic_model(p), d / "model.json")
        export_targets(d / "model.json", {"mjlab": d / "mj.py"})
        np.savez(d / "log.npz", q_target=tr.data["position_target"], q_ref=q_ref, dq_ref=dq_ref, dt=DT)
        print(f"wrote {d}/model.json, mj.py, mj.json, log.npz ({len(q_ref)} samples at {DT} s)")
    _prepare_learned(out / LEARNED)


def _prepare_learned(d: Path) -> None:
    """A one-joint actuator_net (Isaac Lab / mjlab input layout; random initial weights: this checks
    the file round trip, not a fit) and a sine log that starts at rest on its target."""
    from synthetic import DT, TRUTH_M1, synthetic_set

    from actuatorlab.export.targets import export_targets
    from actuatorlab.learned.joint import log_set, rollout_logs
    from actuatorlab.learned.joint_train import build_joint_model, save_joint_model
    from actuatorlab.models.nets import arch_sizes
    from actuatorlab.precision import physics_precision
    from actuatorlab.sim.rollout import make_batches

    with physics_precision():
        logs = synthetic_set([("sine", "sine", 400)], TRUTH_M1, duration=2.0, quantise=False, amplitude=0.6)
        (b,) = make_batches(logs, DT)
        sizes = dict(width=32, depth=2, stride=1)
        m = build_joint_model("learned", "actuator_net", [b], history=4, sizes=sizes, seed=3)
        save_joint_model(d, m, arch="actuator_net", sizes=arch_sizes("actuator_net", **sizes), base=None,
                         setup={"joint_type": "revolute", "controller": "dynamixel_pwm"}, data={"dt": DT},
                         training={})
        ls = log_set(m, b)
        out = rollout_logs(m, ls)
    export_targets(d / "model.json", {"mjlab": d / "mj.py"})
    np.savez(d / "log.npz", q_target=np.asarray(ls.qt)[0], q_ref=np.asarray(out.q)[0],
             dq_ref=np.asarray(out.dq)[0], dt=DT)
    print(f"wrote {d}/model.json, mj.py, mj.json, mj.pt, log.npz")


#: the fitted-like model, and the same without joint friction (isolates the actuator law and delay)
CASES = {"full": {}, "no_joint_friction": {"friction_base": 0.0, "friction_viscous": 0.0}}
#: the learned case: an actuator_net exported as LearnedMlpActuatorCfg + TorchScript
LEARNED = "learned_actuator_net"

BENCH_XML = """
<mujoco>
  <worldbody>
    <body name="arm">
      <joint name="joint" type="hinge" axis="0 1 0"{solimp}/>
      <inertial pos="0 0 -{l}" mass="{m}" diaginertia="1e-9 1e-9 1e-9"/>
    </body>
  </worldbody>
</mujoco>
"""


def _cfg(name: str, fields: dict, folder: Path):
    import mjlab.actuator as A

    fields = {k: (tuple(v) if isinstance(v, list) else v) for k, v in fields.items()}
    if "network_file" in fields:
        fields["network_file"] = str(folder / fields["network_file"])
    if name == "BuiltinDcMotorActuatorCfg":
        (mp, kw), = fields["motor_params"].items()
        fields["motor_params"] = getattr(A, mp)(**kw)
        fields["mode"] = getattr(A.DcMotorInputMode, fields["mode"].split(".")[-1])
    return getattr(A, name)(**fields)


def _mjlab_replay(name: str, cfg: dict, folder: Path, q_target: np.ndarray, q0: float, dq0: float, h: float, substeps: int) -> np.ndarray:
    import mujoco
    import torch
    from mjlab.entity import Entity, EntityArticulationInfoCfg, EntityCfg
    from mjlab.sim.sim import MujocoCfg, Simulation, SimulationCfg

    act = _cfg(name, cfg, folder)
    # the bench of the fit: a point mass at LENGTH below the hinge (1e-9 kg.m^2 own inertia, MuJoCo
    # needs a positive one), the rotor inertia is the exported armature
    xml = BENCH_XML.format(l=LENGTH, m=MASS, solimp=f' solimpfriction="{SOLIMP}"' if SOLIMP else "")
    ent = Entity(EntityCfg(spec_fn=lambda: mujoco.MjSpec.from_string(xml),
                           articulation=EntityArticulationInfoCfg(actuators=(act,))))
    model = ent.compile()
    sim = Simulation(num_envs=1, cfg=SimulationCfg(mujoco=MujocoCfg(timestep=h, integrator="euler")),
                     model=model, device="cpu")
    ent.initialize(model, sim.model, sim.data, "cpu")
    ent.write_joint_state_to_sim(torch.tensor([[q0]]), torch.tensor([[dq0]]))
    zero = torch.zeros(1, 1)
    q = []
    for qt in q_target:
        q.append(float(ent.data.joint_pos[0, 0]))
        for _ in range(substeps):
            ent.set_joint_position_target(torch.tensor([[float(qt)]]))
            ent.set_joint_velocity_target(zero)
            ent.set_joint_effort_target(zero)
            ent.write_data_to_sim()
            sim.step()
            ent.update(h)
    return np.array(q)


def run(root: Path) -> None:
    for case in (*CASES, LEARNED):
        _run(root / case)


def _run(out: Path) -> None:
    doc = json.loads((out / "mj.json").read_text())
    meta = doc["metadata"]
    log = np.load(out / "log.npz")
    dt = float(meta["physics_dt_s"])
    res = {}
    for name, cfg in doc["configs"].items():
        t0 = time.perf_counter()
        q = _mjlab_replay(name, cfg, out, log["q_target"], float(log["q_ref"][0]), float(log["dq_ref"][0]), dt, 1)
        t1 = time.perf_counter()
        res[name] = q
        res[name + ":wrong"] = _mjlab_replay(name, cfg, out, log["q_target"], float(log["q_ref"][0]),
                                             float(log["dq_ref"][0]), dt / 2, 2)
        print(f"{out.name} {name}: {len(q)} steps in {t1 - t0:.1f} s (includes MuJoCo-Warp kernel compilation)")
    np.savez(out / ("mjlab.npz" if SOLIMP else "mjlab_default_solimp.npz"), **res)


def compare(root: Path) -> None:
    name = "mjlab_default_solimp.npz" if os.environ.get("MJLAB_CHECK_SOLIMP") == "default" else "mjlab.npz"
    rows = []
    for case in (*CASES, LEARNED):
        log, res = np.load(root / case / "log.npz"), np.load(root / case / name)
        for key in res.files:
            cfg, wrong = key.split(":")[0], key.endswith(":wrong")
            e = np.abs(res[key] - log["q_ref"])
            rows.append({"model": case, "config": cfg, "physics_step": "half (wrong rate)" if wrong else "declared",
                         "mae_rad": float(e.mean()), "max_rad": float(e.max()), "range_rad": float(np.ptp(log["q_ref"]))})
    print(f"{'model':<22} {'config':<26} {'physics step':<18} {'MAE [mrad]':>11} {'max [mrad]':>11}")
    for r in rows:
        print(f"{r['model']:<22} {r['config']:<26} {r['physics_step']:<18} {1e3 * r['mae_rad']:11.4f} "
              f"{1e3 * r['max_rad']:11.4f}")
    print(json.dumps({"bench": "mjlab_check", "rows": rows}))


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in ("prepare", "run", "compare"):
        sys.exit("usage: mjlab_check.py prepare|run|compare OUT")
    {"prepare": prepare, "run": run, "compare": compare}[sys.argv[1]](Path(sys.argv[2]))
