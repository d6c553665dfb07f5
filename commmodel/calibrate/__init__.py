"""Calibration: measure collectives and GEMMs, import nccl-tests, fit α-β, write profiles (DESIGN §7).

The only package that imports torch, and only inside the functions that need it (``bench``,
``compute.run_matmuls``), so ``import commmodel.calibrate.fit`` and the rest work without torch.

- :mod:`bench`, :mod:`bench_ops`, :mod:`launch` — the torchrun/srun benchmark behind ``calibrate run``
- :mod:`compute` — the matmul micro-benchmark and ``gpu.matmul_efficiency``
- :mod:`forms`, :mod:`fit`, :mod:`groups` — weighted, piecewise α-β fits per measured group
- :mod:`apply`, :mod:`check` — solve profile numbers against the collective model; check them
- :mod:`profile_writer`, :mod:`report` — write the calibrated YAML; the ``calibrate fit`` report
"""
