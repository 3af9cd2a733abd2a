"""Helpers of the tool-loop tests: tools to register, a scripted backend for the loop's logic, and
the tiny tool-using models."""

import json
import threading
import time

from reasonkit.gen.backend import Completion

CALL = '<tool_call>\n{{"name": "{name}", "arguments": {args}}}\n</tool_call>'


def call_text(name: str, **args) -> str:
    return CALL.format(name=name, args=json.dumps(args))


def make_echo():
    def echo(text: str) -> str:
        """Repeat a text in capitals.

        Args:
            text: what to repeat.
        """
        if text == "boom":
            raise RuntimeError("the echo broke")
        return text.upper()

    return echo


def make_slow(delay: float = 0.2):
    """A tool that sleeps (a search over a big index, a python call): what the loop overlaps."""
    running = {"now": 0, "most": 0}
    lock = threading.Lock()

    def slow(text: str) -> str:
        """Wait, then repeat a text.

        Args:
            text: what to repeat.
        """
        with lock:
            running["now"] += 1
            running["most"] = max(running["most"], running["now"])
        time.sleep(delay)
        with lock:
            running["now"] -= 1
        return text

    slow.running = running
    return slow


def lookup_script(messages, request):
    """Call echo with the question, then answer with the observation: two turns."""
    last = messages[-1]
    if last["role"] == "tool":
        return f"The answer is {last['content']}.", "stop"
    return "Let me check." + "\n" + call_text("echo", text=last["content"].split("\n")[0]), "stop"


class ScriptedBackend:
    """Each turn is ``script(messages, request) -> (text, finish_reason)``; turns are taken in batches of
    ``batch`` (or fewer when the source has nothing ready), like a batching engine. Records every request."""

    name = "scripted"

    def __init__(self, script, batch: int = 4, tokens: int = 5):
        self.script, self.batch, self.tokens = script, batch, tokens
        self.requests = []
        self.lock = threading.Lock()

    def describe(self):
        return {"backend": "scripted"}

    def close(self):
        pass

    def generate(self, requests):
        held = []
        for request in requests:
            if request is not None:
                held.append(request)
                with self.lock:
                    self.requests.append(request)
            if held and (request is None or len(held) >= self.batch):
                yield from self._answer(held)
                held = []
        yield from self._answer(held)

    def _answer(self, held):
        for r in held:
            text, finish = self.script(list(r.messages), r)
            yield Completion(r.id, 0, text, finish, 10 * len(r.messages), self.tokens)
