"""Compressing a sweep's chosen trials to INT8 and logging each as a run nested under its trial."""
