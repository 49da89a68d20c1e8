"""A sweep's plan: what prepare chose, typed and immutable, for every phase after it."""

from versatil.sweep.plan.plan import Plan
from versatil.sweep.plan.records import (
    GPU_ACCELERATORS,
    Budget,
    Objectives,
    Race,
    Reference,
    Resources,
    Retiming,
    Sampled,
    Scheduler,
    Search,
    Where,
)
from versatil.sweep.plan.trial import TrialPlan

__all__ = [
    "GPU_ACCELERATORS",
    "Budget",
    "Objectives",
    "Plan",
    "Race",
    "Reference",
    "Resources",
    "Retiming",
    "Sampled",
    "Scheduler",
    "Search",
    "TrialPlan",
    "Where",
]
