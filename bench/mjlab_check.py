"""Run an exported mjlab actuator configuration in mjlab itself and compare it with actuatorlab.

mjlab (1.6) pins mujoco ~= 3.11 and actuatorlab needs mujoco >= 4, so the two cannot share an
environment (docs/export.md). This script has three steps, the middle one in a separate virtual
environment that has mjlab (``python -m venv V && V/bin/pip install mjlab torch==2.13.0``)::

    PYTHONPATH=src python bench/mjlab_check.py prepare OUT      # actuatorlab: model, export, log
    V/bin/python bench/mjlab_check.py run OUT                   # mjlab: replay the log on CPU
    PYTHONPATH=src python bench/mjlab_check.py compare OUT      # table, then one JSON line

``prepare`` writes a fitted-like XL330 model (tests/synthetic truth with a current limit and a
2-step delay), its mjlab export (``mj.py`` / ``mj.json``), a chirp log at 200 Hz and actuatorlab's
own rollout of it. ``run`` builds the pendulum bench of the model as an mjlab ``Entity`` with the
exported ``DcMotorActuatorCfg`` and replays the log's targets at the declared physics step (one
``write_data_to_sim`` + ``sim.step`` per log sample, MuJoCo-Warp on the CPU), then the same at
half the step (the wrong rate). ``compare`` prints the position MAE / max error against
actuatorlab's rollout. The analytic law is exact (tests/test_export_targets.py); differences come
from MuJoCo's joint friction (``frictionloss`` is a soft constraint, ``damping`` is integrated
implicitly) and the integrator.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np

MASS, LENGTH, G = 0.49, 0.1, 9.81


def prepare(out: Path) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from synthetic import DT, simulate, synthetic_set
    from test_export_targets import TRUTH, analytic_model

    from actuatorlab.export.targets import export_targets
    from actuatorlab.identify.modelfile import save_model
    from actuatorlab.precision import physics_precision

    out.mkdir(parents=True, exist_ok=True)
    with physics_precision():
        logs = synthetic_set([("chirp", "chirp", 400)], TRUTH, duration=2.0, quantise=False, amplitude=0.8)
        (q_ref, dq_ref), = simulate(logs, TRUTH, model="m1")
    save_model(analytic_model(TRUTH), out / "model.json")
    export_targets(out / "model.json", {"mjlab": out / "mj.py"})
    tr = logs[0]
    np.savez(out / "log.npz", q_target=tr.data["position_target"], q_ref=q_ref, dq_ref=dq_ref, dt=DT)
    print(f"wrote {out}/model.json, mj.py, mj.json, log.npz ({len(q_ref)} samples at {DT} s)")


BENCH_XML = """
<mujoco>
  <worldbody>
    <body name="arm">
      <joint name="joint" type="hinge" axis="0 1 0"/>
      <inertial pos="0 0 -{l}" mass="{m}" diaginertia="1e-9 1e-9 1e-9"/>
    </body>
  </worldbody>
</mujoco>
"""


def _mjlab_replay(cfg: dict, q_target: np.ndarray, q0: float, dq0: float, h: float, substeps: int) -> np.ndarray:
    import mujoco
    import torch
    from mjlab.actuator import DcMotorActuatorCfg
    from mjlab.entity import Entity, EntityArticulationInfoCfg, EntityCfg
    from mjlab.sim.sim import MujocoCfg, Simulation, SimulationCfg

    fields = {k: (tuple(v) if isinstance(v, list) else v) for k, v in cfg.items()}
    act = DcMotorActuatorCfg(**fields)
    # the bench of the fit: a point mass at LENGTH below the hinge (1e-9 kg.m^2 own inertia, MuJoCo
    # needs a positive one), the rotor inertia is the exported armature
    xml = BENCH_XML.format(l=LENGTH, m=MASS)
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


def run(out: Path) -> None:
    doc = json.loads((out / "mj.json").read_text())
    cfg, meta = doc["configs"]["DcMotorActuatorCfg"], doc["metadata"]
    log = np.load(out / "log.npz")
    dt = float(meta["physics_dt_s"])
    t0 = time.perf_counter()
    q = _mjlab_replay(cfg, log["q_target"], float(log["q_ref"][0]), float(log["dq_ref"][0]), dt, 1)
    t1 = time.perf_counter()
    q_wrong = _mjlab_replay(cfg, log["q_target"], float(log["q_ref"][0]), float(log["dq_ref"][0]), dt / 2, 2)
    import mjlab
    np.savez(out / "mjlab.npz", q=q, q_wrong=q_wrong, wall_s=t1 - t0,
             mjlab_version=getattr(mjlab, "__version__", "?"))
    print(f"mjlab replay: {len(q)} steps in {t1 - t0:.1f} s (includes MuJoCo-Warp kernel compilation)")


def compare(out: Path) -> None:
    log, res = np.load(out / "log.npz"), np.load(out / "mjlab.npz")
    rows = []
    for name, q in (("declared step", res["q"]), ("half step (wrong rate)", res["q_wrong"])):
        e = np.abs(q - log["q_ref"])
        rows.append({"case": name, "mae_rad": float(e.mean()), "max_rad": float(e.max())})
    print(f"{'case':<24} {'MAE [mrad]':>11} {'max [mrad]':>11}")
    for r in rows:
        print(f"{r['case']:<24} {1e3 * r['mae_rad']:11.3f} {1e3 * r['max_rad']:11.3f}")
    print(json.dumps({"bench": "mjlab_check", "rows": rows, "range_rad": float(np.ptp(log["q_ref"]))}))


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in ("prepare", "run", "compare"):
        sys.exit("usage: mjlab_check.py prepare|run|compare OUT")
    {"prepare": prepare, "run": run, "compare": compare}[sys.argv[1]](Path(sys.argv[2]))
