"""This cycle's shortcuts: the failure memo, and the slot store the steps' policies keep
their answers in.

Within a cycle most gangs are tried against the same quota ledger (it changes only when a
gang is admitted or nominated), and many share a queue and a shape. So a gang no easier
than one that already failed against the very same state (same snapshot, ledger and
``Obstacles``: the *epoch*) gets that gang's reason without being tried (``failure_key``):
every step depends on the gang only through its queue, priority, tier, preemption policy,
topology, shape, the reservations it must keep off, whether it may reserve and, where pod
constraints can read them, its namespace and members' labels
(``placement.terms.context_key``; KAI-Scheduler's minimal job representatives).

Everything else a cycle memoises is a typed slot (``scheduler.kit.memo.Slot``) declared next
to the function it keeps answers of, kept in ``Memo.slots``: fair-share ranks
(``fairshare.RANKS``), preemption candidates (``preemption.SCANS``), the preemptor's room
(``victims.ROOMS``), the placement knobs (``obstacles.BASE``, ``reservation.BACKFILL``), the
ledger with reservations held (``reservation.HELD``), never placeable
(``never_placeable.NEVER_PLACEABLE``), ever admissible (``admission.EVER``), deferred outcomes
(``heads.DEFERRED``). Why a gang can never start (``trial.hopeless``) outlives the cycle:
it is kept in the ``Recall``.

Each is a memo of a pure function of what it is keyed by, so the plan is the one the long
way gives (``tests/unit/test_shortcuts_change_no_plan.py`` checks the failure memo). A
``Memo`` lives for one ``decide`` call; what outlives it is the ``Recall``.
"""

from __future__ import annotations

from policies.quota import QuotaLedger
from policies.reservation import Reservation
from scheduler.decide.obstacles import Obstacles
from scheduler.decide.outcomes import Waiting
from scheduler.decide.recall import Recall, Shape
from scheduler.kit.memo import Slots
from scheduler.model import Gang
from scheduler.placement.terms import context_key
from scheduler.world.snapshot import Snapshot

FailureKey = tuple[object, ...]
Epoch = tuple[Snapshot, QuotaLedger, Obstacles]


class Memo:
    """See the module docstring."""

    __slots__ = ("_anti", "_epoch", "_failures", "recall", "slots")

    def __init__(self, recall: Recall) -> None:
        self.recall = recall
        self.slots = Slots()
        self._epoch: Epoch | None = None
        #: The epoch's snapshot has running pods with required anti-affinity (read once per
        #: epoch rather than on each of the millions of keys a long simulation makes).
        self._anti = False
        # Not a slot: its answers hold only in their epoch (three objects by identity, not in
        # the key), so the table is emptied when the epoch changes, not when it is full.
        self._failures: dict[FailureKey, Waiting] = {}  # in the epoch

    # Failures -----------------------------------------------------------------------------
    def failure_key(self, epoch: Epoch, gang: Gang, queue: str,
                    restricting: tuple[Reservation, ...], may_reserve: bool,
                    shape: Shape) -> FailureKey | None:
        """The failure memo's key for *gang* (starting a new epoch if the state changed), or
        None when the gang's outcome may depend on more than its shape: a gang with members
        already running is not a candidate victim of itself, unlike one of the same shape.
        The reservations it must keep off are part of the key: gangs of one shape may differ
        in runtime (so in which reservations they end before) and in age (so in whether they
        may reserve, *may_reserve*)."""
        snapshot = epoch[0]
        if gang.id in snapshot.running:
            return None
        now = self._epoch
        if now is None or now[0] is not snapshot or now[1] is not epoch[1] \
                or now[2] is not epoch[2]:  # ``_same``, inline: asked on every turn
            self._failures.clear()
            self._epoch = epoch
            self._anti = snapshot.pods.has_anti_affinity
        # ``context_key`` is () unless the gang is constrained or running pods have
        # anti-affinity: its own first test, with the epoch's anti-affinity read above.
        return (queue, gang.priority, gang.tier, gang.preemption_policy, gang.topology,
                tuple(r.gang_id for r in restricting) if restricting else (), may_reserve,
                shape.number,
                context_key(gang, snapshot) if gang.constrained or self._anti else ())

    def failed(self, key: FailureKey | None) -> Waiting | None:
        """The outcome of a gang of this key that failed in the current epoch: its reason,
        blocking nobody (the gang it was decided for blocked whom it had to)."""
        return self._failures.get(key) if key is not None else None

    def remember(self, key: FailureKey | None, epoch: Epoch, outcome: Waiting) -> None:
        """Keep *outcome* for *key* if deciding it left the state as it was, blocking
        nobody (the gang it was decided for blocked whom it had to)."""
        if key is not None and self._same(epoch):
            self._failures[key] = Waiting(outcome.category, outcome.message)

    def _same(self, epoch: Epoch) -> bool:
        now = self._epoch
        return (now is not None and now[0] is epoch[0] and now[1] is epoch[1]
                and now[2] is epoch[2])
