"""What a stage that will run model programs does before it reads its input, and the ``--sandbox``
option that chooses the mode (filter --verifier code, eval --verifier code, generate/eval --tools
python, GRPO --reward code or --tools python).

One trivial program runs first, the way the model's will: a machine where the sandbox cannot start is
one error (exit 2, nothing written) naming the reason and the fix, not a column of ``unverifiable``
rows. ``--sandbox none`` (or a recipe's ``sandbox: none``) is the only way to run without namespaces;
it warns, and the mode is recorded (manifest, report, the rows' ``isolation``, the Hub card).
"""

from __future__ import annotations

import os

import click

from reasonkit.errors import UserError
from reasonkit.sandbox.host import SandboxError
from reasonkit.sandbox.modes import ENV_MODE, isolation_of
from reasonkit.sandbox.runner import preflight

CHOICES = ("auto", "none")


def require_sandbox(what: str) -> str:
    """The mode the stage's programs will run in, after a trivial one ran; UserError (exit 2) if none can."""
    try:
        return preflight()
    except SandboxError as e:
        raise UserError(f"{what}: {e}") from None


def sandbox_record(mode: str | None) -> dict:
    """What a stage's report and manifest say of how its programs ran: the mode and what a run in it
    isolates here (``no-cgroup`` where the machine gives no cgroup: memory and CPU capped per process only)."""
    return {"sandbox": mode, "sandbox_isolation": list(isolation_of(mode))} if mode else {}


def use_mode(value: str | None) -> str | None:
    """Set the mode for every process of this run (threads, Ray workers, accelerate's ranks read it
    from the environment at call time); returns the previous value, for :func:`restore_mode`."""
    previous = os.environ.get(ENV_MODE)
    if value is not None:
        if value not in CHOICES:
            raise UserError(f"sandbox: {value!r}: expected one of {', '.join(CHOICES)}")
        os.environ[ENV_MODE] = value
    return previous


def restore_mode(previous: str | None) -> None:
    if previous is None:
        os.environ.pop(ENV_MODE, None)
    else:
        os.environ[ENV_MODE] = previous


def _apply(ctx: click.Context, param: click.Parameter, value: str | None) -> None:
    if value is not None:
        previous = use_mode(value)
        ctx.call_on_close(lambda: restore_mode(previous))


def sandbox_option(command):
    """``--sandbox auto|none`` on a command whose stage may run model programs."""
    return click.option(
        "--sandbox",
        type=click.Choice(CHOICES),
        default=None,
        expose_value=False,
        callback=_apply,
        help="How model programs run: auto (the strongest isolation here; refuse if there is none) or none "
        "(no namespaces: the programs run with your rights; recorded as isolation 'no-namespaces'). [auto]",
    )(command)
