"""The house: the layers hold (pyproject's [tool.importlinter], checked by ``lint-imports``) and no module
sits on an import circle, imports inside functions included (issue 29)."""

import ast
import os
import subprocess
import sys
from pathlib import Path

import reasonkit

ROOT = Path(reasonkit.__file__).resolve().parent
SKIP = {"tests", "bench", "build", "runs", "dist", "scripts"}


def import_graph() -> dict[str, set[str]]:
    """Each module of the package -> the package's modules it imports (anywhere in the file)."""
    files = {}
    for folder, dirs, names in os.walk(ROOT):
        dirs[:] = [d for d in dirs if d not in SKIP and not d.startswith(".")]
        for name in names:
            if name.endswith(".py"):
                rel = Path(folder, name).relative_to(ROOT).with_suffix("")
                dotted = ".".join(("reasonkit", *rel.parts)).removesuffix(".__init__")
                files[dotted] = Path(folder, name)
    graph = {}
    for module, path in files.items():
        deps = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            for target in names:
                while target and target not in files:
                    target = target.rpartition(".")[0]
                if target and target not in (module, "reasonkit"):
                    deps.add(target)
        graph[module] = deps
    return graph


def circles(graph: dict[str, set[str]]) -> list[tuple[str, str]]:
    def reaches(a, b):
        seen, todo = set(), [a]
        while todo:
            m = todo.pop()
            if m == b:
                return True
            if m not in seen:
                seen.add(m)
                todo.extend(graph.get(m, ()))
        return False

    return sorted({tuple(sorted((a, b))) for a in graph for b in graph[a] if reaches(b, a)})


def test_the_layers_hold_and_no_import_circle():
    assert not circles(import_graph())
    lint = Path(sys.executable).with_name("lint-imports")
    result = subprocess.run(
        [str(lint) if lint.exists() else "lint-imports", "--no-cache"], cwd=ROOT, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]


def private_imports() -> list[str]:
    """``from reasonkit.X import _name`` in a module other than X: a private name crossing modules (issue 39 item 3)."""  # noqa: E501
    found = []
    for folder, dirs, names in os.walk(ROOT):
        dirs[:] = [d for d in dirs if d not in SKIP and not d.startswith(".")]
        for name in (n for n in names if n.endswith(".py")):
            path = Path(folder, name)
            module = ".".join(("reasonkit", *path.relative_to(ROOT).with_suffix("").parts)).removesuffix(".__init__")
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if (
                    isinstance(node, ast.ImportFrom)
                    and (node.module or "").startswith("reasonkit")
                    and node.module != module
                ):
                    found += [
                        f"{module}: {node.module}.{a.name}"
                        for a in node.names
                        if a.name.startswith("_") and not a.name.startswith("__")
                    ]
    return found


def test_no_private_name_crosses_modules():
    assert private_imports() == []
