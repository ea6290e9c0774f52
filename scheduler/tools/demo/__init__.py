"""``gang-scheduler demo``: the scheduler on a local control plane with fake GPU pools, a short
story of two teams' jobs, and a live view of queues, gangs and nodes (see session.py)."""
