"""Evidence from clusters set against the model: profiler traces (``diagnose``)."""
