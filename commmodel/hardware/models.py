"""Frozen pydantic models of GPUs, interconnect tiers and systems (DESIGN §3; a cluster of them: :mod:`.cluster`).

Every measured or quoted number is a :class:`Sourced` value: ``{value: "450 GB/s", source: "..."}``
in YAML, a plain SI float in ``.value`` here. Efficiencies (achievable fraction of a line rate)
are separate sourced fields so that calibration can replace them without touching line rates.

Bandwidths are **unidirectional and per GPU** (scale-up) or **per NIC** (scale-out) unless the
field name says otherwise; vendors' bidirectional numbers are halved at entry and say so in
their ``source``.
"""

from typing import Annotated, Generic, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, model_validator

from commmodel.errors import ProfileError
from commmodel.limits import MAX_GPUS_PER_NODE
from commmodel.hardware.profile_checks import (check_link_terms, check_mesh_links, check_positive, check_protocols,
                                               check_reduction)
from commmodel.units import FlopsPerS, Fraction, RateBytesPerS, SizeBytes, TimeSeconds

T = TypeVar("T")


class Frozen(BaseModel):
    """Base for every model here: immutable, strict about unknown keys (field docstrings: io/field_docs.py)."""

    model_config = ConfigDict(frozen=True, extra="forbid")


class Sourced(Frozen, Generic[T]):
    """A number together with where it came from."""

    value: T
    """The value, written with its unit in YAML ("450 GB/s", "2 us", "80 GiB", 0.82)."""
    source: str = Field(min_length=3)
    """Where the number comes from: spec sheet, paper, issue thread, or "calibrated: <file>, <date>"."""


Dtype = Literal["fp32", "tf32", "fp16", "bf16", "fp8", "fp4"]
"""Peak-table dtypes; fp4 is the dense Blackwell/CDNA4 4-bit rate (NVFP4/MXFP4), recorded as a fact only."""

ComputeCapability = Annotated[str, Field(pattern=r"^sm_[0-9]{2,3}$")]
"""CUDA compute capability as nvcc spells the target: "sm_80" (A100), "sm_90" (H100), "sm_100" (B200)."""


class GPU(Frozen):
    """One accelerator: dense peak compute, memory, and how much of the peak matmuls reach."""

    name: str = Field(min_length=1)
    """Catalogue name, e.g. "h100-sxm-80gb"."""
    description: str = ""
    """Marketing name and form factor, e.g. "NVIDIA H100 SXM5 80GB"."""
    peak_flops_per_s: dict[Dtype, Sourced[FlopsPerS]]
    """Dense (no sparsity) tensor-core peak per dtype, e.g. {bf16: {value: "989 TFLOP/s", source: ...}}."""
    hbm_bytes: Sourced[SizeBytes]
    """Device memory capacity as the driver reports it (nvidia-smi ``memory.total``, rocm-smi VRAM total): the
    datasheets' "80 GB" are binary for most parts (an H100 80GB reports 81559 MiB = 85.5e9 B), so the catalogue
    keeps the reported figure, not 80e9 B. What a process can use is less: see ``workload.buffers.RESERVED_BYTES``."""
    hbm_bw_bytes_per_s: Sourced[RateBytesPerS]
    """Device memory bandwidth."""
    matmul_efficiency: Sourced[Fraction]
    """Maximum achievable matmul FLOP/s over the dense bf16 peak (MAMF / peak), for large GEMMs."""
    matmul_efficiency_fp8: Sourced[Fraction] | None = None
    """The same for FP8 GEMMs (float8_e4m3fn MAMF over the dense FP8 peak), where measured: it differs from the bf16
    ratio (H100 SXM 0.709 against 0.803). Optional; without it FP8 GEMMs take ``matmul_efficiency``
    (:meth:`matmul_efficiency_for`)."""
    fp8_rowwise_gemm_ratio: Sourced[Fraction] | None = None
    """Rate of FP8 GEMMs with row-wise scales (one fp32 scale per row of A and per column of B, torchao's rowwise
    recipe; ``torch._scaled_mm`` runs them in a CUTLASS kernel) over tensor-wise scaled ones at the same shapes, where
    measured (H100 SXM: 0.93 on the blocks of Llama-3 8B/70B, benchmarks/gemm_shapes.py). Optional; without it row-wise
    FP8 GEMMs run at the tensor-wise rate."""
    compute_capability: Sourced[ComputeCapability] | None = None
    """CUDA compute capability ("sm_90"; NVIDIA's CUDA GPUs table). It selects NCCL's per-architecture tuner
    tables and the published attention-kernel rate; a GPU without it is refused by those, never guessed."""
    host_link_bw_bytes_per_s: Sourced[RateBytesPerS] | None = None
    """The GPU's own link to host memory, each direction, peak (datasheet PCIe x16, or a superchip's NVLink-C2C
    share). Optional; a system's value overrides it (:meth:`System.host_link`), which prices offload copies."""

    @model_validator(mode="after")
    def _check(self) -> "GPU":
        if not self.peak_flops_per_s:
            raise ProfileError(
                "peak_flops_per_s needs at least one dtype; add e.g. bf16: {value: 989 TFLOP/s, source: ...}"
            )
        for dtype, flops in self.peak_flops_per_s.items():
            check_positive(flops.value, f"peak_flops_per_s.{dtype}")
        for field in ("hbm_bytes", "hbm_bw_bytes_per_s", "host_link_bw_bytes_per_s"):
            if getattr(self, field) is not None:
                check_positive(getattr(self, field).value, field)
        for field in ("matmul_efficiency", "matmul_efficiency_fp8"):
            value = getattr(self, field)
            if value is not None and value.value > 1.0:
                raise ProfileError(f"{field} = {value.value:g} exceeds 1: it is measured MAMF over the dense peak; "
                                   f"write a value in (0, 1]")
        return self

    def matmul_efficiency_for(self, peak_key: str) -> float:
        """MAMF / peak of GEMMs run at the ``peak_key`` peak: ``matmul_efficiency_fp8`` for "fp8" where measured,
        else ``matmul_efficiency`` (bf16's, which stands in for the other dtypes)."""
        if peak_key == "fp8" and self.matmul_efficiency_fp8 is not None:
            return self.matmul_efficiency_fp8.value
        return self.matmul_efficiency.value

    def sm_version(self) -> int:
        """The compute capability as a number (sm_90 -> 90); a clear error when the profile does not state it."""
        if self.compute_capability is None:
            raise ProfileError(
                f"gpu {self.name} has no compute_capability: NCCL's tuner and the attention-kernel rates are per "
                f"GPU architecture; add compute_capability: {{value: sm_90, source: ...}} (developer.nvidia.com/cuda-gpus)"
            )
        return int(self.compute_capability.value[len("sm_"):])

    def peak_for(self, dtype: str) -> float:
        """Dense peak FLOP/s for ``dtype``; fp16/bf16 stand in for each other when one is missing."""
        table = self.peak_flops_per_s
        if dtype in table:
            return table[dtype].value  # type: ignore[index]
        fallback = {"bf16": "fp16", "fp16": "bf16"}.get(dtype)
        if fallback in table:
            return table[fallback].value  # type: ignore[index]
        known = sorted(table)
        raise ProfileError(f"gpu {self.name} has no peak for dtype {dtype!r}; known: {known}; "
                           f"use --dtype {known[0]} or add a sourced {dtype} peak to hardware_profiles/gpus.yaml")


class InNetworkReduction(Frozen):
    """Reduction done by the switch (NVLS in NVSwitch, SHARP in InfiniBand switches)."""

    name: Literal["nvls", "sharp"]
    """Which mechanism: NVLink SHARP (nvls) or InfiniBand SHARP / CollNet (sharp)."""
    busbw_efficiency: Sourced[Fraction]
    """Large-message all-reduce busbw over the per-GPU line rate, quoted at 8 ranks (can exceed 1: NVLS
    on H100 ≈ 1.07); the collective model scales it with the group size as 2(n−1)/(n+1)."""
    min_ranks: int = Field(strict=True, default=2, ge=2)
    """Smallest group on which the library uses it (NCCL enables NVLS from ~5 GPUs on H200)."""
    latency_s: Sourced[TimeSeconds]
    """Fixed cost of one in-network all-reduce (the α term)."""


class MeasuredSizes(Frozen):
    """Message sizes a calibration measured on a tier: predictions inside them are *calibrated*, outside
    *extrapolated* (the fitted numbers used beyond what was measured)."""

    min_bytes: SizeBytes
    """Smallest measured message S (nccl-tests convention: the whole buffer)."""
    max_bytes: SizeBytes
    """Largest measured message S."""
    source: str = Field(min_length=3)
    """The measurement: "calibrated: <file>, <date> (...)"."""

    @model_validator(mode="after")
    def _check(self) -> "MeasuredSizes":
        check_positive(self.min_bytes, "calibrated_sizes.min_bytes")
        if self.max_bytes < self.min_bytes:
            raise ProfileError(f"max_bytes {self.max_bytes:g} is below min_bytes {self.min_bytes:g}; "
                               f"swap them")
        return self


NcclProtocol = Literal["LL", "LL128", "Simple"]
"""NCCL's wire protocols, spelled as ``NCCL_PROTO`` and :data:`commmodel.collectives.protocols.PROTOCOLS` spell them."""

ScaleUpKind = Literal["nvswitch", "nvlink_direct", "pcie_p2p", "pcie_host", "nvlink_c2c", "xgmi", "host_loopback"]
ScaleOutKind = Literal["infiniband", "roce", "ethernet", "efa", "tcpx", "tcpxo", "slingshot", "omnipath"]


class ScaleUpTier(Frozen):
    """The fast domain inside a node (or rack): NVSwitch, direct NVLink, or PCIe."""

    kind: ScaleUpKind
    """nvswitch (any-to-any at full rate), nvlink_direct (point links), pcie_p2p (GPU peer-to-peer over
    PCIe switches), pcie_host (no peer-to-peer: data staged through host memory), nvlink_c2c, xgmi (AMD
    Infinity Fabric: a fully connected mesh, one link per GPU pair), host_loopback (processes on one CPU
    host exchanging data through the kernel's loopback device or shared memory; the "GPU" is a CPU rank)."""
    link: str
    """Catalogue link name this tier was built from (nvlink4, pcie4, ...)."""
    bw_bytes_per_s: Sourced[RateBytesPerS]
    """Unidirectional line rate per GPU into the domain (e.g. 450 GB/s for NVLink 4)."""
    efficiency: Sourced[Fraction]
    """Large-message ring busbw over ``bw_bytes_per_s`` measured with NCCL (protocol overhead)."""
    latency_s: Sourced[TimeSeconds]
    """Per-step latency α of one LL-protocol hop inside the domain (link + sync); NCCL's per-protocol
    differences and base (launch) latencies are added by ``commmodel.collectives.protocols``."""
    simple_fixed_s: Sourced[TimeSeconds] | None = None
    """Fixed cost a Simple-protocol (large-message) collective pays on this tier beyond NCCL's base and
    per-step latencies: pipeline fill, proxy and launch costs the tuner does not count. Written by
    ``calibrate fit`` from measured rows ≥ 1 MiB; absent (0) in shipped profiles without a measurement."""
    domain_size: int = Field(strict=True, ge=1)
    """GPUs that share this domain: 8 in an HGX box, 72 in an NVL72 rack (may exceed gpus_per_node)."""
    in_network_reduction: InNetworkReduction | None = None
    """NVLS if the switch can reduce; absent otherwise."""
    links_per_gpu: int | None = Field(strict=True, default=None, ge=1)
    """Point-to-point mesh kinds (xgmi, nvlink_direct): links leaving each GPU, one per peer on a fully
    connected mesh (7 on an 8-GPU MI300X board). ``bw_bytes_per_s`` is then links × ``link_bw_bytes_per_s``;
    a single ring uses one link per hop, so only several rings over disjoint links reach the total."""
    link_bw_bytes_per_s: Sourced[RateBytesPerS] | None = None
    """Unidirectional rate of one of those links (64 GB/s per xGMI link on MI300X). Optional."""
    gpus_per_host_link: int = Field(strict=True, default=1, ge=1)
    """pcie_host only: GPUs whose host-staged traffic shares one PCIe link to the CPU (2 when two GPUs sit
    behind one PCIe switch, `nvidia-smi topo -m` PIX; 1 when every GPU has its own root port). NCCL's
    SHM transport moves every byte up to host memory and back down, so those GPUs split that link."""
    calibrated_sizes: MeasuredSizes | None = None
    """Written by ``calibrate fit``: the sizes measured to calibrate this tier (absent: its numbers are sourced)."""

    @model_validator(mode="after")
    def _check(self) -> "ScaleUpTier":
        check_link_terms("scale_up", "bw_bytes_per_s", self.bw_bytes_per_s, self.efficiency, self.latency_s)
        check_reduction(
            "scale_up", self.in_network_reduction, "nvls",
            "inside a scale-up domain only NVLink SHARP exists; write name: nvls (or put sharp under scale_out)",
        )
        check_mesh_links(self.bw_bytes_per_s.value, self.links_per_gpu, self.link_bw_bytes_per_s)
        if self.in_network_reduction is not None and self.kind != "nvswitch":
            raise ProfileError(
                f"scale_up.in_network_reduction: NVLS needs an NVSwitch, but kind is {self.kind!r}; "
                f"remove in_network_reduction (write in_network_reduction: null) or set kind: nvswitch"
            )
        return self

    @property
    def effective_bw_bytes_per_s(self) -> float:
        """Achievable per-GPU unidirectional bandwidth: line rate × efficiency."""
        return self.bw_bytes_per_s.value * self.efficiency.value


class ScaleOutTier(Frozen):
    """The network between scale-up domains: InfiniBand, RoCE, Ethernet, EFA, TCPX(O), Slingshot."""

    kind: ScaleOutKind
    """Fabric family."""
    link: str
    """Catalogue link name (ib-ndr, eth-100g, efa-v2, ...)."""
    nics_per_node: int = Field(strict=True, ge=1)
    """Scale-out NICs (rails) per node used by the collective library (frontend NICs excluded)."""
    nic_bw_bytes_per_s: Sourced[RateBytesPerS]
    """Unidirectional line rate of one NIC (400 Gb/s NDR = 50 GB/s)."""
    efficiency: Sourced[Fraction]
    """Achievable fraction of the NIC line rate for large NCCL transfers."""
    latency_s: Sourced[TimeSeconds]
    """Per-step latency α of one LL-protocol hop between domains (NIC + switches + proxy); protocol
    differences and base latencies are added by ``commmodel.collectives.protocols``."""
    simple_fixed_s: Sourced[TimeSeconds] | None = None
    """Fixed cost a Simple-protocol (large-message) collective pays for crossing this tier beyond NCCL's
    base and per-step latencies (pipeline fill through the NICs, proxy costs). Written by ``calibrate fit``
    from measured rows ≥ 1 MiB; absent (0) in shipped profiles without a measurement."""
    nccl_protocols: Sourced[tuple[NcclProtocol, ...]] | None = None
    """The NCCL protocols a communicator may use once it crosses this fabric, when the fabric's software stack
    restricts them (aws-ofi-nccl sets ``NCCL_PROTO=simple`` on EFA v1; Google's TCPXO environment sets
    ``NCCL_PROTO=Simple``); absent: all three. Communicators inside one domain are not restricted."""
    nccl_buffsize_bytes: Sourced[SizeBytes] | None = None
    """``NCCL_BUFFSIZE`` the fabric's software stack sets (Simple protocol; absent: NCCL's default 4 MiB). One
    eighth of it is the tree/Simple chunk (collectives.protocols.simple_chunk_bytes)."""
    oversubscription: float = Field(default=1.0, ge=1.0)
    """Fabric oversubscription above the leaf (1 = full bisection fat tree)."""
    oversubscription_source: str | None = None
    """Where the oversubscription figure comes from; required when ``oversubscription`` is above 1."""
    in_network_reduction: InNetworkReduction | None = None
    """SHARP / CollNet if the switches reduce; absent otherwise."""
    calibrated_sizes: MeasuredSizes | None = None
    """Written by ``calibrate fit``: the sizes measured to calibrate this tier (absent: its numbers are sourced)."""

    @model_validator(mode="after")
    def _check(self) -> "ScaleOutTier":
        check_link_terms("scale_out", "nic_bw_bytes_per_s", self.nic_bw_bytes_per_s, self.efficiency, self.latency_s)
        check_reduction(
            "scale_out", self.in_network_reduction, "sharp",
            "between nodes the switch reduction is SHARP; write name: sharp (or put nvls under scale_up)",
        )
        check_protocols(self.nccl_protocols)
        if self.oversubscription > 1.0 and not (self.oversubscription_source or "").strip():
            raise ProfileError(
                f"scale_out.oversubscription {self.oversubscription:g} needs oversubscription_source: "
                f"the document that states the spine's ratio (leave it at 1 when none does)"
            )
        return self

    @property
    def node_bw_bytes_per_s(self) -> float:
        """Achievable unidirectional bandwidth of the whole node: NICs × rate × efficiency / oversubscription."""
        return self.nics_per_node * self.nic_bw_bytes_per_s.value * self.efficiency.value / self.oversubscription


class HostLibraryTransport(Frozen):
    """One host library's (gloo, MPI) transport between the ranks of one node, as ``calibrate fit`` solved it
    against the library's own algorithms (collectives.libraries.host: T = call + messages·α + bytes·β + reduced·γ)."""

    call_s: Sourced[TimeSeconds]
    """Fixed cost of one collective call (the library's dispatch, e.g. torch's gloo work queue)."""
    message_s: Sourced[TimeSeconds]
    """α: one message between two ranks of the node, software included."""
    bw_bytes_per_s: Sourced[RateBytesPerS]
    """β⁻¹: one rank's one-way streaming rate to another rank of the node."""
    reduce_bw_bytes_per_s: Sourced[RateBytesPerS]
    """γ⁻¹: bytes of the buffer one rank combines per second on the CPU."""
    calibrated_sizes: MeasuredSizes | None = None
    """The message sizes the fit measured: a prediction for this library outside them is *extrapolated*
    (:mod:`commmodel.collectives.provenance`)."""

    @model_validator(mode="after")
    def _check(self) -> "HostLibraryTransport":
        for field in ("bw_bytes_per_s", "reduce_bw_bytes_per_s"):  # a zero rate priced every call at infinity
            check_positive(getattr(self, field).value, field)
        for field in ("call_s", "message_s"):
            if not getattr(self, field).value >= 0:
                raise ProfileError(f"{field} = {getattr(self, field).value!r} must be ≥ 0; write a time with its unit")
        return self


HOST_LIBRARY_KEYS = ("gloo", "mpi", "mpich")
"""The host libraries a profile's ``host_libraries`` may calibrate (collectives.libraries.HOST_LIBRARY_NAMES is this
tuple: one owner, in the layer both read)."""


class System(Frozen):
    """One node type (a DGX H100, a p4d instance, a PCIe box) and how its nodes join."""

    name: str = Field(min_length=1)
    """Profile name used on the command line (dgx-h100, aws-p5, ...)."""
    description: str = ""
    """What the system is, in words."""
    gpu: GPU
    """The accelerator in every slot."""
    gpus_per_node: int = Field(strict=True, ge=1, le=MAX_GPUS_PER_NODE)
    """GPUs in one node (one OS image), 1 to :data:`~commmodel.limits.MAX_GPUS_PER_NODE` as ``--gpus-per-node``."""
    scale_up: ScaleUpTier
    """The fast domain (NVSwitch, NVLink, PCIe)."""
    scale_out: ScaleOutTier | None = None
    """The network between domains; absent for a box that never scales out."""
    # a lambda, not `list`: pydantic reads a builtin factory's signature by tokenizing it (~1.3 ms, issue 17)
    sources: list[str] = Field(default_factory=lambda: [])
    """Documents describing the system as a whole (spec sheet, instance page)."""
    host_memory_bw_bytes_per_s: Sourced[RateBytesPerS] | None = None
    """Peak CPU memory bandwidth of one node, all sockets (channels × transfer rate × 8 B). Optional; it
    bounds host-staged PCIe (pcie_host), where every staged byte is written to and read from host memory."""
    host_link_bw_bytes_per_s: Sourced[RateBytesPerS] | None = None
    """GPU <-> host bandwidth of one GPU, each direction, all GPUs copying at once, where this system differs from its
    GPU's own (a host that caps the link; a shared link counts half for each). Optional; see :meth:`host_link`."""
    host_cores: Sourced[float] | None = None
    """CPU cores of one node (CPU hosts for gloo/MPI: its ranks share them). Optional; where a node runs more ranks
    than it has cores, the host libraries time-share each core among them (collectives.libraries.host)."""
    host_llc_bytes: Sourced[SizeBytes] | None = None
    """Last-level cache of one node, all sockets (CPU hosts for gloo/MPI). Optional; the share of the ranks' buffers
    that fits in it stays resident between calls, and a host library whose transport is a memory copy (MPI's shared
    memory) copies that share at its cache-resident rate (collectives.libraries.host)."""
    host_libraries: dict[str, HostLibraryTransport] | None = None
    """Calibrated intra-node transport per host library (``gloo``, ``mpi``, ``mpich``); a library not listed uses its
    defaults (collectives.libraries.gloo / .mpi). Written by ``calibrate fit`` on a ``--backend gloo|mpi`` CSV."""

    @model_validator(mode="after")
    def _check(self) -> "System":
        for field in ("host_memory_bw_bytes_per_s", "host_cores", "host_link_bw_bytes_per_s", "host_llc_bytes"):
            if getattr(self, field) is not None:
                check_positive(getattr(self, field).value, field)
        unknown = sorted(set(self.host_libraries or {}) - set(HOST_LIBRARY_KEYS))
        if unknown:  # a misspelt key was ignored, and the library priced uncalibrated
            raise ProfileError(f"host_libraries has {', '.join(map(repr, unknown))}: the host libraries are "
                               f"{', '.join(HOST_LIBRARY_KEYS)}")
        domain = self.scale_up.domain_size
        if domain < self.gpus_per_node and self.gpus_per_node % domain:
            raise ProfileError(
                f"scale_up.domain_size {domain} does not divide gpus_per_node {self.gpus_per_node}; "
                f"set domain_size to {self.gpus_per_node} (one domain per node), to a divisor of it, "
                f"or to a multiple of it for a rack-scale domain such as NVL72"
            )
        if domain > self.gpus_per_node and domain % self.gpus_per_node:
            raise ProfileError(
                f"scale_up.domain_size {domain} spans nodes but is not a multiple of gpus_per_node "
                f"{self.gpus_per_node} ({domain} / {self.gpus_per_node} = {domain / self.gpus_per_node:g} nodes); "
                f"use a whole number of nodes, e.g. {self.gpus_per_node * max(1, domain // self.gpus_per_node)}"
            )
        return self

    @property
    def ranks_are_cpus(self) -> bool:
        """Whether one rank of this system is a CPU process (scale-up ``host_loopback``: a CPU host for gloo/MPI), not
        a GPU: the one test every library rule, default and output wording reads."""
        return self.scale_up.kind == "host_loopback"

    def host_link(self) -> Sourced[float] | None:
        """GPU <-> host bandwidth each way (prices offload copies): the system's, else its GPU's / gpus_per_host_link."""
        own, share = self.gpu.host_link_bw_bytes_per_s, self.scale_up.gpus_per_host_link
        if self.host_link_bw_bytes_per_s is not None or own is None or share == 1:
            return self.host_link_bw_bytes_per_s or own
        return Sourced[float](value=own.value / share, source=f"{own.source}; / {share} GPUs per switch uplink")
