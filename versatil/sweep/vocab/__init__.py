"""The names shared by the driver, worker and tracking: result keys, MLflow tags, run names."""
