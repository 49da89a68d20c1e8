"""Training one Lightning policy under given settings (precision, compile, matmul).

Import the submodules directly: ``versatil.training.constants`` is light (no torch at
import), the others import torch and Lightning.
"""
