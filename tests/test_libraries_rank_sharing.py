"""Ranks sharing a host's cores (collectives/libraries/host.py ``rank_sharing``): every rank is runnable in a ring or
where waiting ranks poll (Open MPI); in a binomial tree whose waiting ranks sleep (gloo) round k has 2^(k+1)."""

from __future__ import annotations

import numpy as np
import pytest

from commmodel.collectives.libraries import get_library, host_library_cost, host_transport
from commmodel.collectives.libraries.host import rank_sharing
from commmodel.hardware.models import Sourced
from commmodel.io.profiles import load_system

HOST = load_system("cpu-host")


def _host(cores: float, ranks: int):
    return HOST.model_copy(update={"host_cores": Sourced(value=cores, source="test"), "gpus_per_node": ranks})


def _sharing(cores: float, ranks: int, form: str, op: str, sleeping: bool):
    n = np.array([float(ranks)])
    return [float(x[0]) for x in rank_sharing(_host(cores, ranks), form, op, n, n, sleeping)]


def test_gloo_binomial_broadcast_shares_the_cores_only_with_the_round_s_ranks() -> None:
    # 4 ranks, 2 cores: round 0 ranks 0 -> 1 (f 1, never waits), round 1 0 -> 2 and 1 -> 3 (f 2, waits half the time)
    assert _sharing(2, 4, "binomial_tree", "broadcast", True) == pytest.approx([2.0, 1.5, 0.25])
    # 8 ranks, 2 cores: rounds of 2, 4 and 8 ranks: f 1, 2, 4
    assert _sharing(2, 8, "binomial_tree", "broadcast", True) == pytest.approx([4.0, 7 / 3, (0.5 + 0.75) / 3])
    # 2 ranks on 2 cores: nothing shared
    assert _sharing(2, 2, "binomial_tree", "broadcast", True) == pytest.approx([1.0, 1.0, 0.0])


def test_polling_ranks_and_rings_share_every_round() -> None:
    assert _sharing(2, 4, "binomial_tree", "broadcast", False) == pytest.approx([2.0, 2.0, 0.5])  # Open MPI polls
    assert _sharing(2, 4, "ring", "all_reduce", True) == pytest.approx([2.0, 2.0, 0.5])  # every rank in every step


def test_only_gloo_sleeps_and_its_tree_is_cheaper_than_a_polling_one() -> None:
    system = _host(2, 4)
    spans, per_node = np.array([False]), np.array([4.0])
    assert host_transport(get_library("gloo"), system, spans, per_node).sleeping_waits
    assert not host_transport(get_library("mpi"), system, spans, per_node).sleeping_waits
    size = np.array([1048576.0])
    lat, bw, _, names = host_library_cost(get_library("gloo"), "broadcast", size, system, np.array([4.0]), per_node)
    assert names[0] == "binomial_tree"
    tr = host_transport(get_library("gloo"), system, spans, per_node)
    # the sleeping tree pays the mean of its rounds (0 at f 1, 1 at f 2, each one message of S: α + S/β), the call
    # at f 2 (every rank enters it); TCP's tree rounds stream S once (not an exchange)
    one_round = float(tr.message_s[0]) + size[0] / float(tr.bw_bytes_per_s[0])
    expected = 2.0 * tr.call_s + 1.0 * one_round + (2.0 * one_round + 0.5 * tr.wait_s)
    assert float(lat[0] + bw[0]) == pytest.approx(expected, rel=1e-9)
