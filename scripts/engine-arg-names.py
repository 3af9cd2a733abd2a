#!/usr/bin/env python3
"""Write gen/engine_arg_names.py: ``vllm.EngineArgs``' field names as the vLLM release constraints-gpu.txt pins
declares them, read from that release's wheel (no GPU, no vLLM install, nothing imported from it):

    pip download vllm==0.31.0 --no-deps -d /tmp/vllm          # the x86_64 wheel, 320.6 MB
    .venv/bin/python scripts/engine-arg-names.py /tmp/vllm/vllm-0.31.0-*.whl > gen/engine_arg_names.py

Run it whenever constraints-gpu.txt's vllm pin moves (tests/gen/test_engine_args_pinned.py fails until then).
"""

import sys
import zipfile
from pathlib import Path

from reasonkit.gen.engine_args import fields_in_source, version_in_source

HEADER = '''"""``vllm.EngineArgs``' field names as vLLM {version} declares them (constraints-gpu.txt's pin: what GPU
runs install): the list a config's ``engine_args`` is checked against (gen/engine_args.py), wherever the recipe
is validated.
Generated, do not edit: scripts/engine-arg-names.py read vllm/engine/arg_utils.py in
{source}.
"""

VLLM_VERSION = "{version}"
NAMES = frozenset("""
'''


def module_text(wheel: Path) -> str:
    """The module's text for a vLLM wheel: its version, then its field names, a hundred characters a line."""
    with zipfile.ZipFile(wheel) as z:
        names = sorted(fields_in_source(z.read("vllm/engine/arg_utils.py").decode()))
        version = version_in_source(z.read("vllm/_version.py").decode())
    if not names:
        sys.exit(f"{wheel}: no class EngineArgs in vllm/engine/arg_utils.py")
    lines, line = [], ""
    for name in names:
        if line and len(line) + 1 + len(name) > 100:
            lines.append(line)
            line = ""
        line = f"{line} {name}" if line else name
    lines.append(line)
    return HEADER.format(version=version, source=wheel.name) + "\n".join(lines) + '\n""".split())\n'


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    sys.stdout.write(module_text(Path(sys.argv[1])))
