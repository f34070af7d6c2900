"""Commands that train learned actuators: train, train-heads."""


from __future__ import annotations

import json
from pathlib import Path
from typing import List, Optional

import typer

from ...errors import ActuatorlabError
from .. import jobs
from ...learned.arm import ArmTrainConfig, load_arm_model
from ...learned.heads import HeadsConfig, train_heads
from ._common import app, console, _check_range, _check_resume, _mrad, _robot_of_model


@app.command()
def train(data: List[Path] = typer.Argument(..., help="log files or folders to train on"),
          arch: str = typer.Option("transformer", "--arch", help="transformer | mlp | gru | lstm | actuator_net | actuator_lstm "
                                  "(one joint: the Isaac Lab / mjlab actuator-net inputs, docs/export.md)"),
          residual: Optional[Path] = typer.Option(None, "--residual", help="fitted analytic RUN/model.json (RUN/arm_model.json with --robot): learn "
                                                  "a correction of it instead of the whole actuator"),
          steps: Optional[int] = typer.Option(None, "--steps", help="optimizer steps (default: the default budget)"),
          out: Path = typer.Option(Path("run"), "--out", "-o", help="run folder"),
          seed: int = typer.Option(0, "--seed"),
          resume: bool = typer.Option(False, "--resume", help="continue RUN/checkpoint.ckpt exactly"),
          validation: str = typer.Option("time", "--validation", help="one joint: time (last 25 % of every log) | "
                                         "logs (whole logs held back)"),
          robot: Optional[str] = typer.Option(None, "--robot", help="multi-joint logs of this robot: whole-robot "
                                              "training through MJX (writes RUN/arm_model.json)")):
    """Train a learned actuator (or a residual over a fitted analytic one) through the simulator;
    write RUN/model.json (RUN/arm_model.json with --robot), loadable by `actuatorlab evaluate`."""

    _check_range("--steps", steps)
    _check_resume(out, resume)
    if residual is not None:
        robot = _robot_of_model(residual, robot)
    if robot is not None:
        d = jobs.run_train_arm(robot, data, out, ArmTrainConfig(arch=arch, residual=residual, steps=steps, seed=seed),
                                   resume=resume)
        tr = d["training"]
        console.print(f"{d['kind']} {d['arch']} ({d['params_count']:,} parameters): best validation MAE "
                      f"{tr['best_val_mae']:.4g} rad at step {tr['best_step']} of {tr['steps']} "
                      f"({tr['wall_s']:.0f} s, compile {tr['compile_s']:.0f} s)")
        console.print(f"wrote {out / 'arm_model.json'}, {out / d['weights']}, {out / 'metrics.jsonl'}")
        return
    d = jobs.run_train(data, out, jobs.JointTrainOptions(arch=arch, residual=residual, steps=steps, seed=seed,
                                                                validation=validation), resume=resume)
    s, tr = d["_summary"], d["fit"]
    unit = s["unit"]
    console.print(f"{d['model']}: best validation MAE {_mrad(tr['validation_mae'], unit)} at step "
                  f"{tr['best_step']} of {tr['steps']} ({tr['wall_s']:.0f} s, "
                  f"{tr['s_per_1k_steps'] or float('nan'):.0f} s per 1,000 steps)")
    console.print(f"replay of the given logs: MAE {_mrad(s['position_mae'], unit)}, "
                  f"RMSE {_mrad(s['position_rmse'], unit)}")
    console.print(f"wrote {out / 'model.json'}, {out / d['weights']}, {out / 'metrics.jsonl'}")


@app.command("train-heads")
def train_heads_cmd(data: List[Path] = typer.Argument(..., help="labelled multi-joint logs or a synth folder (train/ val/)"),
                    robot: str = typer.Option(..., "--robot", help="robot name"),
                    out: Path = typer.Option(Path("run_heads"), "--out", "-o", help="run folder"),
                    init: Optional[Path] = typer.Option(None, "--init", help="RUN/arm_model.json to start from (only "
                                                        "its force/gate/condition heads are trained)"),
                    arch: str = typer.Option("transformer", "--arch", help="transformer | mlp | gru | lstm (without --init)"),
                    sizes: Optional[str] = typer.Option(None, "--sizes", help='network sizes as JSON, e.g. \'{"d": 64}\''),
                    steps: Optional[int] = typer.Option(None, "--steps"), seed: int = typer.Option(0, "--seed"),
                    eval_every: Optional[int] = typer.Option(None, "--eval-every", help="validate (and checkpoint) "
                                                             "every N steps, the best kept (default 250; with few "
                                                             "logs the optimum comes early: bench/README.md)"),
                    augment_yaw: bool = typer.Option(False, "--augment-yaw", help="rotate every training sample "
                                                     "about the robot's vertical first joint by a random angle (the "
                                                     "force label with it): the dynamics do not depend on that angle"),
                    augment_mirror: bool = typer.Option(False, "--augment-mirror", help="reflect half of the training "
                                                        "samples in the arm's vertical mirror plane (yaw joint and the "
                                                        "force's normal component negated); refused for an arm that is "
                                                        "not mirror-symmetric"),
                    residual_input: Optional[str] = typer.Option(None, "--residual-input", help="id_linear | "
                                                                 "id_friction | momentum_observer: one more input per "
                                                                 "joint, this classical method's estimated external "
                                                                 "joint torque (calibrated on the free-motion training "
                                                                 "logs; from scratch only)"),
                    resume: bool = typer.Option(False, "--resume")):
    """Train the force, contact-gate and condition heads on measured frames (teacher forcing, no
    simulator: minutes on a CPU); writes RUN/arm_model.json for `estimate-force` / `infer`."""

    _check_range("--steps", steps)
    _check_range("--eval-every", eval_every)
    _check_resume(out, resume)

    try:
        sz = json.loads(sizes) if sizes else None
    except json.JSONDecodeError:
        raise ActuatorlabError(f"--sizes must be a JSON object, got {sizes!r}") from None
    tr, va = jobs.split_arm_data(data)
    m = load_arm_model(init, robot)[1] if init is not None else None
    cfg = HeadsConfig(arch=arch, sizes=sz, seed=seed, augment_yaw=augment_yaw, augment_mirror=augment_mirror,
                      residual_input=residual_input, **({"steps": steps} if steps is not None else {}),
                      **({"eval_every": eval_every} if eval_every else {}))
    d = train_heads(robot, tr, va, cfg, out=out, init=m, resume=resume)
    t = d["training"]
    console.print(f"{d['arch']} ({d['params_count']:,} parameters): validation force MAE {t['best_val_force_mae']:.3f} N "
                  f"at step {t['best_step']} of {t['steps']} ({t['wall_s']:.0f} s); torque head {t['torque_head']}")
    console.print(f"wrote {out / 'arm_model.json'}")

