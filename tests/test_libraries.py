"""The library axis: decision rules against the libraries' own source tables, host closed forms, defaults."""

from __future__ import annotations

import numpy as np
import pytest
import yaml

from commmodel.collectives import collective_cost
from commmodel.collectives.libraries import default_library, get_library
from commmodel.collectives.libraries.gloo import LOOPBACK_TCP_BW_BYTES_PER_S, LOOPBACK_TCP_LATENCY_S
from commmodel.collectives.libraries.mpi import mpich_choose, ompi_choose
from commmodel.errors import CollectiveError
from commmodel.io.profiles import load_system, profiles_dir

# Cells read off open-mpi/ompi@ea8f4d03 ompi/mca/coll/tuned/coll_tuned_decision_fixed.c (same at main 8efebee7)
OMPI_CELLS = [
    # (op, ranks, S bytes, algorithm): allreduce commutative branch, "communicator_size < 4" row
    ("all_reduce", 2, 4, "ring"), ("all_reduce", 2, 1000, "recursive_doubling"),
    ("all_reduce", 2, 100_000, "segmented_ring"), ("all_reduce", 2, 262_144, "rabenseifner"),
    ("all_reduce", 4, 8, "ring"), ("all_reduce", 4, 16, "recursive_doubling"), ("all_reduce", 4, 8192, "rabenseifner"),
    ("all_reduce", 50, 100, "segmented_ring"), ("all_reduce", 64, 100_000, "recursive_doubling"),
    ("all_reduce", 200, 1000, "nonoverlapping"), ("all_reduce", 5000, 20_000, "recursive_doubling"),
    # bcast: "< 4" row 262144 <= S < 524288 -> basic_linear; "< 8" row S >= 1048576 -> chain
    ("broadcast", 2, 300_000, "basic_linear"), ("broadcast", 2, 20, "pipeline"), ("broadcast", 4, 1 << 20, "chain"),
    ("broadcast", 4, 100, "binomial"), ("broadcast", 16, 2 << 20, "scatter_allgather"),
    # allgather: size == 2 -> two_proc; < 32 -> recursive doubling; "< 64" row compares per-rank bytes
    ("all_gather", 2, 1 << 20, "two_proc"), ("all_gather", 16, 1 << 20, "recursive_doubling"),
    ("all_gather", 40, 40 * 2000, "neighbor"), ("all_gather", 40, 40 * 1000, "recursive_doubling"),
    ("all_gather", 40, 40 * 65536, "ring"),
]


@pytest.mark.parametrize("op, ranks, size, expected", OMPI_CELLS)
def test_open_mpi_fixed_decisions_match_the_source_table(op, ranks, size, expected):
    assert ompi_choose(op, np.asarray(ranks), np.asarray(size)).item() == expected


# pmodels/mpich@6a79bf65 src/mpi/coll/cvars.txt defaults with mpir_coll_sched_auto.c's comparisons
MPICH_CELLS = [
    ("all_reduce", 8, 2048, "recursive_doubling"), ("all_reduce", 8, 2049, "rabenseifner"),
    ("all_gather", 6, 1000, "bruck"), ("all_gather", 8, 100_000, "recursive_doubling"),
    ("all_gather", 6, 100_000, "ring"), ("all_gather", 8, 600_000, "ring"),
    ("broadcast", 4, 1 << 20, "binomial_tree"), ("broadcast", 16, 12_287, "binomial_tree"),
    ("broadcast", 16, 1 << 20, "scatter_allgather"),
]


@pytest.mark.parametrize("op, ranks, size, expected", MPICH_CELLS)
def test_mpich_thresholds_match_its_cvars(op, ranks, size, expected):
    assert mpich_choose(op, np.asarray(ranks), np.asarray(size)).item() == expected


def test_default_library_per_system_says_why():
    assert default_library(load_system("dgx-h100"))[0] == "nccl"
    assert default_library(load_system("amd-mi300x"))[0] == "rccl"
    name, why = default_library(load_system("cpu-host"))
    assert name == "gloo" and "CPU" in why
    with pytest.raises(CollectiveError, match="unknown library"):
        get_library("ucc")


def test_gloo_ring_all_reduce_is_its_closed_form_on_a_cpu_host():
    cpu = load_system("cpu-host")
    s, n = np.array([1e3, 1e6, 1e8]), 4
    c = collective_cost("all_reduce", s, cpu, n, n, library="gloo")
    # torch's call 60 us; α = loopback link 23 us + gloo's hand-off 63 us; β: 2.7 GB/s, copied at both ends of an
    # exchange (× 2); γ: 3 bytes of traffic per reduced byte at the rank's 97.5 GB/s. gloo/allreduce.cc cuts S into
    # roundUp(max(ceil(S / 1 MiB), 2n), n) segments, each its own message: 8, 8 and 96 (= ceil(1e8 / 2^20)) here,
    # i.e. k = 2, 2, 24 per rank and 2(n − 1)·k messages.
    k = np.array([2.0, 2.0, 24.0])
    call, alpha, beta, gamma = 60e-6, 23e-6 + 63e-6, 2 / 2.7e9, 3 / 97.5e9
    expected = call + 2 * (n - 1) * k * alpha + 2 * (n - 1) / n * s * beta + (n - 1) / n * s * gamma
    assert np.allclose(c.time_s, expected, rtol=1e-9)
    assert list(c.algorithm) == ["ring"] * 3


def test_gloo_ring_segments_follow_allreduce_cc():
    from commmodel.collectives.libraries.gloo import gloo_ring_segments_per_rank

    # numSegments = roundUp(max(ceil(S / 1 MiB), 2n), n): 2 ranks × 4 MiB -> max(4, 4) = 4 -> 2 per rank;
    # 2 ranks × 5 MiB -> 5 -> roundUp 6 -> 3; 3 ranks × 10 MiB -> 10 -> roundUp 12 -> 4; 4 ranks × 1 KiB -> 8 -> 2.
    n, s = np.array([2, 2, 3, 4]), np.array([4 << 20, 5 << 20, 10 << 20, 1024])
    assert list(gloo_ring_segments_per_rank(n, s)) == [2, 3, 4, 2]


def test_gloo_all_gather_sends_each_block_as_two_halves():
    cpu = load_system("cpu-host")
    one = collective_cost("all_gather", np.array([1.0]), cpu, 4, 4, library="gloo")
    # gloo/allgather.cc: 2(n − 1) = 6 messages of α = 86 us after torch's 60 us call (1 byte: the bytes are nil)
    assert one.time_s[0] == pytest.approx(60e-6 + 6 * 86e-6, rel=1e-3)


def test_gloo_loopback_constants_are_the_catalogue_link():
    link = yaml.safe_load((profiles_dir() / "links.yaml").read_text())["loopback-tcp"]
    assert float(str(link["latency_s"]["value"]).split()[0]) * 1e-6 == pytest.approx(LOOPBACK_TCP_LATENCY_S)
    assert float(str(link["bw_bytes_per_s"]["value"]).split()[0]) * 1e9 == pytest.approx(LOOPBACK_TCP_BW_BYTES_PER_S)


def test_mpi_binomial_broadcast_closed_form_and_rule_mix():
    cpu = load_system("cpu-host")
    from commmodel.collectives.libraries.mpi import SHM_CACHED_BW_BYTES_PER_S, SHM_MESSAGE_S

    c = collective_cost("broadcast", 100.0, cpu, 8, 8, library="mpich")  # n ≥ 8 but S short: binomial
    assert c.algorithm.item() == "binomial_tree"  # eager messages (≤ 4 KiB), buffers resident in the 2.3 GB L3
    assert c.time_s == pytest.approx(3 * SHM_MESSAGE_S + 3 * 100.0 / SHM_CACHED_BW_BYTES_PER_S)


def test_nccl_library_changes_no_number_and_gloo_is_slower_on_gpus():
    h100 = load_system("dgx-h100")
    sizes = np.logspace(3, 9, 7)
    plain = collective_cost("all_reduce", sizes, h100, 16)
    nccl = collective_cost("all_reduce", sizes, h100, 16, library="nccl")
    assert np.array_equal(plain.time_s, nccl.time_s)
    gloo = collective_cost("all_reduce", sizes, h100, 16, library="gloo")
    assert np.all(gloo.time_s > 10 * nccl.time_s)


def test_rccl_never_runs_nvls_and_time_grows_with_size():
    mi = load_system("amd-mi300x")
    c = collective_cost("all_reduce", np.logspace(2, 10, 30), mi, 16, library="rccl", selection="library")
    assert set(c.algorithm) <= {"ring", "tree"}
    assert np.all(np.diff(c.time_s) >= 0)


@pytest.mark.parametrize("lib", ["gloo", "mpi", "mpich"])
@pytest.mark.parametrize("op", ["all_reduce", "all_gather", "broadcast"])
def test_host_libraries_never_beat_the_lower_bound(lib, op):
    from commmodel.collectives.libraries.mpi import SHM_CACHED_BW_BYTES_PER_S

    cpu = load_system("cpu-host")
    sizes = np.logspace(2, 9, 30)
    for n in (2, 3, 4, 8):
        c = collective_cost(op, sizes, cpu, n, n, library=lib)
        bw = 2.7e9 if lib == "gloo" else SHM_CACHED_BW_BYTES_PER_S  # MPI's fastest: a cache-resident copy
        factor = {"all_reduce": 2 * (n - 1) / n, "all_gather": (n - 1) / n, "broadcast": 1.0}[op]
        assert np.all(c.time_s >= factor * sizes / bw * (1 - 1e-9))


def test_compare_nccl_gloo_says_the_ratio_and_why():
    from typer.testing import CliRunner

    from commmodel.cli.app import app

    result = CliRunner().invoke(app, ["compare", "-m", "1B", "--system", "dgx-h100", "--gpus", "16",
                                      "--library", "nccl", "--library", "gloo", "--json"])
    assert result.exit_code == 0, result.output
    import json

    doc = json.loads(result.output)
    nccl, gloo = doc["targets"]
    note = doc["library_notes"][0]
    assert f"takes {gloo['step_time_s'] / nccl['step_time_s']:.2f}x the step time" in note
    assert gloo["exposed_comm_fraction"] > nccl["exposed_comm_fraction"]  # the gap is communication, not compute
    assert "dp/" in note and "TCP" in note and "on the CPU" in note and "host memory" in note and "NVLink" in note


@pytest.mark.parametrize(("library", "wait_s"), [("gloo", 2 * 0.70e-3 / 3), ("mpi", 51e-6)])
def test_ranks_beyond_cores_time_share_alpha_and_rates(library, wait_s):
    """4 ranks on a 2-core host: f = 2 ranks per core, so the call, α and the byte terms double (every term is CPU
    work) and each message waits (1 − 1/f)·wait for a receiver off its core (gloo: the first of the 2 busy cores to end
    its slice, 0.70 ms × (1 + log2 2) / (2 + 1); MPI: a yield round); on 176 cores (cpu-host as shipped) nothing changes."""
    from commmodel.collectives.libraries import FORMS, get_library
    from commmodel.hardware.models import Sourced
    from commmodel.hardware.cluster import Cluster
    from commmodel.io.profiles import load_system

    shipped = load_system("cpu-host")
    two_cores = shipped.model_copy(update={"host_cores": Sourced[float](value=2.0, source="test: a 2-core host")})
    no_count = shipped.model_copy(update={"host_cores": None})
    sizes = np.array([8.0, 64e3, 4e6])

    def cost(system, n):
        view = Cluster.for_gpus(system, n, n).system
        return collective_cost("all_reduce", sizes, view, n, n, library=library, selection="library")

    shared, alone, unknown = cost(two_cores, 4), cost(shipped, 4), cost(no_count, 4)
    lib = get_library(library)
    key = [(lib.form_of("all_reduce", a), "all_reduce") for a in alone.algorithm]
    msgs = np.array([(lib.forms.get(k) or FORMS[k])(np.array(4.0), s)[0] for k, s in zip(key, sizes)])
    np.testing.assert_allclose(shared.latency_s, 2 * alone.latency_s + 0.5 * wait_s * msgs, rtol=1e-12)
    np.testing.assert_allclose(shared.bandwidth_s, 2 * alone.bandwidth_s, rtol=1e-12)
    np.testing.assert_allclose(unknown.time_s, alone.time_s, rtol=1e-12)
    np.testing.assert_allclose(cost(two_cores, 2).time_s, cost(shipped, 2).time_s, rtol=1e-12)  # one rank per core


def test_mpi_linear_broadcast_costs_one_receiver_copy_over_single_copy_shared_memory():
    """Open MPI on 4 ranks picks basic_linear for 8 KiB ≤ S < 1 MiB (coll_tuned_decision_fixed.c); over vader's
    single copy (CMA) each peer copies S from the root at once: 3 messages + one S, not 3·S on the root. Each message
    is above vader's 4 KiB eager limit (a rendezvous) and the buffers are resident in the host's L3."""
    from commmodel.collectives.libraries.mpi import SHM_CACHED_BW_BYTES_PER_S, SHM_RENDEZVOUS_S

    c = collective_cost("broadcast", 20000.0, load_system("cpu-host"), 4, 4, library="mpi", selection="library")
    assert c.algorithm.item() == "basic_linear"
    assert c.time_s == pytest.approx(3 * SHM_RENDEZVOUS_S + 20000.0 / SHM_CACHED_BW_BYTES_PER_S)


def test_selection_library_is_nccls_synonym_and_the_footnote_names_the_right_one() -> None:
    """--selection nccl means "the library's own choice" for every library; --selection library says so for the
    others, and the footnote of a host library no longer reads "--selection nccl"."""
    from typer.testing import CliRunner

    from commmodel.cli.app import app

    def run(*extra: str) -> str:
        result = CliRunner().invoke(app, ["collective", "all_reduce", "--system", "dgx-h100", "--gpus", "8",
                                          "--size", "1MiB", *extra])
        assert result.exit_code == 0, result.output
        return result.output

    assert run("--library", "mpi").splitlines()[-1].startswith("* mpi's own choice (--selection library): ")
    assert run("--selection", "library") == run("--selection", "nccl")
    assert "* nccl's own choice (--selection nccl): " in run()


@pytest.mark.parametrize("library", ["mpi", "mpich"])
@pytest.mark.parametrize("algorithm", ["bcube", "ring_chunked", "halving_doubling"])
def test_mpi_libraries_refuse_gloo_only_algorithms(library, algorithm):
    """`--library mpi --algo bcube` was priced (and listed by --algo all) though only gloo implements bcube,
    ring-chunked and halving-doubling; gloo already refused MPI's rabenseifner."""
    from commmodel.errors import CollectiveError
    from commmodel.io.profiles import load_system

    with pytest.raises(CollectiveError, match=f"{library} has no '{algorithm}' for all_reduce"):
        collective_cost("all_reduce", 2**20, load_system("cpu-host"), 4, library=library, algorithm=algorithm)


@pytest.mark.parametrize("library", ["gloo", "mpi", "mpich"])
def test_host_selection_fastest_is_the_fastest_of_the_library_algorithms(library: str) -> None:
    """``--selection fastest`` on a host library picks by time, element-wise, among the forms ``--algo all`` lists
    (audit: Open MPI's rule was reported as "fastest" while an algorithm 600× faster stood in the same table)."""
    from commmodel.collectives.api import collective_cost, library_algorithm_costs
    from commmodel.io.profiles import load_system

    system = load_system("eth-8x-h100-400g")
    sizes = np.array([8.0, 13777.0, 1 << 20, 1 << 28])
    for n, per_node in ((4096, 1), (16, 8), (6, 2)):
        fastest = collective_cost("all_reduce", sizes, system, n, per_node, library=library, selection="fastest")
        each = library_algorithm_costs("all_reduce", sizes, system, n, library, per_node)
        least = np.min([c.latency_s + c.bandwidth_s for c in each.values()], axis=0)
        np.testing.assert_allclose(fastest.latency_s + fastest.bandwidth_s, least, rtol=1e-12)
