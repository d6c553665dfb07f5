#!/usr/bin/env bash
# Calibrate one node: sweep every primitive on all local GPUs, fit, write a profile, use it.
#
#   bash examples/torchrun_one_node.sh dgx-h100 8        # base profile, GPUs in the node
#
# On a CPU-only machine it runs with gloo against the CPU host profile and fits gloo's costs (no GEMM step: a CPU
# rank's GEMM rate is not a GPU's matmul efficiency):
#
#   bash examples/torchrun_one_node.sh cpu-host 2
set -euo pipefail
BASE=${1:-dgx-h100}
NPROC=${2:-8}
OUT=${OUT:-calib-$(hostname)-$(date +%Y%m%d)}

# 1) Measure (rank 0 appends each point to the CSV as soon as it has it; --resume continues a cut run).
torchrun --standalone --nproc_per_node "$NPROC" -m commmodel calibrate run \
    --out "$OUT.csv" --system "$BASE" --ops all --min-size 8B --max-size 1GiB --factor 2 \
    --warmup 5 --iters 20 --timeout 300s --resume

# Optional: force NCCL's algorithm/protocol so ring and tree are fitted apart (appends to the same file).
# torchrun --standalone --nproc_per_node "$NPROC" -m commmodel calibrate run --out "$OUT.csv" \
#     --ops all_reduce --algo tree --resume

# 2) The GEMMs of the layout you plan to run (hidden 8192, TP 8, 4096-token micro-batches).
COMPUTE=""; LIBRARY="--library gloo"
if [ "$BASE" != cpu-host ]; then
    python -m commmodel calibrate compute --out "$OUT-compute.csv" --hidden 8192 --tp 8 --seq-len 4096 --resume
    COMPUTE="--compute $OUT-compute.csv"; LIBRARY=""
fi

# 3) Fit α and B per group, write the calibrated profile, and show the check against the measurements.
python -m commmodel calibrate fit "$OUT.csv" --base "$BASE" $COMPUTE --out "$OUT.yaml"

# 4) Use it anywhere a system name goes.
python -m commmodel profiles show "$OUT.yaml"
python -m commmodel collective all_reduce --size 1GiB --gpus "$NPROC" --system "$OUT.yaml" $LIBRARY
