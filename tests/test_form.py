"""Form (issue 39 item 5): the tree passes `ruff check` and `ruff format --check` at pyproject's settings (line
length 119), in the fast lane as in .ci/run, with the ruff that constraints-cpu.txt pins."""

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RUFF = Path(sys.executable).with_name("ruff")


def ruff(*args: str) -> subprocess.CompletedProcess:
    assert RUFF.exists(), f"{RUFF} missing: ruff is in the test extra (pip install -e '.[test]')"
    return subprocess.run([str(RUFF), *args], cwd=REPO, capture_output=True, text=True, timeout=300)


def test_the_pinned_ruff_runs():
    pin = next(line for line in (REPO / "constraints-cpu.txt").read_text().splitlines() if line.startswith("ruff=="))
    assert ruff("--version").stdout.split() == ["ruff", pin.split("==")[1]]


def test_ruff_check_passes():
    done = ruff("check", "--output-format", "concise", ".")
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]


def test_ruff_format_leaves_every_file_as_it_is():
    done = ruff("format", "--check", ".")
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]


#: How long a function may grow before it says why (design.md: "functions stay under ~60 lines").
LONGEST = 60
#: What the form checks leave out, as ruff's configuration does: outputs and downloaded wheels.
OUTSIDE = {".venv", "build", "runs", "out", "dist", ".git"}


def long_functions(root: Path = REPO) -> list[tuple[str, str, int, bool]]:
    """Every function over LONGEST lines (decorators not counted): (path, name, lines, whether a ``# long: REASON``
    comment stands on the line above its def, or above its first decorator)."""
    import ast

    found = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root)
        if OUTSIDE & set(rel.parts) or rel.parts[:2] == ("bench", "gpu_wheels"):
            continue
        text = path.read_text(encoding="utf-8")
        lines = text.splitlines()
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = node.end_lineno - node.lineno + 1
                if length > LONGEST:
                    first = min([d.lineno for d in node.decorator_list] + [node.lineno])
                    above = lines[first - 2].strip() if first >= 2 else ""
                    found.append((str(rel), node.name, length, above.startswith("# long:") and len(above) > 8))
    return found


def test_no_function_over_60_lines_without_a_reason_beside_it():
    found = long_functions()
    unexplained = [f"{path}: {name} ({n} lines)" for path, name, n, said in found if not said]
    assert not unexplained, (
        f"{len(unexplained)} function(s) over {LONGEST} lines: split them where their concerns part, or write "
        "'# long: REASON' on the line above the def:\n" + "\n".join(unexplained)
    )


def test_the_form_check_finds_a_long_function_and_reads_its_reason(tmp_path):
    body = "".join(f"    x{i} = {i}\n" for i in range(LONGEST))
    (tmp_path / "m.py").write_text(
        f"def short():\n    pass\n\n\ndef long():\n{body}\n\n# long: a table\ndef ok():\n{body}"
    )
    assert long_functions(tmp_path) == [("m.py", "long", LONGEST + 1, False), ("m.py", "ok", LONGEST + 1, True)]
