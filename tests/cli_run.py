"""Run the ``actuatorlab`` entry point in-process, as a user's shell would, for the CLI tests."""

from __future__ import annotations

import sys
import traceback
from types import SimpleNamespace

from typer.testing import CliRunner

from actuatorlab.app.cli import main


def cli(*argv, env: dict | None = None) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of ``actuatorlab ARGV`` run by the entry point in-process; an
    exception that escapes it is printed as Python would (a traceback) with exit code 1."""
    with CliRunner().isolation(env=env) as (out, err, _):
        try:
            rc = main([str(a) for a in argv])
        except SystemExit as e:
            rc = e.code if isinstance(e.code, int) else 1
        except BaseException:  # noqa: BLE001 - what the user would see
            traceback.print_exc()
            rc = 1
        sys.stdout.flush()
        sys.stderr.flush()
        return rc, out.getvalue().decode(), err.getvalue().decode()


def run(*argv, env: dict | None = None) -> SimpleNamespace:
    """:func:`cli` as an object with ``returncode``, ``stdout`` and ``stderr``."""
    rc, out, err = cli(*argv, env=env)
    return SimpleNamespace(returncode=rc, stdout=out, stderr=err)
