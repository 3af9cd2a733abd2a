#!/usr/bin/env bash
# One-command setup of reasonkit on a CUDA machine (Linux, x86_64): a venv in .venv with the project (editable) and
# its `gpu` extra (vLLM, DeepSpeed), pinned by constraints-gpu.txt to versions TRL 1.16 runs with together, then
# flash-attn built against that torch when it can be. Idempotent: a rerun with nothing changed only checks the stamp
# and the imports.
#
# The driver comes first. PyPI's torch 2.13.0 and vLLM 0.31.0 are CUDA 13 builds (torch requires
# cuda-toolkit==13.0.3 and nvidia-*-cu13, vLLM nvidia-cutlass-dsl[cu13]: their wheels' metadata), and CUDA 13 needs an
# NVIDIA driver of the 580 series or newer: on an older one torch sees no GPU. So the driver version is read
# (nvidia-smi) before anything is installed, and an older driver stops setup with what to do: a newer driver, or the
# CUDA 12 builds of the same pair (TORCH_INDEX and VLLM_WHEEL below).
#
# flash-attn is optional: PyPI has only its source, which builds against the local CUDA toolkit (nvcc); where that
# fails setup says so and goes on. Recipes ask for `attn_implementation: auto` (FlashAttention 2 where flash-attn
# imports, SDPA otherwise); one that names flash_attention_2 needs it.
#
#   bash scripts/setup-gpu.sh              # then: .venv/bin/distill run recipes/r1-zero-qwen-7b.yaml --plan
#   bash scripts/setup-gpu.sh --check-driver   # only the driver check: exit 0 when the pinned CUDA runs here
#   FLASH_ATTN=0 bash scripts/setup-gpu.sh # without trying flash-attn
#   MAX_JOBS=8 bash scripts/setup-gpu.sh   # flash-attn compiles with 8 jobs when no prebuilt wheel matches
#   # a driver older than 580: the CUDA 12.9 builds of torch 2.13.0 and vLLM 0.31.0 (needs a 525+ driver)
#   TORCH_INDEX=https://download.pytorch.org/whl/cu129 \
#     VLLM_WHEEL=vllm-0.31.0+cu129-cp38-abi3-manylinux_2_28_x86_64.whl bash scripts/setup-gpu.sh
#   SKIP_DRIVER_CHECK=1 bash scripts/setup-gpu.sh  # where the driver works but nvidia-smi is not on PATH
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=${VENV:-.venv}
PYTHON=${PYTHON:-python3}
FLASH_ATTN=${FLASH_ATTN:-1}
TORCH_INDEX=${TORCH_INDEX:-}  # a PyTorch wheel index (.../whl/cu129): torch from there instead of PyPI's CUDA 13 build
VLLM_WHEEL=${VLLM_WHEEL:-}    # with TORCH_INDEX: the vLLM 0.31.0 wheel built for the same CUDA (PyPI's is CUDA 13)
stamp="$VENV/.reasonkit-setup-gpu"

# The oldest driver each CUDA major runs on: 13.0 needs 580; CUDA 12 wheels run on 525.60.13 and newer (CUDA 12's
# minor-version compatibility; 12.9's own minimum is 575).
CUDA13_DRIVER=580
CUDA12_DRIVER=525

driver_check() {
  local need=$CUDA13_DRIVER what="torch 2.13.0 and vLLM 0.31.0 from PyPI are CUDA 13 builds"
  if [ -n "$TORCH_INDEX" ]; then
    need=$CUDA12_DRIVER what="torch from $TORCH_INDEX (a CUDA 12 index)"
    if [ -z "$VLLM_WHEEL" ]; then
      echo "setup: TORCH_INDEX is set but VLLM_WHEEL is not: PyPI's vLLM 0.31.0 is a CUDA 13 build and would" \
        "not load with a CUDA 12 torch; set VLLM_WHEEL to the vLLM 0.31.0 wheel built for that CUDA (its GitHub" \
        "release, vllm-0.31.0+cu129-cp38-abi3-manylinux_2_28_x86_64.whl)" >&2
      return 1
    fi
  fi
  [ "${SKIP_DRIVER_CHECK:-0}" = 1 ] && return 0
  if ! command -v nvidia-smi >/dev/null; then
    echo "setup: nvidia-smi not found: no NVIDIA driver here to read ($what, which need driver $need or newer)." \
      "This script sets up a CUDA machine (scripts/setup-cpu.sh sets up a CPU one); where the driver works but" \
      "nvidia-smi is not on PATH: SKIP_DRIVER_CHECK=1" >&2
    return 1
  fi
  local version
  if ! version=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>&1 | head -1) \
      || ! [[ "$version" =~ ^([0-9]+)\.[0-9] ]]; then
    echo "setup: nvidia-smi could not read the driver version: ${version:-no output}" >&2
    return 1
  fi
  local major=${BASH_REMATCH[1]}
  if [ "$major" -lt "$need" ]; then
    echo "setup: NVIDIA driver $version is older than $need: $what, which need driver $need or newer (on this" \
      "one torch would see no GPU). Either install a driver of the $need series or newer and rerun, or, on a" \
      "driver of $CUDA12_DRIVER or newer, use the CUDA 12.9 builds of the same pair (torch 2.13.0 from PyTorch's" \
      "cu129 index, vLLM 0.31.0's +cu129 wheel from its GitHub release):" \
      "TORCH_INDEX=https://download.pytorch.org/whl/cu129 VLLM_WHEEL=<path or URL of" \
      "vllm-0.31.0+cu129-cp38-abi3-manylinux_2_28_x86_64.whl> bash scripts/setup-gpu.sh. Nothing was installed." >&2
    return 1
  fi
  echo "setup: NVIDIA driver $version (>= $need: $what)"
}

if [ "${1:-}" = --check-driver ]; then
  driver_check
  exit
fi
driver_check

want=$(cat pyproject.toml constraints-gpu.txt scripts/setup-gpu.sh | sha256sum | cut -c1-16)
want="$want-$FLASH_ATTN-$TORCH_INDEX-$VLLM_WHEEL"

check() {  # $1: 1 when flash-attn was installed
  local modules="vllm, deepspeed, trl, reasonkit"
  [ "$1" = 1 ] && modules="$modules, flash_attn"
  "$VENV/bin/python" -c "import $modules, torch; assert torch.cuda.is_available(), 'torch sees no CUDA GPU'; \
print('setup: ok: torch', torch.__version__, '| vllm', vllm.__version__, '| trl', trl.__version__, \
'| deepspeed', deepspeed.__version__, '|', torch.cuda.device_count(), 'GPU(s)')"
  # the vLLM that TRL's GRPOTrainer drives: the same check a GPU GRPO run makes before it starts
  "$VENV/bin/python" -c "from reasonkit.distill.rl.vllm_support import unsupported_reason as u; r = u(); assert r is None, r"
}

# the stamp: its first line what was set up, its second whether flash-attn was installed
if [ -f "$stamp" ] && [ "$(head -1 "$stamp")" = "$want" ] \
    && check "$(sed -n 's/^flash_attn=//p' "$stamp")" 2>/dev/null; then
  exit 0
fi

[ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV"
pip=("$VENV/bin/python" -m pip --disable-pip-version-check -q)

# torch first and pinned (vLLM 0.31.0 requires exactly 2.13.0): PyPI's Linux wheel is the CUDA 13 build
if [ -n "$TORCH_INDEX" ]; then
  "${pip[@]}" install -c constraints-gpu.txt --index-url "$TORCH_INDEX" torch torchvision torchaudio
  "${pip[@]}" install -c constraints-gpu.txt "$VLLM_WHEEL"
else
  "${pip[@]}" install -c constraints-gpu.txt torch torchvision torchaudio
fi
"${pip[@]}" install -c constraints-gpu.txt -e ".[gpu,test,ray]"
flash=0
if [ "$FLASH_ATTN" = 1 ]; then
  # flash-attn's build imports torch, so it cannot build in pip's isolated environment
  if "${pip[@]}" install -c constraints-gpu.txt --no-build-isolation flash-attn; then
    flash=1
  else
    echo "setup: flash-attn did not install (above; it compiles with this machine's nvcc when no prebuilt wheel" \
      "matches): going on without it. Recipes with attn_implementation auto train on SDPA; one that names" \
      "flash_attention_2 needs it (retry with a CUDA toolkit matching torch's: rm $stamp && bash $0)" >&2
  fi
fi

# nothing is removed on purpose here (unlike setup-cpu.sh), so any pip check complaint is a real conflict
"$VENV/bin/python" -m pip check >&2 || { echo "setup: pip check found conflicts (above)" >&2; exit 1; }
check "$flash"
printf '%s\nflash_attn=%s\n' "$want" "$flash" > "$stamp"
