"""Every repository path a comment, docstring or document cites exists (issue 39 item 4): a file moved or
renamed takes its citations along, or this test names each one left behind, with its file and line.

A citation is a path that starts at one of the repository's top-level folders and ends in a file
suffix (``tests/sandbox/test_runner.py``, ``recipes/quickstart.yaml``, ``distill/eval/run.py``); a glob
(``tests/sandbox/test_*.py``) must match at least one file. Paths under another project's tree that
happen to share a folder name are listed in ``ELSEWHERE`` with whose they are.
"""

import re
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SELF = "tests/test_cited_paths.py"  # not read: its ELSEWHERE names paths that are not here on purpose
SUFFIXES = ("py", "yaml", "yml", "json", "sh", "md", "toml", "txt", "cfg", "jinja", "html")
# The files that cite: source, scripts, configuration and the README (not the data under recipes/assets).
CITING = (".py", ".sh", ".toml", ".yaml", ".yml", ".md", ".cfg", ".txt")
# (citing file, cited path): paths in other projects' repositories, which this checkout does not hold.
ELSEWHERE = {
    ("tests/helpers/peer_cases.py", "tests/test_rewards.py"),  # open-r1's
    ("tests/helpers/peer_cases.py", "tests/test_all.py"),  # Math-Verify's
    ("tests/filters/math/test_answer_cases.py", "tests/test_all.py"),  # Math-Verify's
    ("tests/filters/math/test_answer_cases.py", "tests/test_open_thoughts.py"),  # Math-Verify's
    ("tests/filters/math/test_answer_cases.py", "tests/test_numina_cases.py"),  # Math-Verify's
}


def tracked() -> list[str]:
    out = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True).stdout
    return out.split()


def citations(files: list[str]):
    """(file, line number, cited path) for every citation in the tracked text files."""
    folders = sorted({f.split("/", 1)[0] for f in files if "/" in f and not f.startswith(("runs/", "build/"))})
    pattern = re.compile(
        r"(?<![\w./-])(?:" + "|".join(map(re.escape, folders)) + r")/[\w.*/-]*[\w*]\.(?:" + "|".join(SUFFIXES) + r")\b"
    )
    for name in files:
        if not name.endswith(CITING) or name.startswith(("recipes/assets/", "runs/", "build/")) or name == SELF:
            continue
        path = REPO / name
        if not path.is_file():  # deleted in the working tree, not yet in git
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
            for match in pattern.finditer(line):
                yield name, number, match.group(0)


def test_every_cited_path_exists():
    files = tracked()
    missing = [
        f"{name}:{number}: {cited}"
        for name, number, cited in citations(files)
        if (name, cited) not in ELSEWHERE and not list(REPO.glob(cited))
    ]
    assert not missing, "cited paths that do not exist:\n" + "\n".join(missing)


def test_the_finder_sees_citations_and_the_exceptions_are_still_cited():
    files = tracked()
    found = {(name, cited) for name, _, cited in citations(files)}
    assert ("sandbox/bwrap.py", "tests/sandbox/test_runner.py") in found
    assert ELSEWHERE <= found, f"no longer cited, drop from ELSEWHERE: {sorted(ELSEWHERE - found)}"
