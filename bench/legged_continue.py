"""Legged transfer (issue 44): the matched ablation's policies trained longer, from their own checkpoints.

One command (from the repo root), after ``python bench/legged_transfer.py --section transfer --arms ARM --seeds S``
has trained the 4 M-step policies with the drive-rate fit::

    python bench/legged_continue.py --arms identified_fleet_replay identified_replay --seeds 0 1 2 [--steps 8000000] [--jobs 3]
    python bench/legged_continue.py --arms identified_fleet_replay --source cont8m --steps 12000000   # on from 8 M

Each run ``bench/out/legged/policies/ARM_sS`` (``ARM_drv_sS`` for the identified arms) is copied to
``..._contNm_sS`` (its checkpoint, curve and config; the config's budget raised to ``--steps`` with the same chunk
of updates, so the checkpoint's chunk index keeps its meaning), trained on from the last checkpoint
(:func:`actuatorlab.policy.train_policy`, resume: the same environment, PPO state and alpha schedule state), then
deployed on the truth of the reduced configuration's dataset (scale 0.3, seed 0) exactly as
:func:`legged_transfer._arm_row` deploys (``--deploy-steps`` per command, the deployment seed = the policy's seed).
This is "the 4 M-step policy plus more steps at the alpha it had reached" (alpha 1 on every run so far), not a
policy trained for ``--steps`` from scratch: the homotopy schedule's pretraining and deadline are fractions of the
budget, so a fresh run of another budget takes another path. The table gives, per arm, the 4 M-step figures next
to the continued ones (mean over seeds: velocity RMSE on the truth and in the training
environment, their ratio (the gap), falls), then one JSON line.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import legged_transfer as lt  # noqa: E402
from common import emit  # noqa: E402


#: the truth the policies are deployed on: the reduced configuration's dataset (scale 0.3, seed 0)
HARDWARE = lt.CACHE / "anymal_c_s0_x0.3"


def _name(arm: str) -> str:
    """The run name of ``arm``'s 4 M-step policies in bench/legged_transfer.py's cache (the identified arms of the
    drive-rate fit carry the tag ``drv`` for the replay fit's pick, ``msr`` for the drive-measured member)."""
    base = lt.REPLAY_ARMS.get(arm, arm)
    if base not in lt.DRIVE_TAGGED:
        return base
    return f"{base}_msr" if arm in lt.DEFAULT_ARMS else f"{base}_drv"


def _source(arm: str, seed: int, source: str) -> Path:
    """The run to continue: the 4 M-step policy (``source`` "") or an earlier continuation (``source`` "cont8m")."""
    return lt.CACHE / "policies" / "_".join(x for x in (_name(arm), source, f"s{seed}") if x)


def _continued(arm: str, seed: int, steps: int, source: str = "") -> Path:
    """The continued run's folder, made from the source run (checkpoint, curve, config with the new budget)."""
    from actuatorlab.policy.ppo import PPOConfig
    from actuatorlab.policy.train import plan_run

    src = _source(arm, seed, source)
    dst = lt.CACHE / "policies" / f"{_name(arm)}_cont{steps // 1_000_000}m_s{seed}"
    if dst.exists():
        return dst
    if not (src / "policy.json").is_file():
        raise SystemExit(f"{src}: no finished policy to continue (train it with bench/legged_transfer.py first)")
    cfg = json.loads((src / "config.json").read_text())
    pc = PPOConfig.from_dict(cfg["ppo"])
    chunk = int(cfg["updates_per_chunk"])
    plan = plan_run(steps, pc, max(1, round(steps / pc.steps_per_update / chunk)))
    if plan.chunk != chunk or plan.chunks <= cfg["chunks"]:
        raise SystemExit(f"{src}: {steps} steps do not extend its plan of {cfg['chunks']} chunks of {chunk} updates")
    tmp = dst.with_name(dst.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    shutil.copytree(src / "ckpt", tmp / "ckpt")
    shutil.copy(src / "metrics.jsonl", tmp / "metrics.jsonl")
    cfg.update(steps=steps, env_steps=plan.updates * pc.steps_per_update, updates=plan.updates, chunks=plan.chunks,
               continued_from=str(src))
    (tmp / "config.json").write_text(json.dumps(cfg, indent=1))
    tmp.rename(dst)
    return dst


def _row(arm: str, seed: int, steps: int, deploy_steps: int, source: str = "") -> dict[str, Any]:
    """Train the continued run to ``steps`` (resumed when interrupted), deploy it on the truth; one table cell."""
    import time

    from actuatorlab.policy.train import TrainConfig, train_policy

    run = _continued(arm, seed, steps, source)
    cfg = json.loads((run / "config.json").read_text())
    t0 = time.perf_counter()
    if not (run / "policy.json").is_file():
        train_policy(TrainConfig("anymal_c", "trot", "homotopy-adaptive", steps=steps, seed=seed, out=run, resume=True,
                                 env_options=cfg["env_options"], points=int(cfg["chunks"])))
    return lt.deployed(run, seed, HARDWARE, deploy_steps, time.perf_counter() - t0)


def _before(arm: str, seed: int, source: str = "") -> dict[str, Any]:
    """The source policy's deployment figures (written by bench/legged_transfer.py or an earlier run of this one)."""
    run = _source(arm, seed, source)
    doc = json.loads((run / f"deploy_{HARDWARE.name}" / "deploy.json").read_text())
    return {"seed": seed, "hardware": doc["hardware_figures"], "training_env": doc["training_env"]}


def _mean(rows: list[dict[str, Any]]) -> dict[str, float]:
    v = float(np.mean([r["hardware"]["vel_rmse"] for r in rows]))
    e = float(np.mean([r["training_env"]["vel_rmse"] for r in rows]))
    return {"vel_rmse": v, "train_env_vel_rmse": e, "gap_vel": v / e,
            "fell": float(np.mean([r["hardware"]["fell"] for r in rows])),
            "per_seed_vel": [round(r["hardware"]["vel_rmse"], 3) for r in rows]}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--arms", nargs="+", default=["identified_fleet_replay"], choices=sorted(lt.ARMS))
    ap.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    ap.add_argument("--steps", type=int, default=8_000_000)
    ap.add_argument("--deploy-steps", type=int, default=500)
    ap.add_argument("--jobs", type=int, default=lt.JOBS)
    ap.add_argument("--source", default="", help="continue these runs instead of the 4 M-step ones (e.g. cont8m)")
    ap.add_argument("--out", type=Path, default=None)
    a = ap.parse_args(argv)
    cells = [(arm, s) for arm in a.arms for s in a.seeds]
    with ProcessPoolExecutor(max_workers=max(1, a.jobs)) as pool:
        futures = {c: pool.submit(_row, c[0], c[1], a.steps, a.deploy_steps, a.source) for c in cells}
        rows = {c: f.result() for c, f in futures.items()}
    table = {}
    print(f"{'arm':<26}{'steps':>6}{'train-env vel':>14}{'truth vel':>11}{'gap':>7}{'falls':>7}  per seed")
    for arm in a.arms:
        before = _mean([_before(arm, s, a.source) for s in a.seeds])
        src_steps = json.loads((_source(arm, a.seeds[0], a.source) / "config.json").read_text())["steps"]
        after = _mean([rows[(arm, s)] for s in a.seeds])
        table[arm] = {"before": before, "after": after}
        for label, m in ((f"{src_steps // 1_000_000}M", before), (f"{a.steps // 1_000_000}M", after)):
            print(f"{arm:<26}{label:>6}{m['train_env_vel_rmse']:14.3f}{m['vel_rmse']:11.3f}{m['gap_vel']:7.2f}"
                  f"{m['fell']:7.0%}  {m['per_seed_vel']}")
    summary = {"bench": "legged_continue", "source": a.source or "4M", "steps": a.steps, "seeds": a.seeds, "deploy_steps": a.deploy_steps,
               "table": table, "runs": {f"{arm}_s{s}": r for (arm, s), r in rows.items()}}
    emit(summary, a.out)
    return summary


if __name__ == "__main__":
    main()
