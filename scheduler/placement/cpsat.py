"""The exact path: a CP-SAT model over pod counts per (role, node).

Greedy is fast and good, but first-fit decreasing can miss a tight multi-role packing, and
its domain choice can leave a "preferred" gang over more racks than needed. This model is
exact for the nodes it is given: one integer ``x[role, node]`` in ``[0, pods that fit]``
per role and candidate node (never a variable per pod), the required count per role, the
capacity of each node on every resource two roles could overrun together, and booleans
for "node used" (and "domain used" under a preferred topology) in the objective:

    minimise  W * domains used  +  sum over used nodes of (B + free GPUs of the node)

so fewer domains first, then fewer nodes, then nodes that are already partly used (the
best-fit rule of the greedy pass), less the members' preference scores. The rules that
couple members (``rules``: pod anti-affinity and affinity, spread, claims, attach limits)
add their own constraints. The greedy result, when there is one, is a full hint.

Under the ``fragmentation`` packing policy (``PlacementParams.fragmentation_mix``) a used
node's term becomes ``MILLI * B + free GPUs + F(GPUs taken)``, preference scores are scaled
by ``MILLI`` too, and ``F`` is the fragmentation the outcome adds in GPU shares, from the
same rule as the greedy share placement (``cpsat_fragmentation``). Why these weights: a node
and a preference keep the worth they had against a free GPU (a GPU is ``MILLI`` shares), so
the choice of how many nodes and domains is made as before; fragmentation, counted in the
same GPUs, takes the place best fit had (best fit keeps its weight of one per free GPU,
the weight of one share: it only breaks near-ties), as the greedy policy puts fragmentation
before best fit. Without the policy, or for a gang that takes no GPU, nothing is added:
the model, and so every decision and its speed, is unchanged.

Reproducible by construction: fixed seed, one worker by default, and a deterministic-time
limit; the wall-clock limit only guards a slow machine (hitting it may change the answer).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ortools.sat.python import cp_model

from scheduler.model.resources import GPU
from scheduler.placement import cpsat_fragmentation as fragmentation
from scheduler.placement.candidates import Candidates, primary_resource
from scheduler.placement.eligibility import Problem
from scheduler.placement.gpu_shares import MILLI
from scheduler.placement.greedy import Assign
from scheduler.placement.rules import Encoding


@dataclass(frozen=True, slots=True)
class Budget:
    """What the CP-SAT calls of one solve may still spend (seconds)."""

    deterministic: float
    wall: float

    def spend(self, deterministic: float, wall: float) -> Budget:
        return Budget(max(self.deterministic - deterministic, 0.0), max(self.wall - wall, 0.0))

    @property
    def exhausted(self) -> bool:
        return self.deterministic <= 0.0 or self.wall <= 0.0


@dataclass(frozen=True, slots=True)
class Outcome:
    assign: Assign | None  # None: no solution found
    infeasible: bool  # proven: no placement exists on these nodes
    budget: Budget  # what is left after this call


def solve_counts(
    problem: Problem,
    cands: Candidates,
    nodes: Sequence[str],
    budget: Budget,
    *,
    domain_of: Mapping[str, str] | None = None,
    hint: Assign | None = None,
) -> Outcome:
    """Place every required member on *nodes*, or prove it impossible, within *budget*.

    *domain_of* (node -> domain) adds the "fewest domains" term for a preferred topology.
    """
    # Imported here: ortools (and the pandas it loads) costs about a second of start-up
    # CPU, and most cycles never reach CP-SAT.
    from ortools.sat.python import cp_model

    model = cp_model.CpModel()
    roles = [rv for rv in problem.roles if rv.required]
    x: dict[tuple[str, str], cp_model.IntVar] = {}
    bounds: dict[tuple[str, str], int] = {}
    per_node: dict[str, list[tuple[int, cp_model.IntVar, int]]] = {}
    for ri, rv in enumerate(roles):
        caps = cands.caps[rv.name]
        terms = []
        for n in nodes:
            c = caps.get(n, 0)
            if c:
                var = model.new_int_var(0, c, f"x[{rv.name},{n}]")
                x[(rv.name, n)] = var
                bounds[(rv.name, n)] = c
                per_node.setdefault(n, []).append((ri, var, c))
                terms.append(var)
        if sum(caps.get(n, 0) for n in nodes) < rv.required:
            return Outcome(None, True, budget)
        model.add(sum(terms) == rv.required)

    free = problem.snapshot.free
    primary = primary_resource(problem)
    weights = {n: max(free(n).get(primary, 0), 0) for n in per_node}
    unit = primary == GPU
    base = (max(weights.values(), default=0) + 1) if unit else 1
    used: dict[str, cp_model.IntVar] = {}
    for n, entries in sorted(per_node.items()):
        have = free(n)
        if len(entries) > 1:
            names = sorted({k for ri, _, _ in entries for k in roles[ri].request})
            for k in names:
                worst = sum(c * roles[ri].request.get(k, 0) for ri, _, c in entries)
                if worst > have.get(k, 0):
                    model.add(sum(roles[ri].request.get(k, 0) * v for ri, v, _ in entries)
                              <= have.get(k, 0))
        y = model.new_bool_var(f"used[{n}]")
        model.add(sum(v for _, v, _ in entries) <= sum(c for _, _, c in entries) * y)
        used[n] = y
    if problem.terms.rules:
        enc = Encoding(model, x, bounds, nodes)
        for rule in problem.terms.rules:
            rule.encode(enc)
    mix = problem.params.fragmentation_mix
    frag = fragmentation.encode(model, problem, mix, per_node, roles) if (
        mix is not None and unit) else {}
    scale = MILLI if frag else 1  # with the term, nodes and scores are weighed in shares
    cost = {n: scale * base + (weights[n] if unit else 0) for n in used}
    objective_vars: list[cp_model.IntVar] = list(used.values())
    coefficients = [cost[n] for n in used]
    for rv in roles:
        score = rv.limits.score
        for n in nodes:
            s = score.get(n, 0)
            if s and (rv.name, n) in x:
                objective_vars.append(x[(rv.name, n)])
                coefficients.append(-s * scale)
    for term in frag.values():
        objective_vars.append(term.cost)
        coefficients.append(1)
    if domain_of is not None:
        big = sum(cost.values()) + sum(t.highest - t.lowest for t in frag.values()) + 1
        zs: dict[str, cp_model.IntVar] = {}
        for n in sorted(used):
            d = domain_of[n]
            if d not in zs:
                zs[d] = model.new_bool_var(f"domain[{d}]")
            model.add_implication(used[n], zs[d])
        objective_vars += zs.values()
        coefficients += [big] * len(zs)
    model.minimize(cp_model.LinearExpr.weighted_sum(objective_vars, coefficients))
    if hint is not None:
        for key, var in x.items():
            model.add_hint(var, hint.get(key, 0))

    solver = cp_model.CpSolver()
    p = solver.parameters
    p.random_seed = problem.params.seed
    p.num_workers = max(problem.params.cpsat_workers, 1)
    p.max_time_in_seconds = max(budget.wall, 0.001)
    p.max_deterministic_time = max(budget.deterministic, 0.001)
    verdict = solver.solve(model)
    left = budget.spend(solver.deterministic_time, solver.wall_time)
    if verdict in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        assign = {key: v for key, var in sorted(x.items()) if (v := int(solver.value(var)))}
        return Outcome(assign, False, left)
    return Outcome(None, verdict == cp_model.INFEASIBLE, left)
