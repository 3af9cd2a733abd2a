"""reasonkit.gen.tools: tools a model calls between turns, and the multi-turn loop.

A tool is a plain Python callable with type hints and a Google-style docstring, the form TRL's
``GRPOTrainer(tools=...)`` and ``transformers``' chat templates (``apply_chat_template(tools=...)``)
turn into a JSON schema. ``gen.tools.base`` runs calls and turns every failure into an observation;
``load_tools("search,python", corpus=...)`` builds the shipped ones.
"""

from reasonkit.gen.tools.base import TOOL_NAMES, Observation, ToolBox, load_tools

__all__ = ["TOOL_NAMES", "Observation", "ToolBox", "load_tools"]
