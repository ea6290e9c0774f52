"""Queue policies: pure functions from the snapshot and the queues to decisions.

- ``queues``: the Queue and SchedulerPolicy values (and presets);
- ``parsing``, ``validation``, ``errors``: YAML objects in, every error with its field path
  out; the last-good ``PolicyStore``;
- ``quota``: hierarchical quota with lending and borrowing; ``fairshare``: ordering;
- ``admission``: whole gangs against quota; ``preemption`` (who may be a victim) and
  ``victims`` (the cheapest proven victim set); ``reservation``: reservations and backfill.

``scheduler.decide.cycle.decide`` puts them together. Nothing here imports ``kubernetes``
(beyond quantity parsing through ``scheduler.model.resources``), ``prometheus_client`` or
``scheduler.kube``.
Import the modules (``from policies import quota``); this package re-exports nothing.
"""
