"""``ShippedSystems`` (the query's lazily validated system catalogue) equals the eager one (issue 17)."""

from commmodel.io.profiles import ShippedSystems, list_systems, load_gpus


def test_same_names_and_systems_as_list_systems():
    eager = {s.name: s for s in list_systems()}
    lazy = ShippedSystems()
    assert list(lazy) == list(eager)
    assert len(lazy) == len(eager)
    assert all(lazy[name] == eager[name] for name in eager)


def test_with_gpus_picks_what_a_filter_over_every_system_picks():
    eager = list_systems()
    for gpu_name in [*load_gpus(), "no-such-gpu"]:
        names = [gpu_name]
        assert ShippedSystems().with_gpus(names) == [s for s in eager if s.gpu.name in names]
    pair = ["h100-sxm-80gb", "a100-sxm-80gb"]
    assert ShippedSystems().with_gpus(pair) == [s for s in eager if s.gpu.name in pair]
