"""A system's NCCL protocol restriction (System.nccl_protocols) is honoured by both selections."""

import numpy as np
import pytest

from commmodel.collectives import collective_cost
from commmodel.collectives.topology import protocol_restriction_note
from commmodel.errors import CollectiveError
from commmodel.hardware.catalogue import with_network
from commmodel.io.profiles import load_links, load_system

SIZES_BYTES = 2.0 ** np.arange(3, 34, 2)


@pytest.mark.parametrize("selection", ["nccl", "fastest"])
@pytest.mark.parametrize("name", ["aws-p4d", "aws-p4de", "gcp-a3-mega"])
def test_restricted_systems_price_simple_only(name, selection):
    cost = collective_cost("all_reduce", SIZES_BYTES, load_system(name), 16, selection=selection)
    assert set(cost.protocol.tolist()) == {"Simple"}


def test_unrestricted_system_keeps_ll_at_8_bytes():
    cost = collective_cost("all_reduce", 8.0, load_system("dgx-a100"), 16, selection="nccl")
    assert str(cost.protocol) == "LL"


def test_forced_disallowed_protocol_is_an_error_naming_what_is_allowed():
    with pytest.raises(CollectiveError, match="aws-p4de allows Simple"):
        collective_cost("all_reduce", 8.0, load_system("aws-p4de"), 16, protocol="LL")


def test_restriction_note_and_network_swap():
    p4de = load_system("aws-p4de")
    assert protocol_restriction_note(p4de).startswith("protocols: Simple only on aws-p4de: aws-ofi-nccl forces")
    assert protocol_restriction_note(load_system("dgx-a100")) is None
    swapped = with_network(p4de, load_links()["ib-hdr"], 4)  # the plugin fact belongs to the EFA network
    assert swapped.nccl_protocols is None
