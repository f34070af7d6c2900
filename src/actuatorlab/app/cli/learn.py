"""Commands that train learned actuators: train, train-heads, adapt."""


from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from .. import learn_jobs
from ..learn_jobs import AdaptJob, TrainHeadsJob, TrainJob
from ._common import Config, documents, job_of, app, console, _mrad

#: the commands this module registers on the CLI's typer app
__all__ = ["train", "train_heads_cmd", "adapt"]


@app.command()
@documents(TrainJob)
def train(ctx: typer.Context, data: Optional[List[Path]] = typer.Argument(None, help="log files or folders to train on"),
          arch: str = typer.Option("transformer", "--arch", help="transformer | mlp | gru | lstm | actuator_net | actuator_lstm "
                                  "(one joint: the Isaac Lab / mjlab actuator-net inputs, docs/export.md); "
                                  "residual:ARCH learns a correction of the --init model instead of the whole actuator"),
          init: Optional[Path] = typer.Option(None, "--init", help="fitted analytic RUN/model.json (RUN/arm_model.json with --robot): "
                                              "the teacher of the warm start (default: fit one first) and "
                                              "the base of a residual:ARCH"),
          steps: Optional[int] = typer.Option(None, "--steps", help="optimizer steps (default: the default budget)"),
          out: Path = typer.Option(Path("run"), "--out", "-o", help="run folder"),
          seed: int = typer.Option(0, "--seed"),
          resume: bool = typer.Option(False, "--resume", help="continue RUN/checkpoint.ckpt exactly"),
          robot: Optional[str] = typer.Option(None, "--robot", help="multi-joint logs of this robot: whole-robot "
                                              "training through MJX (writes RUN/arm_model.json)"),
          masks: Optional[Path] = typer.Option(None, "--masks", help="with --robot: folder of camera masks "
                                               "(cameras.json, NAME.npz) whose silhouettes join the loss; a joint "
                                               "logged without position/<joint> is learned from them (docs/visual.md)"),
          camera: Optional[Path] = typer.Option(None, "--camera", help="with --masks: camera_calibration.json of "
                                                "`actuatorlab calibrate-camera`"),
          image_weight: Optional[float] = typer.Option(None, "--image-weight", help="lambda [rad^2] of the image "
                                                       "term (default 1e-2)"),
          gate: str = typer.Option("groups", "--gate", help="one-joint residual: groups = scale the correction by "
                                   "the gate that earns its place on leave-one-group-out refits (one more "
                                   "training per group; docs/learned.md) | none = keep it whole"),
          budget: str = typer.Option("default", "--budget", help="with --robot: default (about 12 min on 2 CPU "
                                     "cores) | full (6000 steps of 32 windows; a GPU)"),
          time_limit: Optional[float] = typer.Option(None, "--time-limit", help="with --robot: [s] of training "
                                                     "through the simulator (compilation included); then stop, "
                                                     "validate and keep the best checkpoint"),
          config: Config = None):
    """Train a learned actuator (or a residual over a fitted analytic one) through the simulator;
    write RUN/model.json (RUN/arm_model.json with --robot), loadable by `actuatorlab evaluate`.
    The network first learns the --init model's effort on the logs' measured frames (warm start),
    then trains through the simulator (the one-joint scan; MJX with --robot)."""

    job = job_of(ctx, TrainJob, config, data="data", arch="arch", init="init", steps="steps", out="out",
                 seed="seed", resume="resume", robot="robot", masks="masks", camera="camera",
                 image_weight="image_weight", gate="gate", budget="budget", time_limit="time_limit")
    res = learn_jobs.run_train_job(job)
    d, out = res.record, job.out
    ws = (d.get("training") if res.robot is not None else d.get("fit", {})).get("warm_start") or {}
    if ws.get("teacher"):
        r2 = ws.get("r2")
        console.print(f"warm start: {ws['teacher']}" + (f"; distilled in {ws['steps']} steps, R^2 {r2:.3f}"
                                                        if r2 is not None else ""))
    if res.robot is not None:
        tr = d["training"]
        what = ("MAE {:.4g} rad" if tr.get("val_criterion", "position_mae") == "position_mae"
                else "position MSE + image term {:.4g} rad^2").format(tr["best_val_mae"])
        console.print(f"{d['kind']} {d['arch']} ({d['params_count']:,} parameters): best validation {what} "
                      f"at step {tr['best_step']} of {tr['steps']} ({tr['wall_s']:.0f} s, compile {tr['compile_s']:.0f} s)"
                      + ("; stopped by --time-limit before the budget's steps" if tr.get("stopped") == "time_limit" else ""))
        console.print(f"wrote {out / 'arm_model.json'}, {out / d['weights']}, {out / 'metrics.jsonl'}")
        return
    s, tr = d["_summary"], d["fit"]
    unit = s["unit"]
    console.print(f"{d['model']}: best validation MAE {_mrad(tr['validation_mae'], unit)} at step "
                  f"{tr['best_step']} of {tr['steps']} ({tr['wall_s']:.0f} s, "
                  f"{tr['s_per_1k_steps'] or float('nan'):.0f} s per 1,000 steps)")
    cg = tr.get("correction_gate")
    if cg is not None:
        rows = {g["gate"]: g for g in cg.get("gates", [])}
        console.print(f"correction gate {cg['gate']:g}" + (
            f" (held-out groups {', '.join(cg['groups'])}: base {rows[0.0]['mean']:.4g}, chosen {rows[cg['gate']]['mean']:.4g} "
            f"{'mrad' if unit == 'rad' else 'mm'}, mean over the groups)" if rows else f": {cg.get('note', '')}")
            + ("; the correction did not earn its place: the model replays as its base" if cg["gate"] == 0 else ""))
    console.print(f"replay of the given logs: MAE {_mrad(s['position_mae'], unit)}, "
                  f"RMSE {_mrad(s['position_rmse'], unit)}")
    console.print(f"wrote {out / 'model.json'}, {out / d['weights']}, {out / 'metrics.jsonl'}")


@app.command("train-heads")
@documents(TrainHeadsJob)
def train_heads_cmd(ctx: typer.Context,
                    data: Optional[List[Path]] = typer.Argument(None, help="labelled multi-joint logs or a synth folder (train/ val/)"),
                    robot: Optional[str] = typer.Option(None, "--robot", help="robot name"),
                    out: Path = typer.Option(Path("run_heads"), "--out", "-o", help="run folder"),
                    steps: Optional[int] = typer.Option(None, "--steps"), config: Config = None):
    """Train the force, contact-gate and condition heads on measured frames (teacher forcing, no
    simulator: minutes on a CPU); writes RUN/arm_model.json for `estimate-force` / `infer`. The
    model to start from, the seed and a resume are job fields (``init``, ``heads.seed``, ``resume``)."""

    job = job_of(ctx, TrainHeadsJob, config, data="data", robot="robot", out="out", **{"heads.steps": "steps"})
    d = learn_jobs.run_train_heads_job(job).record
    out = job.out
    t = d["training"]
    console.print(f"{d['arch']} ({d['params_count']:,} parameters): validation force MAE {t['best_val_force_mae']:.3f} N "
                  f"at step {t['best_step']} of {t['steps']} ({t['wall_s']:.0f} s); torque head {t['torque_head']}")
    console.print(f"wrote {out / 'arm_model.json'}")


@app.command()
@documents(AdaptJob)
def adapt(ctx: typer.Context, run: Optional[Path] = typer.Argument(None, help="run folder of `train` or `train --robot` "
                                                                   "(or its model file): the model to adapt, only read"),
          data: Optional[List[Path]] = typer.Argument(None, help="logs of the new unit or condition (at most 12 are used; "
                                                      "a synth dataset folder gives its train/ logs)"),
          out: Optional[Path] = typer.Option(None, "--out", "-o", help="new run folder (must not exist; never RUN)"),
          config: Config = None):
    """Adapt a trained learned or residual actuator to another unit (a robot) or to the same servo at
    another gain or load (one joint) from a few logs: a residual's analytic base is refitted, the
    network fine-tuned through the simulator (docs/learned_arm.md). Writes OUT atomically (its
    arm_model.json or model.json); a failed run leaves nothing."""

    job = job_of(ctx, AdaptJob, config, run="run", data="data", out="out")
    d = learn_jobs.run_adapt_job(job).record
    one_joint = "adaptation" not in d
    t = d["fit"] if one_joint else d["training"]
    a = t["adaptation"] if one_joint else d["adaptation"]
    refit = a.get("base_refit")
    if refit:
        console.print(f"base refitted ({refit['model'] or 'the config model'}, {refit['evaluations']} CMA-ES "
                      f"evaluations): train MAE {1e3 * refit['train_mae']:.1f} mrad"
                      + ("" if "kept" not in refit else " (kept)" if refit["kept"] else
                         f" (not kept: validation {1e3 * refit['validation_mae_after']:.1f} against "
                         f"{1e3 * refit['validation_mae_before']:.1f} mrad with the base as given)"))
    if t.get("steps"):
        console.print(f"fine-tuned {t['steps']} steps: validation MAE {1e3 * (t.get('init_val_mae') or float('nan')):.1f}"
                      f" -> {1e3 * t['best_val_mae']:.1f} mrad" + (f" ({t['kept']})" if t.get("kept") else ""))
    name = "model.json" if one_joint else "arm_model.json"
    console.print(f"{d['kind']} {d['arch']} adapted on {a['n_trajectories']} logs in {a['wall_s']:.0f} s "
                  f"(CPU {a['cpu_s']:.0f} s); wrote {job.out / name}")
