"""The python tool as a model meets it: through ``load_tools``/``ToolBox.call``, really running the code.
Adversarial programs come back as error observations within their limits; nothing crashes the caller."""

import json
import secrets
import time
from pathlib import Path

import pytest

from reasonkit import sandbox
from reasonkit.gen.tools.base import ToolBox, load_tools
from reasonkit.gen.tools.python import make_python

ISOLATION = sandbox.isolation_of(sandbox.available_mode())
REPO = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def box() -> ToolBox:
    return load_tools("python", timeout=3.0)  # a slow CI box still starts Python well within it


def call(box: ToolBox, code: str):
    return box.call("python", json.dumps({"code": code}))


def test_schema_is_what_the_chat_template_shows():
    (schema,) = load_tools("python").schemas()
    fn = schema["function"]
    assert fn["name"] == "python" and fn["parameters"]["required"] == ["code"]
    assert fn["parameters"]["properties"]["code"]["type"] == "string" and "Python" in fn["description"]


def test_stdout_is_the_observation(box):
    obs = call(box, "import math\nprint(math.comb(10, 3))\nprint('done')")
    assert (obs.content, obs.error) == ("120\ndone", None)
    assert call(box, "x = 1").content == "(no output)"


def test_stderr_tail_comes_with_the_output(box):
    obs = call(box, "import sys\nprint('out')\nprint('warned', file=sys.stderr)")
    assert obs.error is None and obs.content == "out\n[stderr]\nwarned"


@pytest.mark.parametrize(
    "code, error, says",
    [
        ("print(1 / 0)", "tool_error", "ZeroDivisionError"),
        ("def f(:\n  pass", "tool_error", "SyntaxError"),
        ("import sys\nsys.exit(4)", "tool_error", "exit code 4"),
        ("while True:\n    pass", "timeout", "wall-clock limit"),
        ("x = bytearray(10 * 1024 ** 3)", "tool_error", "memory limit"),
        ("f = open('big', 'wb')\nfor _ in range(10240):\n    f.write(b'x' * (1 << 20))", "tool_error", "file size"),
        ("", "bad_arguments", "empty"),
    ],
    ids=["runtime", "syntax", "exit", "loop", "alloc-10gb", "write-10gb", "empty"],
)
def test_failures_are_error_observations(box, code, error, says):
    started = time.monotonic()
    obs = call(box, code)
    assert obs.error == error and says in obs.content
    assert time.monotonic() - started < 8


def test_what_it_printed_before_the_timeout_is_shown(box):
    obs = call(box, "print('step 1')\nwhile True:\n    pass")
    assert obs.error == "timeout" and obs.content.endswith("stopped\nstep 1")


@pytest.mark.skipif("uid-drop" not in ISOLATION and "userns" not in ISOLATION, reason="no process limit here")
def test_fork_bomb(box):
    started = time.monotonic()
    obs = call(box, "import os\nwhile True:\n    os.fork()")
    assert obs.error in ("tool_error", "timeout") and time.monotonic() - started < 10


@pytest.mark.skipif("netns" not in ISOLATION, reason="no network namespace here")
def test_socket_is_an_error_observation(box):
    obs = call(box, "import socket\nsocket.create_connection(('1.1.1.1', 443), timeout=2)")
    assert obs.error == "tool_error" and "Network is unreachable" in obs.content


def test_write_outside_its_directory(box):
    target = REPO / f"escape-{secrets.token_hex(4)}"
    try:
        obs = call(box, f"open({str(target)!r}, 'w').write('x')\nprint('written')")
        assert not target.exists()
        if "minroot" in ISOLATION and not str(REPO).startswith("/tmp/"):  # the repository is not in the view
            # (its skeleton is read-only; a clone under /tmp has it on the private /tmp, where a write vanishes)
            assert obs.error == "tool_error" and (
                "Read-only file system" in obs.content or "FileNotFoundError" in obs.content
            )
    finally:
        target.unlink(missing_ok=True)


def test_parent_environment_is_not_visible(box, monkeypatch):
    token = f"hf_{secrets.token_hex(8)}"
    monkeypatch.setenv("HF_TOKEN", token)
    monkeypatch.setenv("OPENAI_API_KEY", token + "k")
    obs = call(box, "import os\nprint(sorted(os.environ))\nprint(os.environ.get('HF_TOKEN'))")
    assert obs.error is None and "HF_TOKEN" not in obs.content and token not in obs.content


def test_long_output_is_clipped_for_the_model():
    python = make_python(timeout=5, max_output_chars=300)
    obs = ToolBox([python]).call("python", {"code": "for i in range(100000):\n    print(i)"})
    assert obs.error is None and len(obs.content) < 400
    assert obs.content.startswith("0\n1\n") and obs.content.endswith("99999") and "characters cut" in obs.content


def test_the_tool_is_a_plain_callable_for_trl():
    # GRPOTrainer(tools=[python]) calls it directly: a value on success, an exception on failure.
    assert make_python(timeout=20)("print(2 ** 10)") == "1024"
    with pytest.raises(TimeoutError):
        make_python(timeout=1)("import time\ntime.sleep(30)")
