"""Which way an objective is better: ``min`` or ``max``, as one type.

:class:`Direction` is a :class:`~enum.StrEnum`, so ``Direction.MIN == "min"``: it is the
very string the sweep file (``objective.mode``), Tune and MLflow's tags use, and
``Direction(mode)`` turns such a string into it (a string that is neither raises
:class:`ValueError`).

Everything compares through one form, the value turned "lower is better"
(:meth:`Direction.as_loss`, the value times :attr:`Direction.sign`): ``+1`` for ``min``,
``-1`` for ``max``, so a ``max`` objective is negated. Multiplying by ``±1.0`` is exact,
so ``as_loss`` changes nothing but the sign (a NaN stays NaN, an infinity an infinity).
"""

from __future__ import annotations

import enum
import math
from collections.abc import Iterable

__all__ = ["Direction"]


class Direction(enum.StrEnum):
    """An objective's mode: ``min`` (lower is better) or ``max`` (higher is better).

    A value is *missing* when it is ``None`` or NaN: :meth:`sort_key` puts it after every
    value (infinities included), :meth:`better` never finds it better than another, and
    :meth:`best` never returns it.
    """

    MIN = "min"
    MAX = "max"

    @property
    def sign(self) -> float:
        """``+1.0`` for ``min``, ``-1.0`` for ``max``: what turns a value lower-is-better."""
        return 1.0 if self is Direction.MIN else -1.0

    @property
    def worst(self) -> float:
        """The value no other is worse than: ``inf`` for ``min``, ``-inf`` for ``max``."""
        return math.inf if self is Direction.MIN else -math.inf

    def as_loss(self, value: float) -> float:
        """``value`` turned lower-is-better: ``sign * value`` (a ``max`` value negated).

        Linear, so it also turns a difference of two values (``b - a``, positive when ``a``
        is the better for ``min``) or a relative change.
        """
        return self.sign * value

    def sort_key(self, value: float | None) -> tuple[bool, float]:
        """Sorts the best value first and missing ones (``None``, NaN) last.

        Present values sort by :meth:`as_loss` (so ``inf`` is last of them for ``min`` and
        ``-inf`` for ``max``); missing ones after them all, in their given order.
        """
        if value is None or math.isnan(value):
            return True, 0.0
        return False, self.as_loss(value)

    def better(self, a: float | None, b: float | None) -> bool:
        """Whether ``a`` is strictly better than ``b`` (the order of :meth:`sort_key`).

        Equal values are not; a missing ``a`` never is; any present ``a`` beats a missing
        ``b``.
        """
        return self.sort_key(a) < self.sort_key(b)

    def best(self, values: Iterable[float | None]) -> float | None:
        """The best of ``values`` (the first of equals); ``None`` when none is present."""
        present = [v for v in values if v is not None and not math.isnan(v)]
        return min(present, key=self.sort_key) if present else None

    def no_worse_than(self, value: float, bound: float, slack: float = 0.0) -> bool:
        """Whether ``value`` is at least as good as ``bound``, allowed ``slack`` worse.

        ``value <= bound + slack`` for ``min``, ``value >= bound - slack`` for ``max``;
        false when either is NaN.
        """
        if self is Direction.MIN:
            return value <= bound + slack
        return value >= bound - slack
