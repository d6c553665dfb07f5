#!/usr/bin/env bash
# The fit -> use loop on a published table, no cluster needed (runs in seconds on a laptop):
# import nccl-tests output, fit α-β, write a profile over the matching base system, compare answers.
set -euo pipefail
cd "$(dirname "$0")/.."
TMP=$(mktemp -d)
FIX=tests/fixtures/nccl_tests

# 2x p4de (16 A100, EFA), published by aws-samples/awsome-distributed-training; --system records the base.
python -m commmodel calibrate import "$FIX/aws-p4de-2n-efa_all_reduce.txt" --out "$TMP/p4de.csv" --system aws-p4de
python -m commmodel calibrate fit "$TMP/p4de.csv" --out "$TMP/p4de.yaml"

for SYSTEM in aws-p4de "$TMP/p4de.yaml"; do
    echo "== $SYSTEM"
    python -m commmodel collective all_reduce --size 2GiB --gpus 16 --system "$SYSTEM"
done
echo "published: 2 GiB all_reduce on 16 ranks, 51406 us, busbw 78.33 GB/s"
