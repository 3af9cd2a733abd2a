"""The hub tests' stage directories (tests/helpers/hub.py builds them), as the fixture ``stages``."""

from ..helpers.hub import stages  # noqa: F401 (a fixture: pytest finds it here by name)
