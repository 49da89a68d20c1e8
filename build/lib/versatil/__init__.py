"""versatil: find the precision, compile mode and matmul precision that train best per second."""

__version__ = "0.1.0"
