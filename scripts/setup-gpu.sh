#!/usr/bin/env bash
# One-command setup of reasonkit on a CUDA machine (Linux, x86_64, NVIDIA driver for CUDA 12.8+): a venv in
# .venv with the project (editable) and its `gpu` extra (vLLM, DeepSpeed), pinned by constraints-gpu.txt to
# versions TRL 1.16 runs with together, then flash-attn built against that torch. Idempotent: a rerun with
# nothing changed only checks the stamp and the imports.
#
#   bash scripts/setup-gpu.sh              # then: .venv/bin/distill run recipes/r1-zero-qwen-7b.yaml --plan
#   FLASH_ATTN=0 bash scripts/setup-gpu.sh # without flash-attn (r1-distill-qwen-1.5b.yaml's SFT needs it)
#   MAX_JOBS=8 bash scripts/setup-gpu.sh   # flash-attn compiles with 8 jobs when no prebuilt wheel matches
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=${VENV:-.venv}
PYTHON=${PYTHON:-python3}
FLASH_ATTN=${FLASH_ATTN:-1}
stamp="$VENV/.reasonkit-setup-gpu"
want=$(cat pyproject.toml constraints-gpu.txt scripts/setup-gpu.sh | sha256sum | cut -c1-16)-$FLASH_ATTN
modules="vllm, deepspeed, trl, reasonkit"
[ "$FLASH_ATTN" = 1 ] && modules="$modules, flash_attn"

check() {
  "$VENV/bin/python" -c "import $modules, torch; assert torch.cuda.is_available(), 'torch sees no CUDA GPU'; \
print('setup: ok: torch', torch.__version__, '| vllm', vllm.__version__, '| trl', trl.__version__, \
'| deepspeed', deepspeed.__version__, '|', torch.cuda.device_count(), 'GPU(s)')"
  # the vLLM that TRL's GRPOTrainer drives: the same check a GPU GRPO run makes before it starts
  "$VENV/bin/python" -c "from reasonkit.distill.rl.vllm_support import unsupported_reason as u; r = u(); assert r is None, r"
}

if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && check 2>/dev/null; then
  exit 0
fi

[ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV"
pip=("$VENV/bin/python" -m pip --disable-pip-version-check -q)

# torch first and pinned (vLLM 0.31.0 requires exactly 2.13.0): PyPI's Linux wheel is the CUDA build.
"${pip[@]}" install -c constraints-gpu.txt torch torchvision torchaudio
"${pip[@]}" install -c constraints-gpu.txt -e ".[gpu,test,ray]"
if [ "$FLASH_ATTN" = 1 ]; then
  # flash-attn's build imports torch, so it cannot build in pip's isolated environment
  "${pip[@]}" install -c constraints-gpu.txt --no-build-isolation flash-attn
fi

# nothing is removed on purpose here (unlike setup-cpu.sh), so any pip check complaint is a real conflict
"$VENV/bin/python" -m pip check >&2 || { echo "setup: pip check found conflicts (above)" >&2; exit 1; }
check
echo "$want" > "$stamp"
