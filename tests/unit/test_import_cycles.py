"""No two modules import each other, directly or around a circle (issue 34).

The layers contract (``lint-imports``) orders packages; it says nothing about modules of one
package importing each other in a circle, which is how layers blur from inside (a value
module reaching up to the code that uses it). grimp builds the graph import-linter uses,
type-only and function-level imports included: a name in a signature is a dependency too.
"""

from __future__ import annotations

import grimp
import networkx as nx

PACKAGES = ("scheduler", "policies", "simulator")


def _imports() -> nx.DiGraph:
    graph = grimp.build_graph(*PACKAGES, exclude_type_checking_imports=False)
    edges = nx.DiGraph()
    for module in graph.modules:
        edges.add_node(module)
        for imported in graph.find_modules_directly_imported_by(module):
            edges.add_edge(module, imported)
    return edges


def _circles(edges: nx.DiGraph) -> list[list[str]]:
    return sorted(sorted(c) for c in nx.strongly_connected_components(edges) if len(c) > 1)


def test_no_module_imports_itself_around_a_circle() -> None:
    edges = _imports()
    assert edges.number_of_nodes() > 100  # the graph was really built
    assert _circles(edges) == []


def test_the_check_sees_a_circle() -> None:
    """A circle of two modules through a third is found (so the test above can fail)."""
    edges = nx.DiGraph([("a.x", "a.y"), ("a.y", "a.z"), ("a.z", "a.x"), ("a.y", "a.w")])
    assert _circles(edges) == [["a.x", "a.y", "a.z"]]
