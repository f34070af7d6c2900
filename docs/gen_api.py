"""Write docs/api.md: the public entry points of every actuatorlab module, read from the source.

    python docs/gen_api.py        # rewrites docs/api.md

For each module (in the layer order of the package docstring): its first docstring line, then
every public name it defines (``__all__`` when present, else public top-level functions and
classes), with the signature and the first line of the docstring. Nothing is imported: the
source is parsed, so the page can be regenerated on any machine.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "src" / "actuatorlab"
LAYERS = ["errors", "files", "precision", "models", "robots", "logs", "sim", "synth", "identify", "learned",
          "evaluate", "estimate", "excite", "envs", "export", "policy", "baselines", "report", "app"]


def _first(doc: str | None) -> str:
    return (doc or "").strip().split("\n\n")[0].replace("\n", " ").strip()


def _sig(node: ast.FunctionDef | ast.ClassDef) -> str:
    if isinstance(node, ast.ClassDef):
        init = next((n for n in node.body if isinstance(n, ast.FunctionDef) and n.name == "__init__"), None)
        if init is None:
            return node.name
        node_args = init.args
        args = [a.arg for a in node_args.args[1:]]
    else:
        node_args = node.args
        args = [a.arg for a in node_args.posonlyargs + node_args.args]
    if node_args.vararg:
        args.append("*" + node_args.vararg.arg)
    elif node_args.kwonlyargs:
        args.append("*")
    args += [a.arg for a in node_args.kwonlyargs]
    if node_args.kwarg:
        args.append("**" + node_args.kwarg.arg)
    return f"{node.name}({', '.join(args)})"


def module_entries(path: Path) -> tuple[str, list[tuple[str, str]]]:
    tree = ast.parse(path.read_text())
    exported = None
    for n in tree.body:
        if isinstance(n, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in n.targets):
            try:
                exported = list(ast.literal_eval(n.value))
            except ValueError:
                exported = None
    rows = []
    for n in tree.body:
        if isinstance(n, (ast.FunctionDef, ast.ClassDef)) and not n.name.startswith("_"):
            if exported is None or n.name in exported:
                rows.append((_sig(n), _first(ast.get_docstring(n))))
    return _first(ast.get_docstring(tree)), rows


def main() -> None:
    out = ["# API", "",
           "The public entry points, module by module, in the layer order (a module imports only the "
           "layers above it). Generated from the source by `python docs/gen_api.py`; the docstrings "
           "hold the details (units, shapes, equations, sources).", ""]
    for layer in LAYERS:
        p = ROOT / f"{layer}.py"
        mods = [p] if p.is_file() else sorted((ROOT / layer).rglob("*.py"))
        for m in mods:
            if m.name == "__init__.py" and len(mods) > 1:
                continue
            doc, rows = module_entries(m)
            if not rows:
                continue
            name = "actuatorlab." + ".".join(m.relative_to(ROOT).with_suffix("").parts)
            out += [f"## `{name}`", "", doc, "", "| entry point | what |", "|---|---|"]
            out += [f"| `{s}` | {d.replace('|', '/')} |" for s, d in rows]
            out.append("")
    (ROOT.parents[1] / "docs" / "api.md").write_text("\n".join(out))


if __name__ == "__main__":
    main()
