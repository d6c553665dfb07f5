"""The model against the published measurements it ships (``commmodel validate``, DESIGN §8, §9).

This package runs the model (collectives, step) on the rows that :mod:`commmodel.io.validation_data`
reads; it sits above the core, beside the shells. :mod:`commmodel.validation.sections` lists the
report's sections in print order.
"""
