"""RCCL 2.20.5, the release ROCm 6.2.x ships: the tuner tables ``--library rccl-2.20`` chooses by.

Read from ROCm/rccl tag ``rocm-6.2.0`` (:data:`COMMIT_620`; ``rocm-6.2.1``/``rocm-6.2.2`` = d3806937 change no
file under src/graph, src/enqueue.cc or src/include/{device,comm}.h; ``makefiles/version.mk``: 2.20.5). What
differs from the newest stored source (:mod:`.rccl_tuning`), each in that commit's ``src/graph/tuning.cc``:

* ``tuning_model_5`` (the model rome_model_79/81/84, 8 GPUs with 7 xGMI links, select: ``tuning=5`` in their
  options, ``src/graph/rome_models.cc`` lines 559/815/828) is the one ROCm/rccl@a25ca9bb ("adding new tunning
  table for very large number of nodes", 2024-08-09, in no rocm-6.2 tag) later replaced: LL bwRatio 0.41 (later
  0.08 ring / 0.06 tree), ring hop latency 0.8/3.6 us LL/Simple (later 0.8/2.1), other correction rows.
* ``struct tuningModel`` has no ``llProtoRanges`` and enqueue.cc has no ``rcclUpdateCollectiveProtocol`` (no
  src/rccl_wrap.cc): the tuner's pair runs as chosen, on one node and across nodes.
* LL128: ``pEnable`` only on gfx90a with the topology's ``ll128Enabled`` (tuning.cc lines 512–517), and model 5's
  LL128 ``bwRatio`` cells are 0.00, so the tuner never prices it (time −1): gfx942 runs LL and Simple only.
* tree/Simple is skipped on one node on ``gfx94*`` (line 366: ``IsArchMatch(gcn, "gfx94")``); gfx950 has no
  model in this release (no ``tuning_model_6``; ``rcclTuningModel[]`` ends at model 5).

The estimate's arithmetic (baseLat, NET overhead, ring/tree latency terms, ``ncclTopoGetAlgoTime`` correction
factors) is the same code in both releases (tuning.cc lines 351–470 and 635–673 at this commit).
"""

from __future__ import annotations

from commmodel.collectives.libraries.rccl_model import RcclRelease, TuningModel

COMMIT_620 = "ROCm/rccl@45b618a315b46f007ca58bf1a4bb0da9a86d5beb"
"""Tag rocm-6.2.0 (RCCL 2.20.5)."""

TUNING_CC_620 = f"{COMMIT_620} src/graph/tuning.cc"
"""The tuner file of this release."""

_F = 0.1  # the tables' floor value, spelled once to keep the rows readable
_Z = (0.0,) * 27  # the LL128 rows of both correction tables (LL128 never runs on this model)

TUNING_MODEL_5_620 = TuningModel(
    hw_lat_us={"nvlink": {"tree": (0.8, 0.0, 2.5), "ring": (0.8, 0.0, 3.6)},
               "pcie": {"tree": (2.2, 2.2, 5.7), "ring": (2.2, 2.2, 5.7)},
               "net": {"tree": (12.5, 0.0, 22.4), "ring": (9.5, 0.0, 19.8)}},
    bw_ratio=({"tree": (0.41, 0.00, 1.00), "ring": (0.41, 0.00, 1.00)},
              {"tree": (0.41, 0.00, 0.86), "ring": (0.41, 0.00, 1.00)}),
    tree_correction={
        "LL": (_F,) * 5 + (1.0, 1.0, 0.8, _F, 0.4, 0.5, 1.0, 0.6, 0.4, 0.6, _F, 0.3, 0.4, 0.4, 0.3) + (0.2,) * 7,
        "LL128": _Z,
        "Simple": (_F,) * 8 + (1.0, 1.0, 1.0, 0.4, 1.0, 1.0, 1.0, 0.2, 0.7, 1.0, 1.0, 1.0, 0.8, 0.7, 0.7,
                              0.8, 0.8, 0.8, 0.9)},
    ring_correction={
        "LL": (_F,) * 7 + (1.0, _F, 0.2, 0.2, _F, 0.5, 0.8, 1.0, 0.2, 0.4, 0.5, 0.4, 0.4, 0.3) + (0.2,) * 6,
        "LL128": _Z,
        "Simple": (_F,) * 9 + (0.7,) + (_F,) * 5 + (1.0, 1.0, 1.0, 0.9) + (1.0,) * 8},
    ll_proto_ranges={},
    source=f"{TUNING_CC_620} tuning_model_5 (lines 224-252)")
"""``tuning_model_5`` as RCCL 2.20.5 ships it."""

RELEASE_2_20 = RcclRelease(
    name="rccl-2.20",
    commit=COMMIT_620,
    models={5: TUNING_MODEL_5_620},
    model_by_gfx={"gfx942": 5},
    tree_simple_off_one_node=frozenset({"gfx942"}),
    ll128_archs=frozenset({"gfx90a"}))
"""RCCL 2.20.5 (ROCm 6.2.x) on gfx942 (MI300X, MI325X)."""

__all__ = ["COMMIT_620", "RELEASE_2_20", "TUNING_CC_620", "TUNING_MODEL_5_620"]
