"""Upper bounds on what a user may ask for, one owner for every entry point (CLI options, query, model counts).

They exist so that a typo (an extra zero, ``1e30``) ends in one line instead of a hang, a MemoryError or an
answer about a cluster that cannot exist. Each bound is far beyond anything built, so no real question is refused:

- GPUs in a job: 2^24 = 16,777,216. The largest published training clusters are ~10^5 GPUs (Meta's two 24k-GPU
  clusters, 2024; xAI Colossus ~10^5-2·10^5 GPUs, 2024-25) and announced plans reach ~10^6; 2^24 leaves 16x
  headroom over a million while keeping every count exact in float64 and int64 products of layouts.
- GPUs per node: 1024. Today's largest NVLink domain is 576 GPUs (NVIDIA GB200/Rubin NVL576 roadmap, GTC 2025);
  8 is the common server.
- NICs per node: 1024. Servers carry 1-16 scale-out NICs (DGX H100: 8 ConnectX-7 for compute); a rack-scale
  "node" of 72-576 GPUs with one NIC each still fits.
- Parameters: 10^15 (1000T). The largest published models are ~1.6·10^12 (Switch-C, Fedus et al. 2021) and
  ~1.8·10^12 (reported GPT-4); 10^15 is 500x beyond, and the width search of
  :func:`commmodel.workload.presets.shape_for_params` stays under a second there. A model whose shape flags
  (``--layers``, ``--hidden``, ``--vocab`` ...) push it past this bound is refused too.
- Sequence length and batch (sequences per step or micro-batch): 10^8. Published contexts reach 10^7 tokens
  (Llama 4 Scout, 10M, Meta 2025) and global batches ~2·10^3-10^4 sequences (Llama 3 405B: 16M tokens of 8192,
  Dubey et al. 2024 §3.4); 10^8 is 10x and 10^4x beyond. The query parser reads the same bounds.
- Message size: 10^18 bytes (1 EB), ~10^6 times an HGX B300's 2.3 TB of HBM; a size past it is a typo. A gradient
  bucket (``--bucket-size``) is a message of the data-parallel reduction and takes the same bound, and at least a byte.
- A parallel degree (``--tp``, ``--pp``, ``--cp``, ``--ep``, ``--etp``, ``--vpp``, ``--max-tp``) and a count of ranks
  or nodes: at most the GPUs of a job, 2^24, so a typo (2^70) is one line, not an int64 overflow in the layout arrays.
- Benchmark iterations (``calibrate run|compute --iters/--warmup``): 10^4 (see :data:`MAX_BENCH_ITERS`).
- Top-k kept fraction (``--topk-fraction``): at least 10^-6 (see :data:`MIN_TOPK_FRACTION`).
"""

from __future__ import annotations

from commmodel.errors import CommModelError

MAX_GPUS = 2**24
"""Most GPUs in one job or communicator."""

MAX_GPUS_PER_NODE = 1024
"""Most GPUs used per node."""

MAX_NICS_PER_NODE = 1024
"""Most scale-out NICs per node."""

MIN_NUM_PARAMS = 1e6
"""Fewest parameters of a shape derived from a bare count (a transformer block needs ~1M)."""

MAX_NUM_PARAMS = 1e15
"""Most parameters of a model given by a bare count or reshaped by flags."""

MAX_SEQ_LEN = 100_000_000
"""Most tokens per sequence."""

MAX_BATCH = 100_000_000
"""Most sequences per step or per micro-batch."""

MAX_SIZE_BYTES = 1e18
"""Largest message size."""

MAX_BENCH_ITERS = 10_000
"""Most timed (``--iters``) or untimed (``--warmup``) iterations per point of ``calibrate run`` and per GEMM of
``calibrate compute``. nccl-tests defaults to ``-n 20 -w 5`` (nccl-tests src/common.cu: ``iters = 20``,
``warmup_iters = 5``; ``calibrate run`` takes the same) and calibration runs use tens to hundreds. 10^4 is 500x the
default and already ~45 s per point for a 1 GiB all-reduce on 8 H100s (~4.5 ms each at ~420 GB/s busbw), so a sweep
of ~30 sizes stays within an hour; a larger count (an extra zero, 2^70) would not end."""

MIN_TOPK_FRACTION = 1e-6
"""Smallest fraction of gradient elements top-k compression may keep (``--topk-fraction``). Published top-k keeps
0.1% (Deep Gradient Compression, Lin et al. 2018: 99.9% sparsity) to 1% (Aji & Heafield 2017); 10^-6 is 1000x below
that, a thousand values of a 1B-parameter model. Below it the kept values' wire bytes fall into floating-point
denormals (5e-324 made NaN message sizes), so a smaller fraction is refused as a typo."""

MAX_SWEEP_POINTS = 10_000
"""Most sizes in one ``-b/-e/-f`` sweep (``sweep``, ``plot collective``): 8 B to 1 EB by the finest factor anyone
types (1.01) is ~4,000; a factor of 1.0001 (~300,000 points, seconds of pricing) is a typo."""



def check_range(option: str, value: int, low: int, high: int) -> int:
    """``value`` when ``low ≤ value ≤ high``, else a one-line :class:`CommModelError` naming the range."""
    if not low <= value <= high:
        raise CommModelError(f"{option} {value}: must be at least {low} and at most {high:,} (accepted range {low} to {high:,})")
    return value
