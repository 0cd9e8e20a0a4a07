#!/usr/bin/env bash
# The cu12/cu13 cleanup (a CUDA 12 cuDNN, NCCL, cuSPARSELt and NVSHMEM installed over a CUDA
# 13 torch, then taken out again), the plain way and the cudatx way, with the
# real wheels: torch 2.14.1 (CUDA 13) and the cu12 cuDNN, NCCL, cuSPARSELt and NVSHMEM
# wheels installed over it with --no-deps.
#
#   bash examples/cu12-cu13-cleanup/run.sh [WORKDIR]
#
# Needs: python3 with cudatx installed (python3 -m pip install .), pip able to install
# torch==2.14.1 and download the nvidia-*-cu12 wheels, and about 12 GB of disk in WORKDIR.
set -euo pipefail
WORK=${1:-$(mktemp -d)}
UV=$(python3 -c 'from uv import find_uv_bin; print(find_uv_bin())')
CU12="nvidia-cudnn-cu12 nvidia-nccl-cu12 nvidia-cusparselt-cu12 nvidia-nvshmem-cu12"
say() { printf '\n$ %s\n' "$*"; }

mkdir -p "$WORK"
python3 -m venv "$WORK/env"
"$WORK/env/bin/python" -m pip install -q torch==2.14.1
python3 -m pip download -q --no-deps -d "$WORK/wheels" $CU12
"$UV" pip install -q --python "$WORK/env" --no-deps "$WORK"/wheels/*.whl
cp -a "$WORK/env" "$WORK/plain"

echo "== The plain way: uninstall every cu12 package"
say uv pip uninstall $CU12
"$UV" pip uninstall --python "$WORK/plain" $CU12 2>&1
say python -c "import torch"
"$WORK/plain/bin/python" -c "import torch" 2>&1 | tail -1 || true

echo
echo "== The cudatx way"
say cudatx remove "'nvidia-*-cu12'" --dry-run
python3 -m cudatx remove 'nvidia-*-cu12' --dry-run -p "$WORK/env" 2>&1 || true
say cudatx remove "'nvidia-*-cu12'" --repair --yes --verify "\"python -c 'import torch'\""
python3 -m cudatx remove 'nvidia-*-cu12' --repair --yes \
    --verify "python -c 'import torch'" -p "$WORK/env" 2>&1
say python -c "import torch; print(torch.__version__)"
"$WORK/env/bin/python" -c "import torch; print(torch.__version__)"
say cudatx doctor
python3 -m cudatx doctor -p "$WORK/env" 2>&1 | tail -1
say cudatx history
python3 -m cudatx history -p "$WORK/env" 2>&1 | cut -c1-80
say cudatx rollback --yes
python3 -m cudatx rollback --yes -p "$WORK/env" 2>&1
say cudatx remove "'nvidia-*-cu12'" --dry-run "   # back where we started"
python3 -m cudatx remove 'nvidia-*-cu12' --dry-run -p "$WORK/env" 2>&1 | tail -2 || true
rm -rf "$WORK/plain"
