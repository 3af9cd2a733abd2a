"""The ``python`` tool: run the model's program in the sandbox (``reasonkit.sandbox``), show what it printed.

A failed run raises, so ``ToolBox.call`` reports it (``timeout`` for the wall clock or the CPU limit,
``tool_error`` for any other limit, a crash or a non-zero exit) and TRL's ``GRPOTrainer(tools=...)``,
which calls the tool directly, counts a tool failure; either way the model reads the message, with
what the program printed before it failed.

>>> python = make_python(timeout=1)
>>> python("print(6 * 7)")
'42'
>>> from reasonkit.gen.tools.base import ToolBox
>>> ToolBox([python]).call("python", {"code": "while True: pass"}).error
'timeout'
"""

from __future__ import annotations

from collections.abc import Callable

from reasonkit.gen.tools.base import BadArguments


class ProgramFailed(RuntimeError):
    """The program crashed, exited non-zero or hit a limit other than time (ToolBox: ``tool_error``)."""


def clip(text: str, limit: int) -> str:
    """``text`` cut to about ``limit`` characters, keeping its head and its tail (a traceback's last
    line is what matters).

    >>> clip("a" * 10 + "b" * 10, 10)
    'aaaaa\\n[... 10 characters cut ...]\\nbbbbb'
    """
    if len(text) <= limit:
        return text
    head, tail = limit // 2, limit - limit // 2
    return f"{text[:head]}\n[... {len(text) - limit} characters cut ...]\n{text[-tail:]}"


def make_python(timeout: float = 10.0, memory_mb: int = 1024, max_output_chars: int = 2000) -> Callable[[str], str]:
    """The ``python`` tool with these limits: ``timeout`` wall-clock seconds (and as many CPU
    seconds) per call, ``memory_mb`` of address space, an observation of at most about
    ``max_output_chars`` characters (stdout and stderr each)."""
    from reasonkit import sandbox

    limits = sandbox.Limits(cpu_seconds=timeout, memory_mb=memory_mb, output_bytes=max(max_output_chars * 64, 1 << 20))

    def python(code: str) -> str:
        """Run a Python program in a fresh, offline sandbox and return what it printed.

        Nothing carries over between calls; print every value you want to see.

        Args:
            code: A complete Python program.
        """
        if not code.strip():
            raise BadArguments("code is empty")
        # -u: what it printed before a timeout or a crash reaches the model, not lost in a buffer.
        result = sandbox.run(argv=["python", "-u", "main.py"], files={"main.py": code}, timeout=timeout, limits=limits)
        shown = clip(result.stdout.rstrip("\n"), max_output_chars)
        if result.stderr.strip():
            shown += ("\n" if shown else "") + "[stderr]\n" + clip(result.stderr.rstrip("\n"), max_output_chars)
        if result.limit in ("wall", "cpu"):
            what = "wall-clock" if result.limit == "wall" else "CPU"
            raise TimeoutError(
                f"the program ran past its {timeout:g} s {what} limit and was stopped\n{shown}".rstrip()
            )
        if result.limit:
            raise ProgramFailed(f"the program hit its {result.limit.replace('_', ' ')} limit\n{shown}".rstrip())
        if result.returncode != 0:
            status = f"exit code {result.returncode}" if result.signal is None else f"killed by {result.signal}"
            raise ProgramFailed(f"{status}\n{shown}".rstrip())
        return shown or "(no output)"

    return python
