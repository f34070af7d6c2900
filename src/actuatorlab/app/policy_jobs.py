"""Typed jobs of the policy commands: train-policy, eval-policy (see :mod:`.identify_jobs`)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Callable

from ..policy import deploy
from ..policy import train as policy_train
from ..policy.schedule import make_schedule
from ..errors import ActuatorlabError, UnknownNameError
from ..sim.arm import IMPLS
from .identify_jobs import Result, check_range
from .learn_jobs import check_resume


@dataclasses.dataclass(frozen=True)
class TrainPolicyJob:
    """Fields: robot (of the policy environment, "anymal_c"; toy: the toy tasks), task (anymal_c:
    trot; toy: point_mass | pendulum), schedule (homotopy | homotopy-adaptive | scratch | direct),
    steps (environment steps, rounded up to whole chunks; 4 M: a trot policy that walks), envs
    (parallel environments; null: per robot), seed, out (run folder, "runs/policy"), resume
    (continue RUN/ckpt/latest.npz exactly), points (learning-curve points, 50), env_options
    ({key: value} environment options, e.g. {"physics_dt": 0.004}), ppo ({key: value} PPO options
    over the robot's defaults), schedule_options ({key: value}, docs/policy.md lists each
    schedule's)."""

    robot: str = "anymal_c"
    task: str = "trot"
    schedule: str = "homotopy"
    steps: int = 4_000_000
    envs: int | None = None
    seed: int = 0
    out: Path = Path("runs/policy")
    resume: bool = False
    points: int = 50
    env_options: dict = dataclasses.field(default_factory=dict)
    ppo: dict = dataclasses.field(default_factory=dict)
    schedule_options: dict = dataclasses.field(default_factory=dict)


def check_train_policy(job: TrainPolicyJob) -> None:
    """Refuse bad numbers, a missing run to resume and a bad schedule before any work."""
    check_range("--steps", job.steps)
    check_range("--envs", job.envs)
    check_range("points", job.points)
    check_resume(job.out, job.resume)
    make_schedule(job.schedule, **job.schedule_options)  # a bad name or option fails before the progress bar


def run_train_policy_job(job: TrainPolicyJob, progress: Callable | None = None) -> Result:
    """Train a policy under the alpha schedule (:func:`actuatorlab.policy.train.train_policy`)."""
    check_train_policy(job)
    return Result(policy_train.train_policy(job.robot, job.task, job.schedule, steps=job.steps, envs=job.envs,
                                            seed=job.seed, out=job.out, resume=job.resume, points=job.points,
                                            progress=progress, env_options=dict(job.env_options),
                                            ppo=dict(job.ppo) or None,
                                            schedule_options=dict(job.schedule_options) or None))


@dataclasses.dataclass(frozen=True)
class EvalPolicyJob:
    """Fields: run (train-policy run folder), actuator (actuators of the evaluation env, e.g.
    builtin; null: the run's), alpha (homotopy parameter of the evaluation model, 1), envs
    (evaluation environments), steps (per environment), seed; hardware (null, or a legged dataset
    folder / hardware file: deploy the policy on the virtual hardware's truth instead,
    :func:`actuatorlab.policy.deploy.deploy_policy`, one episode per fixed command), out (with
    hardware: the folder for deploy.json and episodes.npz; null: RUN/deploy), impl (MJX's
    implementation of the evaluation env's physics: "jax", or "warp" = MuJoCo Warp, the ``warp``
    extra; the same environment on another simulator)."""

    run: Path
    actuator: str | None = None
    alpha: float = 1.0
    envs: int | None = None
    steps: int | None = None
    seed: int = 0
    hardware: Path | None = None
    out: Path | None = None
    impl: str = "jax"


def run_eval_policy_job(job: EvalPolicyJob) -> Result:
    """Evaluate the run's policy deterministically (:func:`actuatorlab.policy.train.evaluate_policy`)."""
    check_range("--envs", job.envs)
    check_range("--steps", job.steps)
    if job.impl not in IMPLS:
        raise UnknownNameError("--impl (MJX implementation)", job.impl, IMPLS)
    if job.impl != "jax" and (job.hardware is not None or policy_train.load_policy(job.run).config["robot"] == "toy"):
        raise ActuatorlabError(f"--impl {job.impl}: only for an evaluation env with MuJoCo physics, not "
                               f"{'with --hardware (its own simulator)' if job.hardware is not None else 'a toy env'}")
    if job.hardware is not None:
        for name, v in (("--actuator", job.actuator), ("--envs", job.envs)):
            if v is not None:
                raise ActuatorlabError(f"{name} with --hardware: the hardware has its own actuators and runs one episode "
                                  "per command")
        if job.alpha != 1.0:
            raise ActuatorlabError("alpha with --hardware: the hardware is the full robot (alpha 1)")
        return Result(deploy.deploy_policy(job.run, job.hardware, job.out if job.out is not None else
                                           Path(job.run) / "deploy", deploy.DeployConfig(steps=job.steps or 500,
                                                                                         seed=job.seed)))
    options = ({} if job.actuator is None else {"actuator": job.actuator}) | ({} if job.impl == "jax" else {"impl": job.impl})
    return Result(policy_train.evaluate_policy(job.run, env_options=options or None, alpha=job.alpha, n_envs=job.envs,
                                               steps=job.steps, seed=job.seed))
