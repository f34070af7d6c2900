"""BAM peer: fit BAM's friction models m1..m6 on the training logs, score held-out.

Runs inside the bench's BAM virtual environment (``bench/.venv-bam``, Python
3.12, ``better-actuator-models==1.0.2``; create it with
``python bench/peers/setup_venvs.py bam``).  It calls the installed package
only; no BAM code is copied here.

What it does, per model name (``m1`` .. ``m6``, BAM's ``bam.model.models``):

* **Fit** - the same objective as BAM's own entry point ``python -m bam.fit
  --actuator xl330 --model mX --method cmaes``: the training logs are loaded
  with ``bam.logs.Logs`` and merged with ``Logs.make_batch()`` (which cuts
  them to the shortest length, 1200 samples); every optimizable
  ``bam.parameter.Parameter`` of the model (motor ``kt``, ``R``, ``armature``,
  ``q_offset`` and the friction terms) is suggested by optuna inside its
  ``[min, max]``; the loss is the mean absolute position error of
  ``bam.simulate.Simulator.rollout_log(batch, simulate_control=True)``, i.e. an
  open-loop rollout from the first logged state with BAM's firmware law
  (``duty = clip(kp * error_gain * (q_target - q), -1, 1)``, ``V = vin *
  duty``) recomputed from the *simulated* position.  ``bam.fit`` cannot be
  seeded and parses its arguments at import, so this driver builds the same
  objective from BAM's public classes and passes ``seed`` to optuna's
  ``CmaEsSampler(restart_strategy="bipop")``, which is what ``bam.fit``
  constructs (optuna >= 4.4 ignores ``restart_strategy``, with a warning, for
  ``bam.fit`` too).
* **Evaluate** - the best parameters are turned into a model with
  ``bam.model.load_model_from_dict`` (the format of BAM's params files) and
  every log is rolled out *on its own* and at full length with the same
  simulator, as BAM's ``mae.py`` does.  ``train_mae`` / ``heldout_mae`` are
  the means over logs of the per-log MAE [rad].

Output: one JSON line per model on stdout::

    {"peer": "bam", "model": "m6", "trials": 500, "seed": 0,
     "fit_wall_s": ..., "train_objective": ..., "train_mae": ...,
     "heldout_mae": ..., "per_log": {...}, "params": {...}}

Progress goes to stderr.  ``--bundled`` also scores BAM's shipped XL330
parameter files (``bam/params/xl330/mX.json``); those were identified by the
BAM authors on their own logs, which may include the held-out ones, so they
are a reference and not a clean held-out result.

Usage::

    bench/.venv-bam/bin/python bench/peers/bam_peer.py \
        --train a.json b.json --test c.json --models m1 m6 --trials 500 --seed 0
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
import warnings
from pathlib import Path

os.environ.setdefault("WANDB_MODE", "disabled")

import numpy as np  # noqa: E402
import optuna  # noqa: E402
from bam import simulate  # noqa: E402
from bam.actuators import actuators  # noqa: E402
from bam.logs import Logs  # noqa: E402
from bam.model import Model, load_model, load_model_from_dict, models  # noqa: E402

ACTUATOR = "xl330"  # key in bam.actuators.actuators: XL330Actuator (PWM / voltage mode)


def load_logs(paths: list[Path]) -> Logs:
    """Load ``paths`` with BAM's own loader (it globs a folder, so link them into one)."""
    tmp = Path(tempfile.mkdtemp(prefix="bam_peer_"))
    try:
        for p in paths:
            p = Path(p).resolve()
            if not p.is_file():
                raise FileNotFoundError(f"{p}: log file not found")
            (tmp / p.name).symlink_to(p)
        logs = Logs(str(tmp))
    finally:
        shutil.rmtree(tmp)
    # deterministic order (glob order is not); the filename is informational only
    order = np.argsort([Path(f).name for f in logs.json_files])
    logs.json_files = [Path(logs.json_files[i]).name for i in order]
    logs.logs = [logs.logs[i] for i in order]
    for log, name in zip(logs.logs, logs.json_files):
        log["filename"] = name
        if log.get("dt") is None:
            raise ValueError(f"{name}: no 'dt' key; BAM needs processed logs (bam.process)")
    return logs


def new_model(name: str) -> Model:
    """A fresh BAM model ``name`` on the XL330 actuator, at its default parameter values."""
    if name not in models:
        raise KeyError(f"unknown BAM model {name!r}; available: {sorted(models)}")
    model = models[name]()
    model.set_actuator(actuators[ACTUATOR]())
    return model


def rollout_mae(model: Model, log: dict) -> float:
    """Mean |q_sim - q_log| [rad] of BAM's open-loop rollout with the simulated firmware law."""
    positions, _, _ = simulate.Simulator(model).rollout_log(log, simulate_control=True)
    log_positions = np.array([e["position"] for e in log["entries"]])
    return float(np.mean(np.abs(np.array(positions) - log_positions)))


def params_dict(model_name: str, values: dict[str, float]) -> dict:
    """Full BAM params-file dict: optimized values, defaults for the rest, model and actuator."""
    model = new_model(model_name)
    out = {k: float(p.value) for k, p in model.get_parameters().items()}
    out.update({k: float(v) for k, v in values.items()})
    out["model"] = model_name
    out["actuator"] = ACTUATOR
    return out


def fit(model_name: str, train: Logs, trials: int, seed: int) -> tuple[dict, float, float, float]:
    """Fit ``model_name`` with optuna CMA-ES; return (params dict, best objective, wall s, CPU s)."""
    batch = train.make_batch()

    def objective(trial: optuna.Trial) -> float:
        model = new_model(model_name)
        for name, p in model.get_parameters().items():
            if p.optimize:
                p.value = trial.suggest_float(name, p.min, p.max)
        return rollout_mae(model, batch)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # restart_strategy deprecation (see module doc)
        sampler = optuna.samplers.CmaEsSampler(restart_strategy="bipop", seed=seed)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(sampler=sampler)
    t0, c0 = time.perf_counter(), time.process_time()
    last = [t0]

    def progress(study: optuna.Study, trial: optuna.trial.FrozenTrial) -> None:
        now = time.perf_counter()
        if now - last[0] > 10.0 or trial.number + 1 == trials:
            last[0] = now
            print(f"[bam {model_name}] trial {trial.number + 1}/{trials} "
                  f"best {study.best_value * 1e3:.2f} mrad ({now - t0:.0f} s)",
                  file=sys.stderr, flush=True)

    study.optimize(objective, n_trials=trials, n_jobs=1, callbacks=[progress])
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    return params_dict(model_name, study.best_params), float(study.best_value), wall, cpu


def score(model: Model, logs: Logs) -> tuple[float, dict[str, float]]:
    """Mean over logs of the per-log MAE [rad], and the per-log values."""
    per_log = {log["filename"]: rollout_mae(model, log) for log in logs.logs}
    return float(np.mean(list(per_log.values()))), per_log


def run(args: argparse.Namespace) -> int:
    train = load_logs(args.train)
    test = load_logs(args.test)
    for name in args.models:
        new_model(name)  # fail early on a bad name
    info = {"peer": "bam", "package": "better-actuator-models", "actuator": ACTUATOR,
            "n_train": len(train.logs), "n_heldout": len(test.logs)}
    for name in args.models:
        params, best, wall, cpu = fit(name, train, args.trials, args.seed)
        model = load_model_from_dict(params)
        t0 = time.perf_counter()
        train_mae, train_per = score(model, train)
        heldout_mae, held_per = score(model, test)
        row = {**info, "model": name, "trials": args.trials, "seed": args.seed,
               "fit_wall_s": round(wall, 3), "fit_cpu_s": round(cpu, 3), "eval_wall_s": round(time.perf_counter() - t0, 3),
               "train_objective": best, "train_mae": train_mae, "heldout_mae": heldout_mae,
               "per_log": {"train": train_per, "heldout": held_per}, "params": params}
        print(json.dumps(row), flush=True)
    if args.bundled:
        for name in args.models:
            model = load_model(motor_name=ACTUATOR, model=name)
            train_mae, train_per = score(model, train)
            heldout_mae, held_per = score(model, test)
            row = {**info, "model": f"{name}-bundled", "trials": 0, "seed": None,
                   "fit_wall_s": 0.0, "fit_cpu_s": 0.0, "train_mae": train_mae, "heldout_mae": heldout_mae,
                   "per_log": {"train": train_per, "heldout": held_per},
                   "params": {k: float(p.value) for k, p in model.get_parameters().items()}}
            print(json.dumps(row), flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Fit BAM models on train logs, score held-out logs.")
    parser.add_argument("--train", nargs="+", type=Path, required=True, help="processed training logs")
    parser.add_argument("--test", nargs="+", type=Path, required=True, help="processed held-out logs")
    parser.add_argument("--models", nargs="+", default=["m1", "m4", "m6"], help="BAM model names")
    parser.add_argument("--trials", type=int, default=500, help="optuna trials per model")
    parser.add_argument("--seed", type=int, default=0, help="CMA-ES sampler seed")
    parser.add_argument("--bundled", action="store_true",
                        help="also score BAM's shipped xl330 params (reference, not held-out-clean)")
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())
