"""What runs inside a trial: the trainable the driver hands to Tune, and nothing else public.

The driver imports :func:`run_trial` from here and nothing of the worker's modules; the
trainable imports torch and Lightning inside the trial, so the driver stays light.
"""

from versatil.sweep.worker.trial import run_trial

__all__ = ["run_trial"]
