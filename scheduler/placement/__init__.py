"""The placement solver: all members of a gang on nodes, or none of them and a reason.

``solve(gang, snapshot, params)`` is the one entry point; the submodules are its stages
(eligibility, candidates, greedy, cpsat, reasons) and are not meant to be called alone.
"""

from scheduler.placement.solve import solve
from scheduler.placement.terms import context_key
from scheduler.placement.types import (
    Assignment,
    Placement,
    PlacementParams,
    PlacementResult,
    Question,
    Unplaceable,
    UnplaceableReason,
)

__all__ = [
    "Assignment", "Placement", "PlacementParams", "PlacementResult", "Question",
    "Unplaceable", "UnplaceableReason", "context_key", "solve",
]
