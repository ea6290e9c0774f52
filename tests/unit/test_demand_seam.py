"""Readers of a gang's GPUs go through the demand seam (``scheduler.model.demand``).

A GPU will also come from a ResourceClaim; a module that reads the ``nvidia.com/gpu`` key of
a request itself would not see it (and quota would let such a gang through for free). So no
product module outside ``ALLOWED`` reads the key, by subscript (``r[GPU]``) or ``.get(GPU)``,
and ``Resources`` has no ``gpus`` shortcut (mypy finds any ``.gpus`` on a vector).

``NOT_YET_MOVED`` lists the modules that still do. It may only shrink: a listed module that no
longer reads the key fails the test too, so the list says what is left.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from scheduler.model.resources import GPU, Resources

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("scheduler", "policies", "simulator")

#: The seam itself.
ALLOWED = frozenset({
    "scheduler/model/demand.py",
})

#: Still reading the key themselves: the demo reads its own pods' JSON (quantities it wrote
#: as whole numbers, parsed its own way); no decision depends on it.
NOT_YET_MOVED: frozenset[str] = frozenset({
    "scheduler/tools/demo/frame.py",
    "scheduler/tools/demo/track.py",
})


def _is_gpu_key(node: ast.expr) -> bool:
    """``GPU``, ``model.GPU``/``resources.GPU``, or the literal ``"nvidia.com/gpu"``."""
    if isinstance(node, ast.Constant):
        return node.value == GPU
    if isinstance(node, ast.Name):
        return node.id == "GPU"
    return isinstance(node, ast.Attribute) and node.attr == "GPU"


def gpu_key_reads(source: str) -> list[int]:
    """Lines that read the GPU key: ``x[GPU]`` (loaded, not stored) or ``x.get(GPU, ...)``."""
    def reads(node: ast.AST) -> bool:
        if isinstance(node, ast.Subscript):
            return isinstance(node.ctx, ast.Load) and _is_gpu_key(node.slice)
        return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr == "get" and bool(node.args) and _is_gpu_key(node.args[0]))

    return sorted(node.lineno for node in ast.walk(ast.parse(source))
                  if isinstance(node, ast.expr) and reads(node))


def _readers() -> dict[str, list[int]]:
    found = {}
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            lines = gpu_key_reads(path.read_text())
            if lines:
                found[path.relative_to(ROOT).as_posix()] = lines
    return found


READERS = _readers()


def test_the_scan_sees_each_form_of_read() -> None:
    src = ('a = r[GPU]\nb = r.get(GPU, 0)\nc = r["nvidia.com/gpu"]\nd = r.get(model.GPU)\n'
           'r[GPU] = 1\ne = Resources({GPU: 1})\n')
    assert gpu_key_reads(src) == [1, 2, 3, 4]


def test_no_new_module_reads_the_gpu_key() -> None:
    new = {f: lines for f, lines in READERS.items() if f not in ALLOWED | NOT_YET_MOVED}
    assert not new, (f"read a role's GPUs through scheduler.model.demand (role_demand, "
                     f"gang_demand, gpus_of), not the GPU key: {new}")


@pytest.mark.parametrize("path", sorted(NOT_YET_MOVED))
def test_not_yet_moved_is_honest(path: str) -> None:
    assert path in READERS, f"{path} no longer reads the GPU key: take it off NOT_YET_MOVED"


def test_the_seam_reads_it() -> None:
    assert set(READERS) & ALLOWED == ALLOWED


def test_resources_have_no_gpu_shortcut() -> None:
    assert not hasattr(Resources, "gpus"), (
        "Resources.gpus is a second reader of the GPU key: use scheduler.model.demand.gpus_of")


#: Modules that charge quota or count charged GPUs (the ledger, its bounds and exact checks,
#: releases, victim gain, reservation release): they read a member's *charge*
#: (``Role.charge``, ``Placement.charges``, ``RunningGang.charges`` / ``usage``,
#: ``Release.charges``), never a request vector (``.requests``) nor what a gang's pods
#: request per node (``.allocations``), which a device claim is in neither of. The bound and
#: the exact check must read the same charge, or they disagree.
CHARGERS = (
    "policies/admission.py",
    "policies/preemption.py",
    "policies/quota.py",
    "policies/reservation.py",
    "policies/victims.py",
    "scheduler/decide/recall.py",
    "scheduler/decide/tallies.py",
    "scheduler/world/queue_usage.py",
)


def request_reads(source: str) -> list[int]:
    """Lines that read an attribute ``requests`` or ``allocations``."""
    return sorted(node.lineno for node in ast.walk(ast.parse(source))
                  if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load)
                  and node.attr in ("requests", "allocations"))


def test_the_request_scan_sees_each_form_of_read() -> None:
    src = "a = role.requests * 2\nb = rg.allocations\nc = p.allocations(g)\nd = rg.charges\n"
    assert request_reads(src) == [1, 2, 3]


@pytest.mark.parametrize("path", CHARGERS)
def test_quota_reads_charges_not_requests(path: str) -> None:
    lines = request_reads((ROOT / path).read_text())
    assert not lines, (f"{path}:{lines}: charge quota with Role.charge, Placement.charges "
                       "or RunningGang.charges (scheduler.model.demand), not a request vector")
