"""Training one Lightning policy under given settings (precision, compile, matmul).

Import the submodules directly: ``versatil.training.constants`` and
``versatil.training.spec`` are light (no torch at import), the others import torch and
Lightning. What a setting means is ``spec``; applying it is ``apply``.
"""
