"""``actuatorlab`` command line: a thin layer over the jobs of :mod:`actuatorlab.app`.

One module per command group, in the order the data flows: :mod:`.data` (import, import-bam,
audit, synth), :mod:`.identify` (fit, compare, fit-fleet, excite, models), :mod:`.evaluate`
(evaluate, replay, infer), :mod:`.learn` (train, train-heads, adapt), :mod:`.estimate` (estimate-force,
condition, report-heads), :mod:`.use` (export, randomize), :mod:`.policy` (train-policy,
eval-policy); :mod:`._common` holds the typer ``app`` and the shared console, ``--json``,
progress and range-check helpers.

Every error the library raises for bad input (:class:`~actuatorlab.errors.ActuatorlabError`) is
printed as one line naming the file and the problem, with exit code 2 and no traceback.
"""

from __future__ import annotations

import contextlib
import sys

import typer
from rich.markup import escape

from ... import __version__
from ...errors import ActuatorlabError
from ...precision import fixed_blas_threads, physics_precision
# the command modules import MuJoCo's MJX, which prints "Failed to import warp" on stdout without the
# optional warp package: that line goes to stderr, so that a --json command's stdout stays one document
with contextlib.redirect_stdout(sys.stderr):
    from . import data, identify, evaluate, learn, estimate, use, policy, visual  # noqa: F401  (registers the commands)
from ._common import _key_values, _plain_output, app, console, err_console

__all__ = ["app", "main", "_key_values"]


@app.command()
def version():
    """Print the package version."""
    console.print(__version__)


def main(argv: list[str] | None = None) -> int:
    """Entry point; bad input gives one line on stderr and exit code 2. Every command runs under
    :func:`~actuatorlab.precision.physics_precision` (float64 physics; learned networks stay float32)
    and :func:`~actuatorlab.precision.fixed_blas_threads` (NumPy's BLAS on a fixed number of threads:
    the same numbers on any number of cores)."""

    _plain_output()
    try:
        with physics_precision(), fixed_blas_threads():
            # standalone_mode=False: click returns a command's typer.Exit(code) instead of raising it
            rc = app(args=argv, standalone_mode=False)
    except ActuatorlabError as e:
        # escaped: a message such as "pip install 'actuatorlab[export]'" is text, not rich markup
        err_console.print(f"[red]error:[/] {escape(str(e))}", highlight=False, soft_wrap=True)
        return 2
    except (FileNotFoundError, PermissionError, IsADirectoryError) as e:
        err_console.print(f"[red]error:[/] {escape(f'{e.filename}: {e.strerror}')}", highlight=False, soft_wrap=True)
        return 2
    except typer.Exit as e:
        return e.exit_code
    except SystemExit as e:
        return int(e.code or 0)
    except KeyboardInterrupt:
        err_console.print("interrupted")
        return 130
    except Exception as e:  # usage errors (typer bundles its own click; plain click as fallback)
        if hasattr(e, "show") and isinstance(getattr(e, "exit_code", None), int):
            e.show()
            return int(getattr(e, "exit_code"))
        if type(e).__name__ == "Abort":
            return 1
        raise
    return rc if isinstance(rc, int) and not isinstance(rc, bool) else 0


if __name__ == "__main__":
    sys.exit(main())
