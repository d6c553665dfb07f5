"""commmodel: communication cost models and a layout planner for distributed deep-learning training.

The core (units, hardware, collectives, workload, step model, planner) is pure; ``commmodel.io``
reads and writes files, ``commmodel.plots`` draws, ``commmodel.cli`` wires the command line and
``commmodel.calibrate`` (the only torch user) measures real clusters.
"""

__version__ = "0.1.0"
