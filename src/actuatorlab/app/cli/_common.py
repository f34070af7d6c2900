"""The CLI's shared parts: the typer ``app``, the consoles, progress bars, ``--json`` output, the
``--config`` option and the job it builds, and the one-line checks of numeric options and run folders."""


from __future__ import annotations

import contextlib
import functools
import json
import sys
from pathlib import Path
from typing import Annotated, Any, List, Optional

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from ...errors import ActuatorlabError
from ..config import build_job


app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Identify, trust and use actuator models from real joint logs.")


#: ``--config FILE``, taken by every command that runs a job
Config = Annotated[Optional[Path], typer.Option("--config", help="JSON object with the job's fields (listed in "
                                                "this help); flags given on the command line override its values")]


def documents(job_cls: type):
    """Decorator of a command: its help ends with the fields of ``job_cls`` that ``--config`` takes."""
    def deco(fn):
        fn.__doc__ = (f"{(fn.__doc__ or '').rstrip()}\n\n--config FILE: a JSON object with the fields of "
                      f"{job_cls.__name__} (flags override it). {escape(' '.join((job_cls.__doc__ or '').split()))}")
        return fn
    return deco


def job_of(ctx: typer.Context, job_cls: type, config: Optional[Path], given: Optional[dict] = None, /, **fields: str):
    """The job of a command: ``job_cls`` from ``config`` with the flags given on the command line
    laid over it; ``fields``: {job field, nested as "options.seed": command parameter name};
    ``given``: {job field: value} parsed from the command line by the command itself."""
    given = dict(given or {})
    for field, param in fields.items():
        source = ctx.get_parameter_source(param)
        if source is not None and source.name not in ("DEFAULT", "DEFAULT_MAP"):  # typer bundles its own click
            given[field] = ctx.params[param]
    return build_job(job_cls, config, given)


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
        self.p = progress
        self.tasks: dict[str, Any] = {}
        self.last: str | None = None

    def __call__(self, name: str, stage: str, frac: float) -> None:
        if name not in self.tasks:
            # a new task starts when the ones before it are done, except the one that reported last:
            # the library runs at most two at once (the fit's first stage, its walk side by side)
            for n, t in self.tasks.items():
                if n != self.last:
                    self.p.update(t, completed=1.0)
            self.tasks[name] = self.p.add_task(name, total=1.0)
        self.last = name
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

