"""What people look at every day: queues, gangs, nodes and recent decisions, as one value.

``state.ClusterView`` is built in two ways, so the CLI views (``gang-scheduler queues | gangs |
top``), the scheduler's ``/api/v1/state`` and its read-only dashboard all show the same rows:

- ``live.build`` from the running scheduler's last cycle (its plan, snapshot and queue
  reports): everything, for the dashboard and the HTTP endpoint;
- ``apiserver.build`` from what a caller may read through the apiserver (Queue status, pods'
  ``PodScheduled`` messages the scheduler wrote, nodes when allowed): what a tenant with
  namespace RBAC sees, and never more.

Both give each gang its last failures (``failures``: read from the cache, which the failed
pods read were recorded in), worded as ``explain`` words them.
"""
