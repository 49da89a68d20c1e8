"""A sweep's results: what Tune recorded, the rows, the Pareto front, and the verdict."""
