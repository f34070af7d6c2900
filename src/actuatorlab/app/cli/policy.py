"""Commands of the policy homotopy: train-policy, eval-policy."""


from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from ...policy.schedule import make_schedule
from ...policy import train as policy_train
from ._common import app, console, _progress, _json_command, _emit_json, _check_range, _check_resume, _key_values


@app.command("train-policy")
@_json_command
def train_policy_cmd(robot: str = typer.Option("anymal_c", "--robot", help="robot of the policy environment (toy: the toy tasks)"),
                     task: str = typer.Option("trot", "--task", help="task (anymal_c: trot; toy: point_mass | pendulum)"),
                     schedule: str = typer.Option("homotopy", "--schedule", help="homotopy | homotopy-adaptive | scratch | direct"),
                     steps: int = typer.Option(4_000_000, "--steps", help="environment steps (rounded up to whole chunks; 4 M: "
                                              "a trot policy that walks, 15-20 min on 2 cores)"),
                     envs: Optional[int] = typer.Option(None, "--envs", help="parallel environments (default per robot)"),
                     seed: int = typer.Option(0, "--seed"),
                     out: Path = typer.Option(Path("runs/policy"), "--out", "-o", help="run folder"),
                     resume: bool = typer.Option(False, "--resume", help="continue RUN/ckpt/latest.npz exactly"),
                     points: int = typer.Option(50, "--points", help="learning-curve points (chunks) in the run"),
                     env: Optional[List[str]] = typer.Option(None, "--env", help="environment option KEY=VALUE (JSON value), "
                                                             "e.g. --env physics_dt=0.004 --env actuator=\"sea\""),
                     ppo: Optional[List[str]] = typer.Option(None, "--ppo", help="PPO option KEY=VALUE (JSON value) over "
                                                             "the robot's defaults, e.g. --ppo lr_schedule=\"adaptive\""),
                     schedule_opt: Optional[List[str]] = typer.Option(None, "--schedule-opt", help="schedule option "
                                                                      "KEY=VALUE (JSON value), e.g. --schedule-opt pretrain=0.1 "
                                                                      "(docs/policy.md lists each schedule's)"),
                     as_json: bool = typer.Option(False, "--json", help="print the run summary as one JSON line")):
    """Train a policy with PPO under an alpha schedule of the model homotopy; write RUN/policy.npz,
    RUN/curve.json, RUN/stages.json, RUN/metrics.jsonl, RUN/report.html and checkpoints (docs/policy.md)."""

    _check_range("--steps", steps)
    _check_range("--envs", envs)
    _check_range("--points", points)
    _check_resume(out, resume)

    sched_opts = _key_values(schedule_opt, "--schedule-opt")
    make_schedule(schedule, **sched_opts)  # a bad name or option fails before the progress bar
    with _progress() as p:
        bar = p.add_task(f"{schedule}", total=1.0)

        def progress(frac, pt):
            r = "-" if pt["return"] is None else f"{pt['return']:.3g}"
            p.update(bar, completed=frac, description=f"{schedule} a={pt['alpha']:.2f} R={r}")

        d = policy_train.train_policy(robot, task, schedule, steps=steps, envs=envs, seed=seed, out=out, resume=resume,
                         points=points, progress=progress, env_options=_key_values(env, "--env"),
                         ppo=_key_values(ppo, "--ppo") or None, schedule_options=sched_opts or None)
    if as_json:
        _emit_json(d)
        return
    fr = "-" if d["final_return"] is None else f"{d['final_return']:.4g}"
    console.print(f"{d['env_steps']:,} env steps, {d['stages']} stage(s), final alpha {d['final_alpha']:.2f}, "
                  f"final return {fr} ({d['steps_per_s_this_call']:,.0f} env steps/s)")
    console.print(f"wrote {out / 'policy.npz'}, {out / 'curve.json'}, {out / 'stages.json'}, {out / 'report.html'}")


@app.command("eval-policy")
@_json_command
def eval_policy_cmd(run: Path = typer.Argument(..., help="train-policy run folder"),
                    actuator: Optional[str] = typer.Option(None, "--actuator", "--model", help="actuators of the "
                                                           "evaluation env, e.g. builtin (MuJoCo's own; default: the run's)"),
                    alpha: float = typer.Option(1.0, "--alpha", help="homotopy parameter of the evaluation model"),
                    envs: Optional[int] = typer.Option(None, "--envs", help="evaluation environments (with a velocity "
                                                       "command: a multiple of the fixed command set)"),
                    steps: Optional[int] = typer.Option(None, "--steps", help="steps per environment"),
                    seed: int = typer.Option(0, "--seed"),
                    as_json: bool = typer.Option(False, "--json", help="print one JSON object")):
    """Evaluate a trained policy deterministically: return and tracking RMSEs (docs/policy.md)."""

    _check_range("--envs", envs)
    _check_range("--steps", steps)

    d = policy_train.evaluate_policy(run, env_options=None if actuator is None else {"actuator": actuator}, alpha=alpha, n_envs=envs,
                        steps=steps, seed=seed)
    if as_json:
        _emit_json(d)
        return
    console.print(", ".join(f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}" for k, v in d.items()
                            if k not in ("commands", "per_command")))
    if d.get("per_command"):
        from rich.table import Table

        rmse = sorted({k for c in d["per_command"] for k in c if k.endswith("_rmse")})
        t = Table("command", "return", "steps", "fell", *rmse, title="per command")
        for c in d["per_command"]:
            t.add_row(", ".join(f"{x:+.2f}" for x in c["command"]), f"{c['return']:.3g}", f"{c['episode_length']:.0f}",
                      "yes" if c["fell"] > 0.5 else ("no" if c["fell"] == 0 else f"{c['fell']:.2f}"),
                      *[f"{c.get(k, float('nan')):.3f}" for k in rmse])
        console.print(t)

