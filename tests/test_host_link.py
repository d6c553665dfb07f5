"""GPU <-> host bandwidth (offload copies): each GPU's datasheet link, a system's override, a shared switch uplink."""

from __future__ import annotations

import pytest

from commmodel.io.profiles import list_systems, load_system

PCIE_X16_GB_PER_S = {3: 8 * 16 * 128 / 130 / 8, 4: 16 * 16 * 128 / 130 / 8, 5: 32 * 16 * 128 / 130 / 8}
"""PCIe x16 each way: GT/s × 16 lanes × 128b/130b / 8 bits (PCI-SIG base specs 3.0-5.0)."""


@pytest.mark.parametrize("name, gb_per_s", [
    ("dgx-a100", 32.0), ("dgx-h100", 64.0), ("hgx-h200", 64.0), ("hgx-h800", 64.0), ("hgx-b200", 64.0),
    ("hgx-b300", 64.0), ("meta-grand-teton-h100", 64.0), ("amd-mi300x", 64.0),
    ("alps-gh200", 450.0),                            # NVLink-C2C 900 GB/s both ways, one GPU per Grace
    ("gb200-nvl72", 225.0), ("gb300-nvl72", 225.0),   # the same C2C shared by a superchip's two GPUs
    ("pcie-8x-rtx4090", 31.5), ("pcie-2x-rtx2080ti", 15.75 / 2),  # Gen4 x16; Gen3 x16 uplink shared by 2 GPUs
])
def test_host_link_per_gpu(name: str, gb_per_s: float) -> None:
    link = load_system(name).host_link()
    assert link is not None and link.value == pytest.approx(gb_per_s * 1e9)
    assert link.source


def test_datasheet_rounding_matches_the_pcie_line_rate() -> None:
    """The datasheets' 64/128 GB/s both ways are PCIe Gen4/Gen5 x16 line rates rounded up by < 2%."""
    assert load_system("dgx-h100").host_link().value == pytest.approx(PCIE_X16_GB_PER_S[5] * 1e9, rel=0.02)
    assert load_system("dgx-a100").host_link().value == pytest.approx(PCIE_X16_GB_PER_S[4] * 1e9, rel=0.02)
    assert load_system("pcie-2x-rtx2080ti").host_link().value == pytest.approx(PCIE_X16_GB_PER_S[3] / 2 * 1e9, rel=1e-3)


def test_a_system_value_overrides_its_gpu() -> None:
    system = load_system("dgx-h100")
    capped = system.model_copy(update={"host_link_bw_bytes_per_s": system.gpu.host_link_bw_bytes_per_s.model_copy(
        update={"value": 32e9, "source": "Gen4 host"})})
    assert capped.host_link().value == 32e9 and capped.host_link().source == "Gen4 host"


def test_every_gpu_system_states_a_host_link() -> None:
    """Offload copies are priced on every shipped GPU system; only CPU hosts have no GPU link."""
    missing = [s.name for s in list_systems() if s.host_link() is None]
    assert missing == ["cpu-host"]


def test_offload_and_gloo_staging_copy_at_one_pinned_rate():
    """One owner for a pinned host↔device copy (commmodel/hardware/host_copy.py): activation offload and the host
    libraries' staging of GPU tensors price the same 55.4/63 of the host link (nvbandwidth on PCIe Gen5 x16,
    stas00/ml-engineering @744d01e); 64 GB/s Gen5 x16 on a DGX H100 gives 56.3 GB/s."""
    from commmodel.collectives.libraries.host import staging_bw_bytes_per_s
    from commmodel.hardware.host_copy import pinned_copy_bw
    from commmodel.step.host_offload import offload_line

    system = load_system("dgx-h100")
    rate = pinned_copy_bw(system)
    assert rate.value == pytest.approx(64e9 * 55.4 / 63.0) == pytest.approx(56.28e9, rel=1e-3)
    assert staging_bw_bytes_per_s(system) == rate.value
    assert "copies priced at 56.3 GB/s each way per GPU" in offload_line(system)
