#!/usr/bin/env bash
# Every GPU measurement of this build in one run, on a machine with an NVIDIA GPU.
#
#     bash benchmarks/gpu_run_all.sh OUT
#
# Wheels of what the machine lacks (jupyter_server, ipykernel, SQLAlchemy...) may wait in
# .whl/: they are installed into /tmp/site first. Each part has its own time limit, so that
# one part that hangs leaves the others their time; everything lands under OUT.
set -u
OUT=${1:?usage: gpu_run_all.sh OUT}
mkdir -p "$OUT"
exec > >(tee "$OUT/log.txt") 2>&1
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD
if compgen -G ".whl/*.whl" >/dev/null; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/site .whl/*.whl || exit 1
    export PYTHONPATH=/tmp/site:$PWD
fi
date -u
nvidia-smi --query-gpu=name,driver_version,memory.total,power.limit --format=csv
python3 -c "import sys, torch, pynvml; print(sys.version.split()[0], torch.__version__, torch.version.cuda, getattr(pynvml, '__version__', '?'))"
git log -1 --format='build %h %s' 2>/dev/null || true

t=$SECONDS
timeout 200 python3 benchmarks/gpu_kernels_live.py --out-dir "$OUT" --seconds 60
echo "== kernels-live rc=$? in $((SECONDS - t)) s"
t=$SECONDS
timeout 130 python3 benchmarks/gpu_kernels_live.py --out-dir "$OUT" --seconds 30 --pid-namespace --skip-alloc
echo "== kernels-live --pid-namespace rc=$? in $((SECONDS - t)) s"
t=$SECONDS
timeout 220 python3 benchmarks/bench_magic.py --cuda --repeat 9 --out "$OUT/magic.json" \
    | grep -v '^ ' | head -40
echo "== bench_magic rc=${PIPESTATUS[0]} in $((SECONDS - t)) s"
