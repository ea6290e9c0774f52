"""Properties of the rollback rule (``housekeeping.rollbacks``) over random partly bound gangs.

Whatever the flags, clocks and reasons: a gang parked for the apiserver (its last bind failed
for want of an answer, its backoff still running) is never rolled back; a gang completed
this cycle never is; every rollback is of a partly bound gang and names a cause; and a
partly bound gang none of whose members started, neither parked nor completed, always is.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from scheduler.decide import housekeeping
from scheduler.decide.housekeeping import FailedBind, Housekeeping, PartlyBound
from scheduler.decide.plan import PendingReason, ReasonCategory, RollbackCause
from scheduler.model import PodRef

NOW = 10_000.0
GANGS = [f"ns/g{i}" for i in range(6)]


@st.composite
def cycles(draw: st.DrawFn) -> tuple[Housekeeping, set[str], dict[str, PendingReason],
                                     set[str]]:
    """Housekeeping, the gangs bound this cycle, the pending reasons, the earlier rollbacks."""
    partly = {gid: PartlyBound((PodRef("ns", f"{gid[3:]}-0", f"u-{gid}"),),
                               started=draw(st.booleans()),
                               since=NOW - draw(st.sampled_from([0.0, 30.0, 60.0, 600.0])),
                               cut=draw(st.booleans()))
              for gid in draw(st.sets(st.sampled_from(GANGS)))}
    backoff = {gid: NOW + draw(st.sampled_from([-1.0, 0.0, 5.0]))
               for gid in draw(st.sets(st.sampled_from(GANGS)))}
    failed = {gid: FailedBind("why", draw(st.booleans())) for gid in backoff}
    house = Housekeeping(backoff=backoff, partly_bound=partly, takeover=draw(st.booleans()),
                         repair_grace=draw(st.sampled_from([0.0, 60.0])), failed_binds=failed)
    pending = {gid: PendingReason(draw(st.sampled_from(list(ReasonCategory))), "why")
               for gid in draw(st.sets(st.sampled_from(GANGS)))}
    return (house, draw(st.sets(st.sampled_from(GANGS))), pending,
            draw(st.sets(st.sampled_from(GANGS))))


@given(cycles())
def test_the_rollback_rule(cycle: tuple[Housekeeping, set[str], dict[str, PendingReason],
                                        set[str]]) -> None:
    house, bound, pending, decided = cycle
    out = housekeeping.rollbacks(house, bound, pending, NOW, decided)
    rolled = {r.gang_id for r in out}
    parked = {gid for gid, f in house.failed_binds.items()
            if f.transient and house.backoff[gid] > NOW}
    assert not rolled & parked, "a gang parked for the apiserver was rolled back"
    assert not rolled & bound
    assert rolled <= set(house.partly_bound)
    for r in out:
        assert isinstance(r.cause, RollbackCause) and r.reason
        assert r.pods == house.partly_bound[r.gang_id].pods
    unstarted = {gid for gid, p in house.partly_bound.items() if not p.started}
    assert unstarted - parked - bound <= rolled
