"""Commands of the policy homotopy: train-policy, eval-policy."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
from rich.table import Table

from .. import policy_jobs
from ..policy_jobs import EvalPolicyJob, TrainPolicyJob
from ._common import Config, app, console, documents, job_of, _emit_json, _json_command, _progress

#: the commands this module registers on the CLI's typer app
__all__ = ["train_policy_cmd", "eval_policy_cmd"]


@app.command("train-policy")
@_json_command
@documents(TrainPolicyJob)
def train_policy_cmd(ctx: typer.Context,
                     robot: str = typer.Option("anymal_c", "--robot", help="robot of the policy environment (toy: the toy tasks)"),
                     task: str = typer.Option("trot", "--task", help="task (anymal_c: trot; toy: point_mass | pendulum)"),
                     schedule: str = typer.Option("homotopy", "--schedule", help="homotopy | homotopy-adaptive | scratch | direct"),
                     steps: int = typer.Option(4_000_000, "--steps", help="environment steps (rounded up to whole chunks; 4 M: "
                                              "a trot policy that walks, 15-20 min on 2 cores)"),
                     envs: Optional[int] = typer.Option(None, "--envs", help="parallel environments (default per robot)"),
                     seed: int = typer.Option(0, "--seed"),
                     out: Path = typer.Option(Path("runs/policy"), "--out", "-o", help="run folder"),
                     resume: bool = typer.Option(False, "--resume", help="continue RUN/ckpt/latest.npz exactly"),
                     as_json: bool = typer.Option(False, "--json", help="print the run summary as one JSON line"),
                     config: Config = None):
    """Train a policy with PPO under an alpha schedule of the model homotopy; write RUN/policy.npz,
    RUN/curve.json, RUN/stages.json, RUN/metrics.jsonl, RUN/report.html and checkpoints (docs/policy.md)."""

    job = job_of(ctx, TrainPolicyJob, config, robot="robot", task="task", schedule="schedule", steps="steps", envs="envs",
                 seed="seed", out="out", resume="resume")
    policy_jobs.check_train_policy(job)  # before the progress bar
    out, schedule = job.out, job.schedule
    with _progress() as p:
        bar = p.add_task(f"{schedule}", total=1.0)

        def progress(frac, pt):
            r = "-" if pt["return"] is None else f"{pt['return']:.3g}"
            p.update(bar, completed=frac, description=f"{schedule} a={pt['alpha']:.2f} R={r}")

        d = policy_jobs.run_train_policy_job(job, progress=progress).to_json()
    if as_json:
        _emit_json(d)
        return
    fr = "-" if d["final_return"] is None else f"{d['final_return']:.4g}"
    console.print(f"{d['env_steps']:,} env steps, {d['stages']} stage(s), final alpha {d['final_alpha']:.2f}, "
                  f"final return {fr} ({d['steps_per_s_this_call']:,.0f} env steps/s)")
    console.print(f"wrote {out / 'policy.npz'}, {out / 'curve.json'}, {out / 'stages.json'}, {out / 'report.html'}")


@app.command("eval-policy")
@_json_command
@documents(EvalPolicyJob)
def eval_policy_cmd(ctx: typer.Context, run: Optional[Path] = typer.Argument(None, help="train-policy run folder"),
                    actuator: Optional[str] = typer.Option(None, "--actuator", "--model", help="actuators of the "
                                                           "evaluation env, e.g. builtin (MuJoCo's own; default: the run's)"),
                    envs: Optional[int] = typer.Option(None, "--envs", help="evaluation environments (with a velocity "
                                                       "command: a multiple of the fixed command set)"),
                    steps: Optional[int] = typer.Option(None, "--steps", help="steps per environment"),
                    seed: int = typer.Option(0, "--seed"),
                    hardware: Optional[Path] = typer.Option(None, "--hardware", help="deploy on virtual hardware "
                                                            "instead: a legged dataset folder (its drives' truth) "
                                                            "or a hardware file (docs/deploy.md); writes RUN/deploy"),
                    impl: str = typer.Option("jax", "--impl", help="MJX implementation of the evaluation env: jax, or "
                                             "warp (MuJoCo Warp, the warp extra; docs/envs.md)"),
                    as_json: bool = typer.Option(False, "--json", help="print one JSON object"), config: Config = None):
    """Evaluate a trained policy deterministically: return and tracking RMSEs (docs/policy.md); with
    --hardware, on the virtual hardware's truth actuators, next to its training environment (docs/deploy.md)."""

    job = job_of(ctx, EvalPolicyJob, config, run="run", actuator="actuator", envs="envs", steps="steps", seed="seed",
                 hardware="hardware", impl="impl")
    d = policy_jobs.run_eval_policy_job(job).to_json()
    if as_json:
        _emit_json(d)
        return
    if job.hardware is not None:
        _print_deploy(d)
        return
    console.print(", ".join(f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}" for k, v in d.items()
                            if k not in ("commands", "per_command")))
    if d.get("per_command"):
        rmse = sorted({k for c in d["per_command"] for k in c if k.endswith("_rmse")})
        t = Table("command", "return", "steps", "fell", *rmse, title="per command")
        for c in d["per_command"]:
            t.add_row(", ".join(f"{x:+.2f}" for x in c["command"]), f"{c['return']:.3g}", f"{c['episode_length']:.0f}",
                      "yes" if c["fell"] > 0.5 else ("no" if c["fell"] == 0 else f"{c['fell']:.2f}"),
                      *[f"{c.get(k, float('nan')):.3f}" for k in rmse])
        console.print(t)


def _print_deploy(d: dict) -> None:
    t = Table("command", "steps", "fell", "vel RMSE [m/s]", "yaw RMSE [rad/s]", "torque RMS [N.m]", "power [W] mech / elec",
              title=f"on hardware {d['hardware']}")
    for e in d["episodes"]:
        t.add_row(", ".join(f"{x:+.2f}" for x in e["command"]), str(e["steps_run"]), "yes" if e["fell"] else "no",
                  f"{e['vel_rmse']:.3f}", f"{e['yaw_rmse']:.3f}", f"{e['torque_rms']:.1f}",
                  f"{e['mech_power']:.0f} / {e['elec_power']:.0f}")
    console.print(t)
    h, tr, gap = d["hardware_figures"], d.get("training_env"), d.get("gap") or {}
    line = f"hardware: vel {h['vel_rmse']:.3f} m/s, yaw {h['yaw_rmse']:.3f} rad/s, falls {h['fell']:.0%}"
    if tr:
        line += (f"; training env: vel {tr['vel_rmse']:.3f}, yaw {tr['yaw_rmse']:.3f}, falls {tr['fell']:.0%}; gap "
                 f"{gap.get('vel_rmse') or float('nan'):.2f}x / {gap.get('yaw_rmse') or float('nan'):.2f}x")
    console.print(line)
