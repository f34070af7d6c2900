"""Model homotopy transfer: PPO learning curves of three alpha schedules (scratch, direct, homotopy).

One command (from the repo root)::

    python bench/homotopy.py                      # --reduced (default): the CPU configuration
    python bench/homotopy.py --long               # CPU, 256 envs x 4 M steps: policies that walk (2-3 h)
    python bench/homotopy.py --full               # the GPU configuration (Playground-like size)
    python bench/homotopy.py --robot toy --task pendulum --steps 200000   # plumbing check, ~1 min

For each schedule (``scratch``: alpha = 1 throughout; ``direct``: alpha = 0 for the first 30 %
then 1; ``homotopy``: alpha = 0 for 30 %, four equal steps over the next 40 %, then 1; ``--schedules``
adds ``homotopy-adaptive``) and seed, ``actuatorlab.policy.train_policy`` trains a policy with the
same budget, networks, PPO settings and actuator (``--actuator``, default ``sea``: the issue's
series-elastic ANYdrive on every joint) (one compiled update shared by every run: alpha is a traced
argument) into ``OUT/<schedule>_s<seed>`` (an interrupted benchmark resumes its runs).

Reported: the final return (mean of the last 10 % of curve points, at alpha = 1); environment
steps to reach 90 % of the from-scratch final return (mean over scratch seeds; a run counts a point
only at alpha = 1, the trailing mean of 3 points at alpha = 1 must reach ``R - 0.1 |R|``; a run
that never does counts with its whole budget); the ratio of the means homotopy / scratch (target <=
0.5; read on ``homotopy``, or on ``homotopy-adaptive`` when the fixed stages were not asked for:
``homotopy_schedule`` in the JSON; ``ratios_vs_scratch`` gives every schedule's,
``ratios_any_alpha_vs_scratch`` the same counting alpha < 1; ``ratio_any_alpha``: the lenient
variant that also counts points at alpha < 1, i.e. returns measured on the simplified model;
``ratio_floor``: the lowest ratio the schedule allows, its third point at alpha = 1 over scratch's
steps); velocity-tracking RMSE (m/s) and yaw-rate RMSE (rad/s) of every final policy on the fixed
command set (``actuatorlab.policy.train.FIXED_COMMANDS``, deterministic policy, ``--eval-steps``
policy steps) with the identified actuators (the training env's) and with MuJoCo's built-in
actuators, next to the paper's 0.28 m/s and 0.11 rad/s (Kang et al., arXiv 2512.24698); training
env steps/s.
Writes ``OUT/curves.html`` (mean +- std learning curves per schedule) and ends with one JSON line.

``--schedule-opt KEY=VALUE`` gives an option to every asked schedule that has it (e.g.
``pretrain=0.15 transition=0.1``): the fixed shares were tuned on the CPU's 3-8 M budgets and bound
the ratio at larger ones (``ratio_floor``). ``--schedules scratch direct --schedule-opt pretrain=1.0``
trains the simplified model alone (alpha = 0 throughout): its ratio counting alpha < 1 bounds what
a schedule that ends on the full model can gain (bench/README.md, "Second GPU lease").

Recipes measured and not adopted (bench/homotopy_recipes.py): ``--restat N`` (the observation
statistics keep at most N observations' weight at each change of alpha, rule R30) and
``--homotopy-opt KEY=VALUE`` (the trot env's homotopy floor: ``eps``, ``a_floor``, ``keep``;
the eighth run, rules R22 and R24).

A long benchmark can be split over calls: ``--train-only`` trains (or reuses) the runs it names and
stops; a last call without it, naming every schedule and seed, evaluates and summarizes them all.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import emit  # noqa: E402

PAPER = {"lin_vel_rmse": 0.28, "yaw_rate_rmse": 0.11}

#: reduced: what fits in under an hour of this 2-core CPU for 3 schedules x 3 seeds (bench/README.md)
REDUCED = dict(steps=3_000_000, envs=64, points=60, eval_steps=500,
               ppo=dict(unroll_length=20, num_minibatches=4, num_epochs=4, learning_rate=1e-3,
                        policy_hidden=(64, 64), value_hidden=(64, 64)),
               env=dict(episode_length=500, physics_dt=0.004))
#: long: the reduced configuration with 4x the environments per update and 4 M env steps; its
#: policies walk and rarely fall (1 of 36 evaluation episodes; bench/README.md, "Fifth run"); 11-20 min per run on this 2-core
#: CPU, so 3 schedules x 3 seeds take 2-3 hours (split it over calls with --train-only)
LONG = dict(REDUCED, steps=4_000_000, envs=256, points=30)
#: full: Playground-like (Go1 joystick: 8192 envs, 200 M steps); for one GPU (an H200: 314 k env steps/s,
#: about 5.3 min of training per 100 M-step run; bench/README.md, "The full configuration on a GPU")
FULL = dict(steps=100_000_000, envs=4096, points=100, eval_steps=1000,
            ppo=dict(unroll_length=20, num_minibatches=32, num_epochs=4, learning_rate=3e-4,
                     policy_hidden=(256, 256, 256), value_hidden=(256, 256, 256)),
            env=dict(episode_length=1000))
CONFIGURATIONS = {"reduced": REDUCED, "long": LONG, "full": FULL}


def _steps_to(curve: dict, level: float, window: int = 3, any_alpha: bool = False) -> int | None:
    """First env step at which the trailing mean of ``window`` curve points at alpha = 1 (every
    point with ``any_alpha``) reaches ``level``."""
    seen: list[float] = []
    for a, r, s in zip(curve["alpha"], curve["return"], curve["env_steps"]):
        if (a < 1.0 and not any_alpha) or r is None:
            continue
        seen.append(r)
        if len(seen) >= window and sum(seen[-window:]) / window >= level:
            return int(s)
    return None


def _earliest_count(curve: dict, window: int = 3) -> int | None:
    """The first env step at which :func:`_steps_to` could count at all: the ``window``-th curve
    point at alpha = 1. A schedule that holds alpha < 1 for a fixed share of the budget cannot
    reach the level before it, whatever the policy learns (its floor)."""
    at_one = [int(s) for a, s in zip(curve["alpha"], curve["env_steps"]) if a >= 1.0]
    return at_one[window - 1] if len(at_one) >= window else None


def _mean(xs):
    xs = [x for x in xs if x is not None]
    return sum(xs) / len(xs) if xs else None


def _std(xs):
    xs = [x for x in xs if x is not None]
    if len(xs) < 2:
        return 0.0 if xs else None
    m = sum(xs) / len(xs)
    return math.sqrt(sum((x - m) ** 2 for x in xs) / (len(xs) - 1))


def _curves_html(path: Path, curves: dict[str, list[dict]], title: str) -> None:
    import numpy as np
    import plotly.graph_objects as go

    from actuatorlab.files import atomic_write

    fig = go.Figure()
    colors = {"scratch": "#1f77b4", "direct": "#ff7f0e", "homotopy": "#2ca02c", "homotopy-adaptive": "#d62728"}
    for name, cs in curves.items():
        x = cs[0]["env_steps"]
        R = np.array([[np.nan if r is None else r for r in c["return"]] for c in cs], float)
        m, s = np.nanmean(R, 0), np.nanstd(R, 0)
        col = colors.get(name, "#555")
        fig.add_trace(go.Scatter(x=x + x[::-1], y=list(m + s) + list((m - s)[::-1]), fill="toself", line={"width": 0},
                                 fillcolor=col, opacity=0.15, showlegend=False, hoverinfo="skip"))
        fig.add_trace(go.Scatter(x=x, y=list(m), name=f"{name} (mean of {len(cs)})", line={"color": col}))
        fig.add_trace(go.Scatter(x=x, y=cs[0]["alpha"], name=f"{name} alpha", yaxis="y2",
                                 line={"color": col, "dash": "dot"}))
    fig.update_layout(title=title, xaxis_title="environment steps", yaxis_title="mean episode return",
                      yaxis2={"title": "alpha", "overlaying": "y", "side": "right", "range": [-0.05, 1.05]},
                      height=520)
    atomic_write(path, fig.to_html(full_html=True, include_plotlyjs=True))


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--reduced", action="store_true", help="CPU configuration (default)")
    g.add_argument("--long", action="store_true", help="CPU, 256 envs x 4 M steps (2-3 h for 3 schedules x 3 seeds)")
    g.add_argument("--full", action="store_true", help="GPU configuration (Playground-like size)")
    ap.add_argument("--robot", default="anymal_c")
    ap.add_argument("--task", default="trot")
    ap.add_argument("--schedules", nargs="+", default=["scratch", "direct", "homotopy"])
    ap.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    ap.add_argument("--steps", type=int, default=None, help="env steps per run (default per configuration)")
    ap.add_argument("--envs", type=int, default=None, help="parallel environments (default per configuration)")
    ap.add_argument("--points", type=int, default=None, help="curve points per run")
    ap.add_argument("--ppo", nargs="*", default=[], metavar="KEY=VALUE",
                    help="PPO options over the configuration's (JSON values), e.g. lr_schedule='\"adaptive\"'")
    ap.add_argument("--schedule-opt", nargs="*", default=[], metavar="KEY=VALUE",
                    help="schedule options (JSON values), each given to every schedule that has it, e.g. "
                         "pretrain=0.15 (direct, homotopy, homotopy-adaptive); an option no asked schedule has "
                         "is an error")
    ap.add_argument("--actuator", default="sea",
                    help="the training env's actuator model (docs/locomotion.md): sea (the issue's series-elastic "
                         "ANYdrive, default), nominal (rigid), builtin, or a fitted model's path")
    ap.add_argument("--restat", type=int, default=0, help="recipe (not adopted, rule R30): at each change of alpha the "
                    "observation statistics keep at most this many observations' weight (0: off)")
    ap.add_argument("--homotopy-opt", nargs="*", default=[], metavar="KEY=VALUE",
                    help="recipe (not adopted): the trot env's homotopy floor, eps / a_floor / keep (JSON values)")
    ap.add_argument("--eval-steps", type=int, default=None, help="policy steps of the evaluation episodes")
    ap.add_argument("--train-only", action="store_true",
                    help="train (or reuse) the runs and stop: no evaluation, no summary (split a long benchmark "
                         "over calls; the last call, without it, evaluates and summarizes every run)")
    ap.add_argument("--no-builtin", action="store_true", help="skip the evaluation with MuJoCo's built-in actuators")
    ap.add_argument("--out", type=Path, default=Path("bench/out/homotopy"))
    ap.add_argument("--json", action="store_true", help="print only the JSON line")
    a = ap.parse_args(argv)

    import jax

    from actuatorlab.app.cli import _key_values
    from actuatorlab.envs import make_policy_env
    from actuatorlab.policy.ppo import PPO
    from actuatorlab.policy.schedule import make_schedule
    from actuatorlab.policy.train import default_ppo_config, evaluate_policy, plan_run, read_curve, train_policy
    from homotopy_recipes import restat_hook, with_homotopy

    conf_name = "full" if a.full else "long" if a.long else "reduced"
    conf = CONFIGURATIONS[conf_name]
    steps, envs = a.steps or conf["steps"], a.envs or conf["envs"]
    points, eval_steps = a.points or conf["points"], a.eval_steps or conf["eval_steps"]
    env_options = {**conf["env"], "actuator": a.actuator} if a.robot != "toy" else {}
    ppo_over = dict(conf["ppo"]) if a.robot != "toy" else {}
    ppo_over.update(_key_values(a.ppo, "--ppo"))
    from actuatorlab.policy.schedule import SCHEDULES
    sched_over = _key_values(a.schedule_opt, "--schedule-opt")
    for s in a.schedules:
        make_schedule(s)    # an unknown schedule name: the one-line error listing the schedules
    unused = sorted(k for k in sched_over if not any(k in SCHEDULES[s].__dataclass_fields__ for s in a.schedules))
    if unused:
        raise SystemExit(f"--schedule-opt: no asked schedule ({', '.join(a.schedules)}) has {', '.join(unused)}")
    sched_opts = {s: {k: v for k, v in sched_over.items() if k in SCHEDULES[s].__dataclass_fields__}
                  for s in a.schedules}
    sched_options = {s: make_schedule(s, **o).options() for s, o in sched_opts.items()}   # with the defaults
    cfg = default_ppo_config(a.robot, envs)
    cfg = type(cfg).from_dict({**cfg.to_dict(), **ppo_over})
    say = (lambda *x: None) if a.json else (lambda *x: print(*x, file=sys.stderr, flush=True))
    load0 = os.getloadavg()
    t_all = time.perf_counter()
    hom_opts = _key_values(a.homotopy_opt, "--homotopy-opt")
    recipes = {k: v for k, v in (("restat", a.restat), ("homotopy", hom_opts)) if v}

    def build(**options):
        e = make_policy_env(a.robot, a.task, **options)
        return with_homotopy(e, **hom_opts) if hom_opts else e

    with jax.enable_x64(False):
        env = build(**env_options)
        plan = plan_run(steps, cfg, points)
        algo = PPO(env, cfg, plan.updates)
    say(f"{a.robot}/{a.task}: {plan.updates} updates x {cfg.steps_per_update} env steps = "
        f"{plan.updates * cfg.steps_per_update:,} per run, {cfg.num_envs} envs, {len(a.schedules)} schedules x "
        f"{len(a.seeds)} seeds")
    runs: dict[str, list[dict]] = {s: [] for s in a.schedules}
    # seed-major order: an interrupted benchmark has every schedule for its first seeds (rerun with
    # those --seeds to summarize them; finished runs are reused)
    for seed in a.seeds:
        for sched in a.schedules:
            out = a.out / f"{sched}_s{seed}"
            if (out / "policy.json").exists():
                # a finished run is reused only when it was trained with what this call would run
                # (e.g. a schedule default changed since: the run would silently mix two configurations)
                old = json.loads((out / "config.json").read_text())
                rec = out / "recipes.json"
                old["recipes"] = json.loads(rec.read_text()) if rec.exists() else None
                want = {"schedule_options": sched_options[sched], "ppo": cfg.to_dict(), "recipes": recipes or None,
                        "env_options": env_options, "env_steps": plan.updates * cfg.steps_per_update}
                diff = sorted(k for k, v in want.items() if json.loads(json.dumps(old.get(k))) != json.loads(json.dumps(v)))
                if diff:
                    raise SystemExit(f"{out}: a finished run trained with other {', '.join(diff)} than this call "
                                     "would use; move it away or pass --out to a new folder")
                summ = json.loads((out / "summary.json").read_text())
                summ["reused"] = True
            else:
                t0 = time.perf_counter()
                summ = train_policy(a.robot, a.task, sched, steps=steps, seed=seed, out=out,
                                    resume=(out / "config.json").exists(), ppo=cfg, env_options=env_options,
                                    schedule_options=sched_opts[sched] or None,
                                    points=points, env=env, ppo_obj=algo,
                                    stage_hook=restat_hook(a.restat) if a.restat else None)
                if recipes:  # the recipes are not in the library's config.json: recorded beside it
                    (out / "recipes.json").write_text(json.dumps(recipes))
                summ["wall_s"] = time.perf_counter() - t0
            curve = read_curve(out)
            summ["curve"] = curve
            runs[sched].append(summ)
            say(f"  {sched:>18} seed {seed}: final return {summ['final_return']}, "
                f"{summ.get('steps_per_s_this_call', 0):,.0f} env steps/s")
    if a.train_only:
        say(f"trained {sum(len(rs) for rs in runs.values())} runs in {time.perf_counter() - t_all:.0f} s (--train-only: "
            "no evaluation)")
        return None
    # evaluation: identified (the training env's actuators) and MuJoCo's built-in actuators
    evals: dict[str, dict[str, list[dict]]] = {}
    envs_eval = {"identified": (env, None)}
    if not a.no_builtin and a.robot != "toy":
        with jax.enable_x64(False):
            envs_eval["builtin"] = (build(**{**env_options, "actuator": "builtin"}), None)
    for sched, rs in runs.items():
        for seed, r in zip(a.seeds, rs):
            for kind, (e, _) in envs_eval.items():
                ev = evaluate_policy(a.out / f"{sched}_s{seed}", env=e, steps=eval_steps, alpha=1.0)
                ev.pop("commands", None)
                ev.pop("per_command", None)
                evals.setdefault(sched, {}).setdefault(kind, []).append(ev)
    # summary
    finals = {s: [r["final_return"] for r in rs] for s, rs in runs.items()}
    r_star = _mean(finals.get("scratch", []))
    level = None if r_star is None else r_star - 0.1 * abs(r_star)
    res: dict = {"bench": "homotopy", "robot": a.robot, "task": a.task,
                 "configuration": conf_name, "env_steps_per_run": plan.updates * cfg.steps_per_update,
                 "envs": cfg.num_envs, "seeds": a.seeds, "ppo": cfg.to_dict(), "env_options": env_options,
                 "schedule_options": sched_options, "recipes": recipes,
                 "eval_steps": eval_steps, "paper": PAPER, "scratch_final_return": r_star, "level_90": level,
                 "schedules": {}}
    for s, rs in runs.items():
        to90 = [None if level is None else _steps_to(r["curve"], level) for r in rs]
        to90_any = [None if level is None else _steps_to(r["curve"], level, any_alpha=True) for r in rs]
        sps = [r.get("steps_per_s_after_first_chunk") for r in rs]   # of the training call (also when reused)
        budget = res["env_steps_per_run"]
        censored = [budget if x is None else x for x in to90]
        d = {"final_return_mean": _mean(finals[s]), "final_return_std": _std(finals[s]),
             "final_returns": finals[s], "steps_to_90": to90, "steps_to_90_mean": _mean(to90),
             "steps_to_90_censored_mean": _mean(censored) if level is not None else None,
             "reached_90": sum(x is not None for x in to90), "runs": len(rs),
             "steps_to_90_any_alpha": to90_any,
             "steps_to_90_any_alpha_censored_mean": None if level is None else _mean([budget if x is None else x for x in to90_any]),
             "train_steps_per_s": _mean(sps),
             # the earliest step the schedule lets count (its alpha = 1 window), whatever is learned
             "steps_to_90_floor_mean": _mean([_earliest_count(r["curve"]) for r in rs])}
        for kind, evs in evals.get(s, {}).items():
            d[kind] = {k: _mean([e.get(k) for e in evs]) for k in
                       ("lin_vel_rmse", "yaw_rate_rmse", "return", "fell", "distance", "upright") if evs[0].get(k) is not None}
        res["schedules"][s] = d
    # the target is read on the fixed-stage homotopy when it ran, else on the adaptive one (decided by
    # which schedules were asked for, never by which did better)
    res["homotopy_schedule"] = next((s for s in ("homotopy", "homotopy-adaptive") if s in res["schedules"]), None)
    sc, ho = res["schedules"].get("scratch", {}), res["schedules"].get(res["homotopy_schedule"], {})

    # every schedule against scratch (same seeds, same budget; runs that never reach the level count
    # with the whole budget, a lower bound on their steps); the same counting points at alpha < 1: for a
    # schedule that never reaches alpha = 1 (direct with pretrain=1.0, the simplified model alone) the
    # only figure, and a bound on what a schedule gains
    def ratios(key):
        return {s: d[key] / sc[key] if sc.get(key) and d.get(key) is not None else None
                for s, d in res["schedules"].items() if s != "scratch"}
    res["ratios_vs_scratch"] = ratios("steps_to_90_censored_mean")
    res["ratios_any_alpha_vs_scratch"] = ratios("steps_to_90_any_alpha_censored_mean")
    res["ratio_homotopy_vs_scratch"] = res["ratios_vs_scratch"].get(res["homotopy_schedule"])
    res["target_met"] = (res["ratio_homotopy_vs_scratch"] is not None and res["ratio_homotopy_vs_scratch"] <= 0.5
                         and ho["reached_90"] == ho["runs"])
    if sc.get("steps_to_90_censored_mean") and ho.get("steps_to_90_floor_mean") is not None:
        # the lowest ratio the homotopy's schedule allows at this budget (bench/README.md, GPU run)
        res["ratio_floor"] = ho["steps_to_90_floor_mean"] / sc["steps_to_90_censored_mean"]
    if res["ratios_any_alpha_vs_scratch"].get(res["homotopy_schedule"]) is not None:
        res["ratio_any_alpha"] = res["ratios_any_alpha_vs_scratch"][res["homotopy_schedule"]]
    res["wall_s"] = time.perf_counter() - t_all
    res["load_before"], res["load_after"] = list(load0), list(os.getloadavg())
    _curves_html(a.out / "curves.html", {s: [r["curve"] for r in rs] for s, rs in runs.items()},
                 f"{a.robot} / {a.task}: learning curves ({len(a.seeds)} seeds)")
    if not a.json:
        f = lambda x, p=3: "-" if x is None else (f"{x:,.0f}" if abs(x) >= 1000 else f"{x:.{p}g}")  # noqa: E731
        head = ["schedule", "final return", "steps to 90 % (censored)", "reached", "vel RMSE id", "yaw RMSE id",
                "vel RMSE builtin", "yaw RMSE builtin", "fell id/builtin", "steps/s"]
        rows = []
        for s, d in res["schedules"].items():
            i, b = d.get("identified", {}), d.get("builtin", {})
            rows.append([s, f"{f(d['final_return_mean'])} +- {f(d['final_return_std'], 2)}", f(d["steps_to_90_censored_mean"]),
                         f"{d['reached_90']}/{d['runs']}", f(i.get("lin_vel_rmse")), f(i.get("yaw_rate_rmse")),
                         f(b.get("lin_vel_rmse")), f(b.get("yaw_rate_rmse")),
                         f"{f(i.get('fell'), 2)}/{f(b.get('fell'), 2)}", f(d["train_steps_per_s"])])
        rows.append(["paper (Kang et al.)", "", "", "", "0.28", "0.11", "", "", "", ""])
        w = [max(len(str(r[k])) for r in rows + [head]) for k in range(len(head))]
        print("  ".join(h.ljust(w[k]) for k, h in enumerate(head)))
        for r in rows:
            print("  ".join(str(c).ljust(w[k]) for k, c in enumerate(r)))
        print(f"{res['homotopy_schedule'] or 'homotopy'} / scratch steps to 90 %: {f(res['ratio_homotopy_vs_scratch'])} (target <= 0.5: "
              f"{'met' if res['target_met'] else 'not met'}); counting points at any alpha (lenient): "
              f"{f(res.get('ratio_any_alpha'))}; the lowest its schedule allows at this budget: "
              f"{f(res.get('ratio_floor'))}")
        others = {s: r for s, r in res["ratios_vs_scratch"].items() if s != res["homotopy_schedule"]}
        if others:
            anyr = res["ratios_any_alpha_vs_scratch"]
            print("other schedules / scratch steps to 90 %: " + ", ".join(
                f"{s} {f(r)} (any alpha {f(anyr.get(s))})" for s, r in others.items()))
        print(f"{res['env_steps_per_run']:,} env steps per run; "
              f"wall {res['wall_s']:.0f} s; load {load0[0]:.1f} -> {res['load_after'][0]:.1f}")
    emit(res)
    return res


if __name__ == "__main__":
    main()
