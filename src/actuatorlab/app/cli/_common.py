"""The CLI's shared parts: the typer ``app``, the consoles, progress bars, ``--json`` output and
the one-line checks of numeric options and run folders."""


from __future__ import annotations

import contextlib
import functools
import json
import sys
from pathlib import Path
from typing import List, Optional

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from ...errors import ActuatorlabError
from ...models.actuator_model import check_robot, load


app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Identify, trust and use actuator models from real joint logs.")


console = Console()


err_console = Console(stderr=True)


def _progress():
    """Progress bars on stderr, only on a terminal: redirected to a file they would leave one frozen
    row per task (stages that report no fraction stay at 0 %)."""
    return Progress(TextColumn("[bold]{task.description:<28}"), BarColumn(), TextColumn("{task.percentage:>5.1f}%"),
                    TimeElapsedColumn(), console=err_console, transient=False, disable=not err_console.is_terminal)


class _Bars:
    """Adapter from the library's progress(name, stage, fraction) callback to rich bars."""

    def __init__(self, progress: Progress):
        self.p, self.tasks = progress, {}

    def __call__(self, name: str, stage: str, frac: float) -> None:
        if name not in self.tasks:
            # a new task starts when the ones before it are done (the library reports them in turn)
            for t in self.tasks.values():
                self.p.update(t, completed=1.0)
            self.tasks[name] = self.p.add_task(name, total=1.0)
        self.p.update(self.tasks[name], completed=max(0.0, min(1.0, frac)),
                      description=f"{name} {escape('[' + stage + ']')}")

    def done(self) -> None:
        """The run finished: every task is complete (a stage that reported only its start stays at 0 %)."""
        for t in self.tasks.values():
            self.p.update(t, completed=1.0)


def _plain_output() -> None:
    """When stdout is not a terminal (``actuatorlab fit > fit.log``), tables are written at their
    full width: rich would otherwise cut every cell to fit 80 columns."""
    if not console.is_terminal:
        console.width = 100_000


#: the real stdout of the --json command that runs (see :func:`_json_command`)
_JSON_STDOUT: list = []


def _json_command(fn):
    """Decorator of the commands with ``--json``: with it, stdout carries exactly one JSON document
    (:func:`_emit_json`); whatever else is written to stdout meanwhile (third-party messages such
    as MJX's "Failed to import warp" printed when it is first imported) goes to stderr."""
    @functools.wraps(fn)
    def run(*args, **kwargs):
        if not kwargs.get("as_json"):
            return fn(*args, **kwargs)
        _JSON_STDOUT.append(sys.stdout)
        try:
            with contextlib.redirect_stdout(sys.stderr):
                return fn(*args, **kwargs)
        finally:
            _JSON_STDOUT.pop()
    return run


def _emit_json(obj, **kw) -> None:
    """Write the one JSON document of a ``--json`` command to the real stdout."""
    out = _JSON_STDOUT[-1] if _JSON_STDOUT else sys.stdout
    out.write(json.dumps(obj, **kw) + "\n")
    out.flush()


def _check_range(option: str, value, *, low=0.0, low_ok: bool = False, high=None) -> None:
    """Refuse a numeric option outside its range before any work: one line naming the option.
    Default: ``value > 0`` (``low_ok``: ``>= low``; ``high``: ``<= high``); None passes."""
    if value is None:
        return
    bad = value < low if low_ok else value <= low
    if bad or (high is not None and value > high) or value != value:
        lo = f">= {low:g}" if low_ok else f"> {low:g}"
        raise ActuatorlabError(f"{option} must be {lo}" + ("" if high is None else f" and <= {high:g}")
                               + f", got {value:g}")


def _check_resume(out: Path, resume: bool) -> None:
    """``--resume`` continues a run: a folder without one (no config.json) is an error, not a fresh run."""
    if resume and not (Path(out) / "config.json").is_file():
        raise ActuatorlabError(f"{out}: nothing to resume (--resume needs a run folder with a config.json; "
                               "leave out --resume to start a new run)")


def _mrad(x, unit):
    if x is None:
        return "-"
    return f"{x * 1e3:.2f} m{unit}" if unit == "rad" else f"{x * 1e3:.4f} mm"


def _print_per_joint(s: dict) -> None:
    t = Table(title=f"rollout MAE per joint from measured states [{s.get('unit', 'rad')}]")
    t.add_column("joint")
    horizons = sorted({h for v in s["per_joint"].values() for h in v}, key=int)
    for h in horizons:
        t.add_column(f"{h} steps")
    for j, v in s["per_joint"].items():
        t.add_row(j, *[("-" if v.get(h) is None else f"{v[h]:.4g}") for h in horizons])
    console.print(t)


def _robot_of_model(model_json: Path, robot: Optional[str]) -> Optional[str]:
    """The robot of a command's model file: a whole-robot model's (the file's when --robot is
    absent; an explicit --robot must agree with it), None for a one-joint model (after the same
    check: its robot is its bench, e.g. bench:revolute). The word "nominal" needs --robot."""
    if str(model_json) == "nominal":
        if robot is None:
            raise ActuatorlabError("nominal: the nominal parameters of a robot: give --robot ROBOT")
        return robot
    m = load(model_json)
    name = check_robot(m, robot)
    return None if m.one_joint else name


def _floats(text: Optional[str], what: str) -> Optional[list]:
    if text is None:
        return None
    try:
        return [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise ActuatorlabError(f"{what} must be comma-separated numbers, got {text!r}") from None


def _key_values(items: Optional[List[str]], what: str) -> dict:
    """KEY=VALUE options; VALUE read as JSON when it parses (numbers, true, "text"), else text."""
    out = {}
    for it in items or []:
        k, sep, v = it.partition("=")
        if not sep or not k:
            raise ActuatorlabError(f"{what} {it!r}: expected KEY=VALUE")
        try:
            out[k] = json.loads(v)
        except json.JSONDecodeError:
            out[k] = v
    return out

