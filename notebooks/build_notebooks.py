"""Write the example notebooks from the cell texts below (run: ``python notebooks/build_notebooks.py``).

The notebooks are committed without outputs; ``tests/test_notebooks.py`` executes them and checks
that this script still reproduces them exactly, so edit the cells here, not in Jupyter.
"""

from __future__ import annotations

import sys
from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

HERE = Path(__file__).resolve().parent

IMPORTS_01 = """\
%matplotlib inline
import numpy as np
import pandas as pd
from IPython.display import display

from commmodel.collectives import busbw_factor, collective_cost
from commmodel.hardware.catalogue import LinkSpec, compose_system
from commmodel.io.profiles import load_links, load_system, load_system_with_network
from commmodel.io.validation_data import read_nccl_rows
from commmodel.plots.collectives import describe_crossovers, plot_collective_sweep, plot_scaling
from commmodel.plots.sweep_data import collective_scaling, collective_sweep, power_of_two_sizes
from commmodel.units import format_rate, format_size, format_time

pd.set_option("display.precision", 4)
pd.set_option("display.width", 140)"""

NB01 = [
    ("md", """\
# 01 · Collectives: the α-β model, algorithms and crossovers

Every collective step costs a **latency** α (kernel launch, link, synchronisation) plus the bytes it
moves over a **bandwidth** B. A ring all-reduce of an S-byte buffer on n ranks takes 2(n−1) steps of
S/n bytes each:

$$T_\\text{ring} = 2(n-1)\\,\\alpha + \\frac{2(n-1)}{n}\\,\\frac{S}{B}$$

Small messages are **latency-bound** (the α terms dominate), large ones **bandwidth-bound**.
Different algorithms trade the two differently (a tree has log₂n latency steps but moves a little
more per rank), so the fastest algorithm changes with the size: a **crossover**. commmodel prices
every algorithm × protocol NCCL runs; `auto` takes the physically fastest (what the step model and the
planner use), or with `selection="nccl"` the pair NCCL's own tuner would choose (what
`commmodel collective` reports).

Sizes follow nccl-tests: **S is the whole buffer**; algbw = S/t, busbw = algbw × 2(n−1)/n for
all-reduce (nccl-tests `doc/PERFORMANCE.md`). GB/s means 10⁹ B/s."""),
    ("code", IMPORTS_01),
    ("md", """\
## The hardware: two tiers

A DGX H100 joins its 8 GPUs with NVLink 4 through NVSwitches (scale-up) and nodes with 8 × 400 Gb/s
InfiniBand NDR (scale-out). Every number comes from the profile library, with its source."""),
    ("code", """\
system = load_system("dgx-h100")
up, out = system.scale_up, system.scale_out
pd.DataFrame([
    {"tier": f"scale-up: {up.link} ({up.kind}), {up.domain_size} GPUs", "alpha per step": format_time(up.latency_s.value),
     "line rate": format_rate(up.bw_bytes_per_s.value) + " per GPU", "efficiency": up.efficiency.value,
     "achievable B": format_rate(up.effective_bw_bytes_per_s) + " per GPU"},
    {"tier": f"scale-out: {out.nics_per_node} x {out.link} ({out.kind})", "alpha per step": format_time(out.latency_s.value),
     "line rate": format_rate(out.nic_bw_bytes_per_s.value) + " per NIC", "efficiency": out.efficiency.value,
     "achievable B": format_rate(out.node_bw_bytes_per_s) + " per node"},
])"""),
    ("md", """\
## Seed example 1: 7 GB of ring traffic

1 B fp32 parameters are 4 GB of gradients. A ring all-reduce on 8 GPUs moves 2·7/8 · 4 GB = **7 GB
per GPU** (each GPU receives 7 chunks of S/8 in the reduce-scatter and 7 more in the all-gather).
An all-gather of 1 GB per GPU on 8 GPUs (S = 8 GB) delivers (n−1)·1 GB = **7 GB to each GPU, 56 GB
in total**."""),
    ("code", """\
n = 8
S = 1e9 * 4                                              # 1B fp32 parameters
per_gpu = float(busbw_factor("all_reduce", n)) * S       # 2(n-1)/n · S
assert per_gpu == 7e9
ar = collective_cost("all_reduce", S, system, n)
print(f"all-reduce of {format_size(S)} on {n} GPUs: {format_size(per_gpu)} per GPU on the wire")
print(f"  on {system.name}: {format_time(float(ar.time_s))} with {ar.algorithm.item()}, "
      f"busbw {float(ar.busbw_bytes_per_s) / 1e9:.0f} GB/s")

D = 1e9                                                  # bytes per GPU
S_ag = n * D                                             # nccl-tests counts the whole gathered buffer
received = float(busbw_factor("all_gather", n)) * S_ag   # (n-1)/n · S = (n-1)·D
assert received == 7e9 and n * received == 56e9
ag = collective_cost("all_gather", S_ag, system, n)
print(f"all-gather of {format_size(D)} per GPU: {format_size(received)} received per GPU, "
      f"{format_size(n * received)} in total; {format_time(float(ag.time_s))} on {system.name}")"""),
    ("md", """\
## Seed example 2: parameter server vs ring

300 M fp32 parameters (1.2 GB) on workers joined by 1 GB/s links, the server on one of the workers:
every other worker pushes 1.2 GB to it and pulls 1.2 GB back over the server's one link (full duplex),
so a step gains (n−1) · 1.2 s: **1.2 s with 2 workers, 10.8 s with 10**, linear in the workers. A ring
moves 2(n−1)/n · 1.2 GB per worker, which stays below 2.4 GB however many workers join.

We build such a cluster from catalogue pieces (one GPU per node, a made-up 1 GB/s link with no
protocol overhead) and let the model price both algorithms."""),
    ("code", """\
one_gbps = LinkSpec.model_validate({
    "name": "link-1GBps", "tier": "scale_out", "kind": "ethernet",
    "bw_bytes_per_s": {"value": "1 GB/s", "source": "seed example (DESIGN §4)"},
    "efficiency": {"value": 1.0, "source": "idealised"},
    "latency_s": {"value": "10 us", "source": "idealised"},
})
gpu = load_system("dgx-a100").gpu
workers = compose_system("seed-ps", gpu, gpus_per_node=1, scale_up=load_links()["pcie4"], scale_out=one_gbps)
S_ps = 300e6 * 4
rows = []
for n_workers in (2, 4, 6, 8, 10, 16):
    ps = collective_cost("all_reduce", S_ps, workers, n_workers, algorithm="parameter_server")
    ring = collective_cost("all_reduce", S_ps, workers, n_workers, algorithm="ring")
    rows.append({"workers": n_workers, "closed form (n-1)·S/B (s)": (n_workers - 1) * S_ps / 1e9,
                 "parameter server (s)": float(ps.time_s), "ring (s)": float(ring.time_s)})
ps_table = pd.DataFrame(rows).set_index("workers")
assert abs(ps_table.loc[2, "parameter server (s)"] - 1.2) < 0.01
assert abs(ps_table.loc[10, "parameter server (s)"] - 10.8) < 0.01
ps_table"""),
    ("md", """\
## Time and bus bandwidth vs message size

`collective_sweep` prices an all-reduce at every power of two from 8 B to 16 GiB for each algorithm
that applies, finds where the fastest algorithm changes (crossovers, dashed lines) and where the
fastest one turns from latency- to bandwidth-bound (the shaded regions). The circles are a published
nccl-tests run on one 8 × H100 node (AWS p5, shipped in `commmodel/data/nccl_tests.csv`)."""),
    ("code", """\
published = pd.DataFrame(read_nccl_rows())
p5 = published[(published["setup_id"] == "aws-p5-1n") & (published["collective"] == "all_reduce")]
p5 = p5.assign(size_bytes=p5["size_bytes"].astype(float), time_us=p5["time_us"].astype(float),
               busbw_GBps=p5["busbw_GBps"].astype(float))
p5_system = load_system("aws-p5")
sweep = collective_sweep("all_reduce", p5_system, 8, power_of_two_sizes(8, 16 * 2**30))
display(sweep.rows[sweep.rows["best"]].iloc[::4][["size_bytes", "algorithm", "protocol", "time_s", "latency_s",
                                                   "bandwidth_s", "busbw_GBps"]])
print("\\n".join(describe_crossovers(sweep)))
plot_collective_sweep(sweep, p5, measured_label="AWS p5, nccl-tests (published)")"""),
    ("md", """\
## Two nodes: the network enters

With 16 GPUs on two DGX H100 a ring crosses InfiniBand and its steps pay the network's latency, so
it never wins here: the double binary tree's logarithmic latency wins small messages, and NVLS-tree
(the NVSwitches reduce inside each node, a tree joins the nodes) wins from about 1 MiB up."""),
    ("code", """\
two_nodes = collective_sweep("all_reduce", system, 16, power_of_two_sizes(8, 16 * 2**30))
crossovers = two_nodes.crossovers.assign(size=lambda d: d["size_bytes"].map(format_size))
display(crossovers)
plot_collective_sweep(two_nodes)"""),
    ("md", """\
## Scaling: one all-reduce of 1 GiB as the job grows

The same gradient all-reduce on 8 to 1,024 GPUs of three clusters: DGX H100 (8 × 400 Gb/s NDR per
node), DGX A100 (8 × 200 Gb/s HDR) and the DGX H100 with a single 100 GbE NIC per node."""),
    ("code", """\
systems = {
    "dgx-h100 (8x NDR)": system,
    "dgx-a100 (8x HDR)": load_system("dgx-a100"),
    "dgx-h100 + 1x 100GbE": load_system_with_network("dgx-h100", "eth-100g:1"),
}
scaling = collective_scaling("all_reduce", 2**30, systems, [8, 16, 32, 64, 128, 256, 512, 1024])
display(scaling.pivot(index="num_gpus", columns="system", values="time_s"))
plot_scaling(scaling, title="all_reduce of 1 GiB vs GPU count")"""),
    ("md", """\
**Takeaways.** Below the balance size the α terms decide and the algorithm with fewer steps wins;
above it the bytes decide and the bandwidth-optimal ring (or an in-network reduction) wins. Inside a
node NVLink makes everything fast; once a collective crosses nodes, the NICs per node set the
large-message rate, and a single 100 GbE NIC per node costs an order of magnitude."""),
]

IMPORTS_02 = """\
%matplotlib inline
import pandas as pd
from IPython.display import display

from commmodel.io.profiles import load_system, load_system_with_network
from commmodel.planner.search import plan
from commmodel.planner.whatif import compare
from commmodel.plots.collectives import plot_scaling
from commmodel.plots.plan_data import step_scaling
from commmodel.plots.planner import plot_breakdown, plot_whatif
from commmodel.plots.timeline import plot_timeline, timeline_summary
from commmodel.plots.timeline_data import step_timeline
from commmodel.step import Layout, StepOptions
from commmodel.step.estimate import estimate
from commmodel.workload.presets import get_model

pd.set_option("display.precision", 4)
pd.set_option("display.width", 160)"""

NB02 = [
    ("md", """\
# 02 · Planning a training job

A model, a cluster, and every way to split it: tensor (tp), pipeline (pp) and data (dp) parallelism,
micro-batch, ZeRO stage, recomputation, sequence parallelism and interleaving. The planner
enumerates them, drops the ones that do not divide or do not fit in memory, evaluates the rest at
once with the step model (numpy arrays, not a loop), and ranks them by step time."""),
    ("code", IMPORTS_02),
    ("md", "## The model and the cluster"),
    ("code", """\
model = get_model("gpt3-13b")
system = load_system("dgx-a100")
num_gpus = 64
print(model.describe())
print(f"{num_gpus} GPUs = {num_gpus // system.gpus_per_node} x {system.name}")"""),
    ("md", "## Ranking every layout"),
    ("code", """\
result = plan(model, system, num_gpus)
print(f"{result.num_enumerated} layouts enumerated, {result.num_evaluated} evaluated, "
      f"{result.num_feasible} fit in memory; search took {result.search_s * 1e3:.0f} ms; "
      f"global batch {result.global_batch} x {result.seq_len} tokens")
ranked = result.to_frame(10)
ranked[["tp", "pp", "dp", "micro_batch", "zero", "recompute", "sequence_parallel", "vpp", "step_time_s",
        "tokens_per_s", "mfu", "exposed_comm_fraction", "memory_bytes_per_gpu"]]"""),
    ("md", """\
## Where the time goes

Each bar is one layout's step: compute plus every **exposed** term (communication that does not hide
behind compute, and the pipeline bubble). The right panel removes compute to show what separates
the layouts; the hatched strip is communication that ran on the link but hid under compute."""),
    ("code", "plot_breakdown(result.to_frame(8), title=f\"{model.name} on {num_gpus} x A100: top 8 layouts\")"),
    ("md", """\
## What-if: a faster (or slower) network

The same model, GPUs and global batch on other systems and networks, each with its own best layout."""),
    ("code", """\
targets = [
    ("dgx-a100 (8x HDR IB)", system),
    ("dgx-a100 + 1x 100GbE", load_system_with_network("dgx-a100", "eth-100g:1")),
    ("dgx-a100 + 8x NDR IB", load_system_with_network("dgx-a100", "ib-ndr:8")),
    ("dgx-h100 (8x NDR IB)", load_system("dgx-h100")),
]
comparison = compare(model, targets, num_gpus)
whatif = pd.DataFrame(comparison.rows())
display(whatif[["label", "best_label", "step_time_s", "tokens_per_s", "speedup_vs_baseline", "exposed_comm_fraction"]])
plot_whatif(whatif, title=f"what-if: {model.name} on {num_gpus} GPUs (first = baseline)")"""),
    ("md", """\
## Scaling the job

The best layout at each GPU count, with one global batch for all counts so the numbers compare:
throughput grows almost linearly on InfiniBand and falls behind once a single 100 GbE NIC per node
has to carry the gradients."""),
    ("code", """\
scaling = step_scaling(model, {"dgx-a100 (8x HDR)": system, "dgx-h100 (8x NDR)": load_system("dgx-h100"),
                               "dgx-h100 + 1x 100GbE": load_system_with_network("dgx-h100", "eth-100g:1")},
                       [8, 16, 32, 64, 128, 256, 512])
display(scaling.pivot(index="num_gpus", columns="system", values="best_layout"))
plot_scaling(scaling, y="tokens_per_s", title=f"{model.name}: best layout's throughput, global batch "
                                              f"{scaling['global_batch'].iloc[0]}")"""),
    ("md", """\
## Inside one step: overlap of gradient all-reduce with backward

A data-parallel job: a 1.3 B model on 32 GPUs (4 nodes), first on 8 × 400 Gb/s NDR per node, then on
a single 100 GbE NIC per node. Gradients are all-reduced in 25 MB buckets as backward produces them
(PyTorch DDP); whatever still runs when backward ends is **exposed** and lengthens the step."""),
    ("code", """\
small = get_model("1.3B")
layout = Layout(tp=1, pp=1, dp=32, micro_batch=4, global_batch=128)
fast = load_system("dgx-h100")
slow = load_system_with_network("dgx-h100", "eth-100g:1")
timelines = {"8x NDR per node": step_timeline(small, fast, 32, layout),
             "1x 100GbE per node": step_timeline(small, slow, 32, layout)}
display(pd.DataFrame({label: timeline_summary(t) for label, t in timelines.items()}))
plot_timeline(timelines["8x NDR per node"])"""),
    ("code", "plot_timeline(timelines[\"1x 100GbE per node\"])"),
    ("md", """\
## Gradient accumulation and compression

Two knobs from the source notes against the same slow network. **Accumulation** runs k micro-steps
per optimizer step and all-reduces once, so the communication is paid once per k micro-batches.
**Compression** shrinks the bytes on the wire: bf16 halves the fp32 gradients, int8 quarters them,
top-k (1 %) sends 1 % of the values with a 4-byte index each. All compression is **lossy**: check
convergence before trusting the speed-up."""),
    ("code", """\
rows = []
for accumulation in (1, 2, 4, 8):
    for compression in ("none", "bf16", "int8", "topk"):
        lay = layout.model_copy(update={"global_batch": 128 * accumulation})
        est = estimate(small, slow, 32, lay, StepOptions(compression=compression), with_advice=False)
        rows.append({"accumulation": accumulation, "compression": compression,
                     "tokens/s": est.row["tokens_per_s"], "exposed comm": est.row["exposed_comm_fraction"],
                     "lossy": est.options.lossy})
knobs = pd.DataFrame(rows)
display(knobs.pivot(index="accumulation", columns="compression", values="tokens/s").round(0))
knobs.pivot(index="accumulation", columns="compression", values="exposed comm").round(3)"""),
    ("md", """\
**Takeaways.** The planner's best layouts keep tensor parallelism inside a node and trade pipeline
bubbles against data-parallel traffic; a slower network pushes the best layout toward less data
parallel traffic per step. When communication is exposed, gradient accumulation and compression buy
throughput, at the cost of a larger effective batch or lossy gradients."""),
]

NCCL_TABLE_P5 = """\
# nThread 1 nGpus 8 minBytes 8 maxBytes 17179869184 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 validation: 0 graph: 0
#                                                              out-of-place                       in-place
#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw   busbw  #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)             (us)  (GB/s)  (GB/s)
           8             2     float     sum      -1    12.90    0.00    0.00     N/A    12.90    0.00    0.00     N/A
          16             4     float     sum      -1    12.88    0.00    0.00     N/A    12.88    0.00    0.00     N/A
          32             8     float     sum      -1    22.25    0.00    0.00     N/A    22.25    0.00    0.00     N/A
          64            16     float     sum      -1    14.48    0.00    0.01     N/A    14.48    0.00    0.01     N/A
         128            32     float     sum      -1    15.47    0.01    0.01     N/A    15.47    0.01    0.01     N/A
         256            64     float     sum      -1    15.72    0.02    0.03     N/A    15.72    0.02    0.03     N/A
         512           128     float     sum      -1    16.19    0.03    0.06     N/A    16.19    0.03    0.06     N/A
        1024           256     float     sum      -1    16.43    0.06    0.11     N/A    16.43    0.06    0.11     N/A
        2048           512     float     sum      -1    16.62    0.12    0.22     N/A    16.62    0.12    0.22     N/A
        4096          1024     float     sum      -1    16.76    0.24    0.43     N/A    16.76    0.24    0.43     N/A
        8192          2048     float     sum      -1    16.85    0.49    0.85     N/A    16.85    0.49    0.85     N/A
       16384          4096     float     sum      -1    17.46    0.94    1.64     N/A    17.46    0.94    1.64     N/A
       32768          8192     float     sum      -1    18.78    1.74    3.05     N/A    18.78    1.74    3.05     N/A
       65536         16384     float     sum      -1    19.09    3.43    6.01     N/A    19.09    3.43    6.01     N/A
      131072         32768     float     sum      -1    19.37    6.77   11.84     N/A    19.37    6.77   11.84     N/A
      262144         65536     float     sum      -1    20.27   12.94   22.64     N/A    20.27   12.94   22.64     N/A
      524288        131072     float     sum      -1    21.17   24.77   43.35     N/A    21.17   24.77   43.35     N/A
     1048576        262144     float     sum      -1    28.56   36.71   64.24     N/A    28.56   36.71   64.24     N/A
     2097152        524288     float     sum      -1    43.45   48.27   84.47     N/A    43.45   48.27   84.47     N/A
     4194304       1048576     float     sum      -1    55.44   75.66  132.41     N/A    55.44   75.66  132.41     N/A
     8388608       2097152     float     sum      -1    84.29   99.52  174.16     N/A    84.29   99.52  174.16     N/A
    16777216       4194304     float     sum      -1    124.0  135.33  236.82     N/A    124.0  135.33  236.82     N/A
    33554432       8388608     float     sum      -1    198.6  168.93  295.63     N/A    198.6  168.93  295.63     N/A
    67108864      16777216     float     sum      -1    326.6  205.45  359.54     N/A    326.6  205.45  359.54     N/A
   134217728      33554432     float     sum      -1    592.8  226.39  396.19     N/A    592.8  226.39  396.19     N/A
   268435456      67108864     float     sum      -1   1121.4  239.38  418.91     N/A   1121.4  239.38  418.91     N/A
   536870912     134217728     float     sum      -1   2165.3  247.94  433.90     N/A   2165.3  247.94  433.90     N/A
  1073741824     268435456     float     sum      -1   4253.0  252.47  441.81     N/A   4253.0  252.47  441.81     N/A
  2147483648     536870912     float     sum      -1   8463.7  253.73  444.02     N/A   8463.7  253.73  444.02     N/A
  4294967296    1073741824     float     sum      -1    15791  271.98  475.97     N/A    15791  271.98  475.97     N/A
  8589934592    2147483648     float     sum      -1    31289  274.53  480.43     N/A    31289  274.53  480.43     N/A
 17179869184    4294967296     float     sum      -1    62239  276.03  483.05     N/A    62239  276.03  483.05     N/A
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 156.619
"""

IMPORTS_03 = """\
%matplotlib inline
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
from IPython.display import display

from commmodel.calibrate.apply import calibrate_system
from commmodel.calibrate.measured import model_algorithm, model_times_s
from commmodel.calibrate.groups import fit_measurements
from commmodel.io.nccl_tests import read_nccl_tests
from commmodel.io.profiles import load_system
from commmodel.plots.calibration import plot_calibration, residual_table
from commmodel.units import format_rate, format_time

pd.set_option("display.precision", 4)"""

NB03 = [
    ("md", """\
# 03 · Calibration: from an nccl-tests table to a profile

A profile's numbers come from spec sheets and published measurements. On your own cluster you can
measure instead: run nccl-tests (or `commmodel calibrate run` under `torchrun`), import the table,
fit α and β, and let commmodel solve the profile's latency and efficiency so that its model matches
what you measured.

Here we use a **published** nccl-tests all-reduce table from one AWS p5 node (8 × H100;
aws-samples/awsome-distributed-training@7217859, `micro-benchmarks/nccl-tests/aws-batch/README.md`,
size, time, algbw and busbw copied verbatim; in-place columns repeat the out-of-place ones, as the
published table gives only those)."""),
    ("code", IMPORTS_03),
    ("code", "NCCL_TESTS_OUTPUT = '''\\\n" + NCCL_TABLE_P5 + "'''"),
    ("md", """\
## Import

The importer reads the nccl-tests text table (or its `-J` JSON report). This output has no
`# Rank` lines, so the number of ranks comes from busbw/algbw and we say it ran on one node."""),
    ("code", """\
folder = Path(tempfile.mkdtemp())
path = folder / "all_reduce_perf.txt"
path.write_text(NCCL_TESTS_OUTPUT)
imported = read_nccl_tests(path, nodes=1)
measured = pd.DataFrame(imported.rows)
print("\\n".join(imported.notes))
measured[["op", "size_bytes", "num_ranks", "num_nodes", "time_s_median", "algbw_GBps", "busbw_GBps"]].tail()"""),
    ("md", """\
## Fit α and β

t(S) = a + b·S per regime, weighted so a 16 µs point counts as much as a 300 µs one. NCCL changes
protocol with size (LL → LL128 → Simple), so the fitter accepts a split where it lowers the BIC
clearly. α = a / (latency steps), B = wire fraction / b: the bus bandwidth approached by large
messages."""),
    ("code", """\
(group,) = fit_measurements(imported.rows)
fit = group.fit
segments = pd.DataFrame([{
    "from": s.size_min_bytes, "to": s.size_max_bytes, "points": s.num_points,
    "alpha": format_time(s.alpha_s), "alpha 95% CI": f"{format_time(s.alpha_ci_s[0])} .. {format_time(s.alpha_ci_s[1])}",
    "B (busbw)": format_rate(s.bw_bytes_per_s) if np.isfinite(s.bw_bytes_per_s) else "latency-bound",
} for s in fit.segments])
print(f"{fit.label}: weighted R² = {fit.r2:.4f}")
display(segments)
pd.DataFrame(residual_table(fit))"""),
    ("md", """\
## Compare with the shipped profile, then calibrate it

`aws-p5` in the profile library predicts these times from its spec-sheet line rates and fitted
efficiencies. `calibrate_system` solves the profile's NVLink latency and efficiency so that the
model reproduces the fitted α and B; the figure shows the measurements, the fit, and the profile
before and after."""),
    ("code", """\
base = load_system("aws-p5")
before = model_times_s(base, group, fit.sizes_bytes, model_algorithm(base, group))
calibrated, calibration = calibrate_system(base, [group])
after = model_times_s(calibrated, group, fit.sizes_bytes, model_algorithm(calibrated, group))
changes = pd.DataFrame([{"knob": ".".join(path), "profile": tier.base_values.get(path), "calibrated": value}
                        for tier in calibration.tiers for path, value in tier.values.items()])
display(changes)
for note in calibration.notes:
    print("note:", note)
error = pd.DataFrame({"size_bytes": fit.sizes_bytes, "measured_s": fit.times_s,
                      "profile / measured": before / fit.times_s, "calibrated / measured": after / fit.times_s})
display(error.iloc[::4])
plot_calibration(fit, {"aws-p5 profile": before, "aws-p5 calibrated with this table": after})"""),
    ("md", """\
**Next.** `commmodel calibrate fit FILE.csv --base aws-p5 --out my-p5.yaml` writes the calibrated
profile as YAML (every changed number says `calibrated: <file>, <date>`), and `--system my-p5.yaml`
uses it everywhere: collectives, estimates, plans."""),
]

NB04 = [
    ("md", """\
# 04 · My job is slow: from a profiler trace to the flagged collective

A training job runs slower than expected. Before tuning anything, two questions: **where does each step's
time go** (compute, communication the GPU waits for, or nothing at all), and **does any collective run below
what the fabric should give**? The PyTorch profiler trace the job already writes answers both, once every
collective in it is set against the model (what `commmodel diagnose` does; `docs/diagnose.md`).

The trace here is real: rank 0 of a 2-rank NCCL job, from HolisticTraceAnalysis's test data
(`../shared/evidence/kineto-nccl-2ranks-allreduce.json.gz`, see that folder's README). Its hardware is not
published, so we price it on the system we name: a DGX A100 (NVSwitch, NVLink 3)."""),
    ("code", """\
%matplotlib inline
import os
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd
from IPython.display import display

from commmodel.collectives import collective_cost
from commmodel.evidence.diagnose import diagnose
from commmodel.io.kineto import read_trace
from commmodel.io.profiles import load_system

EVIDENCE = Path(os.environ.get("COMMMODEL_EVIDENCE_DIR") or Path.cwd().resolve().parents[1] / "shared" / "evidence")
pd.set_option("display.precision", 3)
pd.set_option("display.width", 160)"""),
    ("md", """\
## Read the trace

The reader streams the file and keeps only what the diagnosis needs: each collective call (op, buffer size S
as nccl-tests counts it, group, the NCCL kernel that ran it and its duration), the `ProfilerStep#N` markers,
and the GPU's busy intervals."""),
    ("code", """\
trace = read_trace(EVIDENCE / "kineto-nccl-2ranks-allreduce.json.gz")
print(f"backend {trace.backend}, rank {trace.rank} of {trace.world_size}, "
      f"{len(trace.collectives)} collective calls, {len(trace.steps)} profiled steps")
pd.DataFrame([{"op": c.op, "size_bytes": c.size_bytes, "ranks": c.group_size, "algorithm": c.algorithm,
               "protocol": c.protocol, "kernel_us": c.time_s * 1e6} for c in trace.collectives[:6]])"""),
    ("md", """\
## Where does each step go?

Per step: **compute** is the union of non-NCCL GPU work, **exposed communication** is NCCL kernel time
that no compute overlaps, **idle** is the rest of the step, when the GPU does nothing."""),
    ("code", """\
system = load_system("dgx-a100")
result = diagnose([trace], system)
steps = pd.DataFrame(result.steps).set_index("step")
ms = steps[["time_s", "compute_s", "exposed_comm_s", "idle_s"]] * 1e3
display(ms.rename(columns=lambda c: c.replace("_s", "_ms")))
ax = ms[["compute_s", "exposed_comm_s", "idle_s"]].plot.barh(stacked=True, figsize=(7, 2.2),
                                                              color=["tab:blue", "tab:red", "lightgray"])
ax.set_xlabel("ms"); ax.set_ylabel("ProfilerStep"); ax.legend(["compute", "exposed comm", "idle"], loc="lower right")
plt.show()"""),
    ("md", """\
Most of each ~220 ms step is **idle**: the GPU waits on the host (data loading, Python, launches). That is
the first thing to fix. But ~10–19 ms per step is communication nothing hides, so the collectives are
worth a look too."""),
    ("md", """\
## Which collective is slow?

Calls are grouped by op × size × group × algorithm/protocol. For each group: the median kernel time, its
busbw (S/t × 2(n−1)/n for all-reduce), the model's time and busbw for that group on the DGX A100, and
their ratio; `flag` marks a ratio below 0.7."""),
    ("code", """\
table = pd.DataFrame(result.collectives)
table["measured_us"] = table["measured_time_s"] * 1e6
table["model_us"] = table["model_time_s"] * 1e6
table["slow"] = table["flag"].notna()
table[["op", "size_bytes", "group_size", "count", "algorithm", "protocol", "measured_us", "measured_busbw_GBps",
       "model_us", "model_busbw_GBps", "ratio", "slow"]]"""),
    ("code", """\
flagged = table[table["slow"]]
worst = flagged.iloc[0]
print(f"{len(flagged)} of {len(table)} groups flagged; the costliest: {worst['op']} of {worst['size_bytes'] / 1e6:.1f} MB "
      f"on {worst['group_size']} ranks, {worst['measured_busbw_GBps']:.2f} GB/s busbw vs {worst['model_busbw_GBps']:.0f} "
      f"expected ({worst['ratio']:.2f}x), run as {worst['algorithm']}/{worst['protocol']}")
print("usual causes:", worst["flag"].split("usual causes: ")[1])"""),
    ("md", """\
## Which cause?

Every flagged all-reduce ran in NCCL's `RING_LL` kernel, on buffers of 8–31 MB. The kernel's name does not
say which protocol ran: NCCL builds one kernel per algorithm and runs every protocol in it (docs/diagnose.md), and
its tuner picks Simple long before these sizes. Price the same all-reduce with each protocol forced: if only LL
(8-byte stores carrying 4 bytes of data and a flag) falls as low as the measured busbw, a forced
`NCCL_PROTO=LL` (or an `NCCL_ALGO`/`NCCL_PROTO` left in the environment) is a suspect, beside a wrong NIC, PCIe
instead of NVLink, or a straggler."""),
    ("code", """\
size = float(worst["size_bytes"])
rows = []
for protocol in ("LL", "LL128", "Simple"):
    cost = collective_cost("all_reduce", size, system, 2, 2, "ring", protocol=protocol)
    rows.append({"protocol": protocol, "model_us": float(cost.time_s) * 1e6,
                 "model_busbw_GBps": float(cost.busbw_bytes_per_s) / 1e9})
display(pd.DataFrame(rows))
print(f"measured: {worst['measured_us']:.0f} us, {worst['measured_busbw_GBps']:.2f} GB/s")"""),
    ("md", """\
Even LL is priced far above what the trace shows, so the protocol is a cause but not the whole story: the
hardware of this trace is not published, and the 2 ranks may not share an NVLink domain at all. What to do
next, in order: fix the idle time (the largest term); check the job's environment for `NCCL_PROTO` /
`NCCL_ALGO`; run it with `NCCL_DEBUG=INFO` and draft the real system with
`commmodel profiles from-nccl nccl.log topo.xml --out mine.yaml`, then run `commmodel diagnose TRACE --system
mine.yaml` against the machine the job actually ran on."""),
]

NOTEBOOKS = {
    "01_collectives.ipynb": NB01,
    "02_planner.ipynb": NB02,
    "03_calibration.ipynb": NB03,
    "04_diagnose.ipynb": NB04,
}


def build(cells: list[tuple[str, str]]) -> nbformat.NotebookNode:
    """A notebook without outputs from (kind, source) pairs."""
    nb = new_notebook()
    nb.metadata = {
        "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
        "language_info": {"name": "python"},
    }
    for i, (kind, source) in enumerate(cells):
        cell = new_markdown_cell(source) if kind == "md" else new_code_cell(source)
        cell["id"] = f"cell-{i:02d}"
        nb.cells.append(cell)
    return nb


def render(cells: list[tuple[str, str]]) -> str:
    """The notebook's file text (what is committed)."""
    return nbformat.writes(build(cells)) + "\n"


def main(out_dir: Path = HERE) -> list[Path]:
    """Write every notebook into ``out_dir``."""
    written = []
    for name, cells in NOTEBOOKS.items():
        path = out_dir / name
        path.write_text(render(cells), encoding="utf-8")
        written.append(path)
    return written


if __name__ == "__main__":
    for written_path in main(Path(sys.argv[1]) if len(sys.argv) > 1 else HERE):
        print(f"wrote {written_path}")
