"""`distill run` keeps library logs off the terminal: they go to OUT/<step>/run.log unless
--verbose; a failing step still shows its error line and names the log (issue 14, "Also")."""

import os
import subprocess
import sys

import pytest
import yaml

LIBRARY_LINES = ("VLLM-INFO-LINE", "VLLM-WARNING-LINE", "TRANSFORMERS-WARNING-LINE", "LIBRARY-USERWARNING-LINE")
PROBE = """
import sys
from reasonkit import stages
stages.STAGES["noisy"] = stages.StageSpec("reasonkit.tests.helpers.noisy_stage:NoisyConfig",
                                           "reasonkit.tests.helpers.noisy_stage:run_noisy")
from reasonkit.cli import main
sys.argv = ["distill", "run", *sys.argv[1:]]
main()
"""


def distill_run(tmp_path, *flags, fail=False):
    recipe = tmp_path / "r.yaml"
    recipe.write_text(
        yaml.safe_dump(
            {
                "out": str(tmp_path / "run"),
                "report": False,
                "steps": [{"name": "loud", "stage": "noisy", "with": {"fail": fail}}],
            }
        )
    )
    # A user's shell, not this test process's: importing TRL (the train tests do) sets VLLM_LOGGING_LEVEL=ERROR.
    env = {k: v for k, v in os.environ.items() if k != "VLLM_LOGGING_LEVEL"}
    return subprocess.run(
        [sys.executable, "-c", PROBE, str(recipe), *flags], capture_output=True, text=True, timeout=300, env=env
    )


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """The three runs (quiet, failing, verbose), made once: each imports vLLM (several seconds)."""
    made = {}
    for name, flags, fail in (("quiet", (), False), ("failing", (), True), ("verbose", ("--verbose",), False)):
        tmp = tmp_path_factory.mktemp(name)
        made[name] = (distill_run(tmp, *flags, fail=fail), tmp / "run" / "loud" / "run.log")
    return made


@pytest.mark.slow
def test_library_logs_go_to_the_steps_log_not_the_terminal(runs):
    out, log = runs["quiet"]
    assert out.returncode == 0, out.stderr[-3000:]
    terminal = out.stdout + out.stderr
    assert "[done] loud" in out.stdout and "STEP-OWN-LINE" in out.stderr
    text = log.read_text()
    for line in LIBRARY_LINES:
        assert line in text, f"{line} not in {log}"
        assert line not in terminal, f"{line} reached the terminal:\n{terminal}"


def test_a_failing_step_shows_its_error_and_names_the_log(runs):
    out, log = runs["failing"]
    assert out.returncode == 2, out.stderr[-3000:]
    assert f"[fail] loud: library logs in {log}" in out.stdout
    assert "error: noisy: FAILED-ON-PURPOSE" in out.stderr.splitlines()
    assert "VLLM-ERROR-LINE" in out.stderr, "a library's ERROR line still reaches the terminal"
    assert "VLLM-ERROR-LINE" in log.read_text() and "VLLM-INFO-LINE" not in out.stdout + out.stderr
    assert "Traceback" not in out.stderr


def test_verbose_leaves_library_logs_on_the_terminal(runs):
    out, log = runs["verbose"]
    assert out.returncode == 0, out.stderr[-3000:]
    terminal = out.stdout + out.stderr
    for line in LIBRARY_LINES:
        assert line in terminal, f"{line} missing with --verbose:\n{terminal}"
    assert "TRANSFORMERS-WARNING-LINE" in out.stderr
    assert not log.exists() or not any(line in log.read_text() for line in LIBRARY_LINES)
