"""Open MPI's shared-memory copies at the last-level cache's rate while the ranks' buffers fit in it, at the memory
stream rate as they outgrow it (collectives.libraries.host ``copy_s_per_byte``), and a rendezvous α above vader's
eager limit. Constants: collectives/libraries/mpi.py (``benchmarks/host_microbench.py --sweep``); the generic host's
2.3 GB L3: hardware_profiles/systems/cpu-host.yaml (Azure HBv4 documentation)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from commmodel.collectives import collective_cost
from commmodel.collectives.libraries import host_transport, get_library
from commmodel.collectives.libraries.host import Transport, copy_s_per_byte, resident_fraction
from commmodel.collectives.libraries.mpi import (
    SHM_BW_BYTES_PER_S,
    SHM_CACHED_BW_BYTES_PER_S,
    SHM_EAGER_LIMIT_BYTES,
    SHM_MESSAGE_S,
    SHM_RENDEZVOUS_S,
)
from commmodel.hardware.models import Sourced
from commmodel.io.profiles import load_system

MIB = 2.0**20


def _host(llc_bytes: float | None):
    cpu = load_system("cpu-host")
    llc = None if llc_bytes is None else Sourced[float](value=llc_bytes, source="test: a host's last-level cache")
    return cpu.model_copy(update={"host_llc_bytes": llc})


def _broadcast_2(size_bytes, system) -> np.ndarray:
    """Open MPI broadcast on 2 ranks: one message of S whatever the table's row (binary tree, chain, linear)."""
    return collective_cost("broadcast", size_bytes, system, 2, 2, library="mpi", selection="library").time_s


def test_shipped_host_has_its_sourced_l3():
    llc = load_system("cpu-host").host_llc_bytes
    assert llc.value == pytest.approx(2.3e9) and "HBv4" in llc.source


def test_a_message_that_fits_the_cache_is_copied_at_the_cache_rate():
    """2 MiB on 2 ranks of the 2.3 GB host: one rendezvous message, S at 15.2 GB/s (138.0 + 2.1 = 140.1 us)."""
    t = _broadcast_2(2 * MIB, load_system("cpu-host"))
    assert t == pytest.approx(SHM_RENDEZVOUS_S + 2 * MIB / SHM_CACHED_BW_BYTES_PER_S)
    assert t == pytest.approx(140.07e-6, rel=1e-3)


def test_a_message_that_outgrows_the_cache_is_copied_at_the_stream_rate():
    """No cache known: every byte streams (5.52 GB/s). A 32 MiB cache and 2 ranks of 64 MiB: a quarter of each buffer
    is resident, h = 16/64, so a byte costs 0.25/15.2 + 0.75/5.52 ns."""
    assert _broadcast_2(64 * MIB, _host(None)) == pytest.approx(SHM_RENDEZVOUS_S + 64 * MIB / SHM_BW_BYTES_PER_S)
    blended = SHM_RENDEZVOUS_S + 64 * MIB * (0.25 / SHM_CACHED_BW_BYTES_PER_S + 0.75 / SHM_BW_BYTES_PER_S)
    assert _broadcast_2(64 * MIB, _host(32 * MIB)) == pytest.approx(blended)
    assert _broadcast_2(16 * MIB, _host(32 * MIB)) == pytest.approx(
        SHM_RENDEZVOUS_S + 16 * MIB / SHM_CACHED_BW_BYTES_PER_S)  # 2 × 16 MiB fill the 32 MiB exactly


def test_eager_up_to_the_limit_rendezvous_above():
    cpu = load_system("cpu-host")
    at, above = _broadcast_2(np.array([SHM_EAGER_LIMIT_BYTES, SHM_EAGER_LIMIT_BYTES + 4]), cpu)
    assert at == pytest.approx(SHM_MESSAGE_S + SHM_EAGER_LIMIT_BYTES / SHM_CACHED_BW_BYTES_PER_S)
    assert above == pytest.approx(SHM_RENDEZVOUS_S + (SHM_EAGER_LIMIT_BYTES + 4) / SHM_CACHED_BW_BYTES_PER_S)


def test_gloo_tcp_and_gpu_systems_have_no_cache_rate():
    spans, per_node = np.asarray(False), np.asarray(2.0)
    cpu = load_system("cpu-host")
    assert host_transport(get_library("gloo"), cpu, spans, per_node).cached_bw_bytes_per_s is None
    assert host_transport(get_library("mpi"), load_system("dgx-h100"), spans, np.asarray(8.0)).cached_bw_bytes_per_s \
        is None


@settings(max_examples=60, deadline=None)
@given(cache_mib=st.floats(1.0, 4096.0), ranks=st.integers(2, 8), size_mib=st.floats(1e-3, 1e4),
       step=st.floats(1e-9, 1.0))
def test_per_byte_time_is_continuous_and_grows_with_the_buffer(cache_mib, ranks, size_mib, step):
    tr = Transport(message_s=np.asarray(1e-6), bw_bytes_per_s=np.asarray(SHM_BW_BYTES_PER_S), reduce_bw_bytes_per_s=1e10,
                   staging_bw_bytes_per_s=np.inf, cached_bw_bytes_per_s=np.asarray(SHM_CACHED_BW_BYTES_PER_S),
                   cache_bytes=cache_mib * MIB / ranks)
    size = size_mib * MIB
    small, big = copy_s_per_byte(tr, size), copy_s_per_byte(tr, size * (1.0 + step))
    assert 1.0 / SHM_CACHED_BW_BYTES_PER_S * (1 - 1e-12) <= small <= big <= 1.0 / SHM_BW_BYTES_PER_S * (1 + 1e-12)
    assert big - small <= step * (1.0 / SHM_BW_BYTES_PER_S - 1.0 / SHM_CACHED_BW_BYTES_PER_S) + 1e-24  # Lipschitz
    assert resident_fraction(tr.cache_bytes, size) == pytest.approx(min(1.0, cache_mib / ranks / size_mib))


@settings(max_examples=30, deadline=None)
@given(cache_mib=st.floats(1.0, 4096.0), ranks=st.sampled_from([2, 4, 8]))
def test_forced_algorithm_time_never_falls_with_size(cache_mib, ranks):
    sizes = np.logspace(4, 10, 40)
    c = collective_cost("all_reduce", sizes, _host(cache_mib * MIB), ranks, ranks, library="mpi",
                        algorithm="rabenseifner")
    assert np.all(np.diff(c.time_s) >= 0)


def test_open_mpi_all_gather_copies_its_own_block_first():
    """coll_base_allgather.c (v4.1.4): from a separate send buffer, each rank first copies its S/n block into the
    output. 2 MiB on 2 ranks (two_proc): one rendezvous message, 1 MiB at the cache rate, and the 1 MiB local copy,
    2 bytes of memory traffic per byte at the rank's 97.5 GB/s share of the host's DRAM (cpu-genoa-x-22c)."""
    cpu = load_system("cpu-host")
    c = collective_cost("all_gather", 2 * MIB, cpu, 2, 2, library="mpi", selection="library")
    assert c.algorithm.item() == "two_proc"
    copy_s = MIB * 2.0 / cpu.gpu.hbm_bw_bytes_per_s.value
    assert c.time_s == pytest.approx(SHM_RENDEZVOUS_S + MIB / SHM_CACHED_BW_BYTES_PER_S + copy_s)
    assert copy_s == pytest.approx(21.51e-6, rel=1e-3)
    inplace_free = collective_cost("all_reduce", 2 * MIB, cpu, 2, 2, library="mpi", selection="library")
    assert inplace_free.algorithm.item() == "rabenseifner"  # all-reduce runs in place: nothing copied around it
    assert inplace_free.time_s == pytest.approx(2 * SHM_RENDEZVOUS_S + 2 * MIB / SHM_CACHED_BW_BYTES_PER_S
                                                + MIB * 3.0 / cpu.gpu.hbm_bw_bytes_per_s.value)


@pytest.mark.parametrize(("entry", "message"), [
    ({"gloo": {"bw_bytes_per_s": "0 GB/s"}}, "bw_bytes_per_s = 0.0 must be > 0"),
    ({"glooo": {}}, "host_libraries has 'glooo': the host libraries are gloo, mpi, mpich"),
])
def test_a_calibrated_host_library_entry_is_checked(entry, message):
    """`profiles validate` said ok to a zero rate (every call then priced at infinity, a divide-by-zero warning) and
    to a misspelt library key (ignored: the library priced uncalibrated)."""
    from commmodel.errors import ProfileError
    from commmodel.hardware.models import System
    from commmodel.io.profiles import load_system

    good = {key: {"value": value, "source": "test fit"} for key, value in (
        ("call_s", "10 us"), ("message_s", "5 us"), ("bw_bytes_per_s", "2 GB/s"), ("reduce_bw_bytes_per_s", "4 GB/s"))}
    name, fields = next(iter(entry.items()))
    libs = {name: {**good, **{k: {"value": v, "source": "test fit"} for k, v in fields.items()}}}
    with pytest.raises((ProfileError, ValueError), match=message):
        System.model_validate({**load_system("cpu-host").model_dump(), "host_libraries": libs})
