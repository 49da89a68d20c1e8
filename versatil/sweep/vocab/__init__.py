"""The names shared by the driver, worker and tracking: result keys, MLflow tags, run names.

And an objective's direction (``min`` or ``max``, :mod:`~versatil.sweep.vocab.direction`).
"""
