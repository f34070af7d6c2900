"""README's commands are true: every `actuatorlab COMMAND ... --flag` line of its command blocks
names a command and flags that exist, every `python -c "from actuatorlab... import X"` imports, and
every `python bench/NAME.py` is a file of bench/ (issue 46: README commands must run as written)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
import typer

from actuatorlab.app.cli import app

ROOT = Path(__file__).resolve().parents[1]


def readme_commands() -> list[str]:
    text = (ROOT / "README.md").read_text()
    lines = []
    for block in re.findall(r"```bash\n(.*?)```", text, re.S):
        for line in block.splitlines():
            code = line.split("  #")[0].strip()
            lines += [c.strip() for c in code.split(";") if c.strip()]
    return lines


def cli_commands() -> dict[str, set[str]]:
    group = typer.main.get_command(app)
    out = {}
    for name, cmd in group.commands.items():  # type: ignore[attr-defined]
        out[name] = {o for p in cmd.params for o in (*p.opts, *p.secondary_opts) if o.startswith("-")}
    return out


def test_readme_has_the_newcomer_commands():
    cmds = readme_commands()
    assert "pip install -e . && actuatorlab fit" in cmds
    assert 'pip install -e ".[test]" && python -m pytest' in cmds


@pytest.mark.parametrize("line", [c for c in readme_commands() if c.startswith("actuatorlab ")
                                  or "&& actuatorlab " in c])
def test_readme_cli_lines_name_existing_commands_and_flags(line):
    known = cli_commands()
    words = line.split("&& ")[-1].split()
    name = words[1]
    assert name in known, f"README: no command {name!r} (known: {sorted(known)})"
    flags = {re.sub(r"[\[\]]", "", w).split("=")[0] for w in words[2:] if re.sub(r"[\[\]]", "", w).startswith("--")}
    missing = sorted(flags - known[name])
    assert not missing, f"README: `actuatorlab {name}` has no {missing}"


@pytest.mark.parametrize("line", [c for c in readme_commands() if c.startswith('python -c "')])
def test_readme_python_one_liners_import(line):
    code = line[len('python -c "'):].rsplit('"', 1)[0]
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.ImportFrom):
            mod = __import__(node.module, fromlist=[a.name for a in node.names])
            for a in node.names:
                assert hasattr(mod, a.name), f"README: {node.module} has no {a.name}"


@pytest.mark.parametrize("line", [c for c in readme_commands() if c.startswith("python bench/")])
def test_readme_bench_scripts_exist(line):
    assert (ROOT / line.split()[1]).is_file(), line
