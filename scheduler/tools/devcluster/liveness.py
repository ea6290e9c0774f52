"""How the fake nodes show they are alive, and how long the node lifecycle controller
believes them: the one setting a 5,000-node dev cluster needs changed.

Why a setting at all: a kubelet proves it is alive twice over, by renewing its node Lease
(every 10 s with the default 40 s lease) and by rewriting its Ready condition's heartbeat
(every 5 minutes when nothing changed). kwok does both for every node it runs. At 5,000 nodes
that is 500 Lease writes a second, more than this 2-core machine's apiserver and etcd can
serve beside anything else: an earlier try registered 5,000 nodes in about 7 minutes, and 10
minutes later 4,174 of them were still not Ready (with Leases on, kwok plays a node, its
status and its pods, only once it owns the node's Lease; and renewals that come late get
nodes marked ``Unknown`` by the node lifecycle controller, which is more writes again).

``STANDARD`` is what the e2e tests rely on (Leases, heartbeats at the kubelet's frequency, the
controller's own grace period, so a node that stops reporting is noticed). ``SCALE`` is for
benchmarks on thousands of nodes: no Leases (kwok then runs a node's pods from the moment it
sees the node), a heartbeat every 30-60 minutes, and a grace period of two hours, so a node
stays Ready through a benchmark without being written to. What it gives up: a node whose
kwok died would be noticed only after two hours; a node *reporting* NotReady (``fail_node``)
is still tainted at once, since that needs no grace period.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class NodeLiveness:
    """The fake nodes' heartbeats (kwok) and the node lifecycle controller's patience."""

    name: str
    lease_seconds: int  # kwok --node-lease-duration-seconds, renewed at a quarter; 0: no Leases
    heartbeat_s: int  # kwok's node-heartbeat stage rewrites the Ready heartbeat at a delay
    heartbeat_max_s: int  # uniform in [heartbeat_s, heartbeat_max_s] (spreads the writes)
    monitor_grace_s: int | None  # kube-controller-manager --node-monitor-grace-period
    controller_qps: int  # kube-controller-manager's client rate limits: at 5,000 nodes the
    controller_burst: int  # controller lifts 5,000 not-ready taints, one request each

    def __post_init__(self) -> None:
        if self.lease_seconds < 0:
            raise ValueError(f"{self.name}: lease_seconds must be >= 0 (0: no Leases), "
                             f"not {self.lease_seconds}")
        if not 0 < self.heartbeat_s <= self.heartbeat_max_s:
            raise ValueError(f"{self.name}: want 0 < heartbeat_s <= heartbeat_max_s, not "
                             f"{self.heartbeat_s} and {self.heartbeat_max_s}")
        longest_silence = self.heartbeat_max_s
        if (self.lease_seconds == 0 and self.monitor_grace_s is not None
                and self.monitor_grace_s <= longest_silence):
            # Without Leases the heartbeat is all the controller sees: a grace period shorter
            # than the longest gap between two heartbeats marks live nodes Unknown.
            raise ValueError(f"{self.name}: without Leases monitor_grace_s "
                             f"({self.monitor_grace_s}) must exceed the longest gap between "
                             f"heartbeats ({longest_silence} s)")
        if self.lease_seconds == 0 and self.monitor_grace_s is None:
            raise ValueError(f"{self.name}: without Leases set monitor_grace_s (the "
                             "controller's default, 50 s, is far below any heartbeat gap)")

    def kwok_flags(self) -> list[str]:
        return [f"--node-lease-duration-seconds={self.lease_seconds}"]

    def controller_manager_flags(self) -> list[str]:
        flags = [f"--kube-api-qps={self.controller_qps}",
                 f"--kube-api-burst={self.controller_burst}"]
        if self.monitor_grace_s is not None:
            flags.append(f"--node-monitor-grace-period={self.monitor_grace_s}s")
        return flags


# The kubelet's defaults (40 s Lease; status every 5 minutes, here 300-330 s) and client limits
# above kubeadm's (20/30), which would throttle tests that create Jobs of dozens of pods.
STANDARD = NodeLiveness("standard", lease_seconds=40, heartbeat_s=300, heartbeat_max_s=330,
                        monitor_grace_s=None, controller_qps=100, controller_burst=200)
SCALE = NodeLiveness("scale", lease_seconds=0, heartbeat_s=1800, heartbeat_max_s=3600,
                     monitor_grace_s=7200, controller_qps=400, controller_burst=800)
PROFILES = {p.name: p for p in (STANDARD, SCALE)}


def by_name(name: str) -> NodeLiveness:
    """The profile called *name*, or a ValueError naming the known ones."""
    try:
        return PROFILES[name]
    except KeyError:
        raise ValueError(f"node liveness {name!r} is not one of "
                         f"{', '.join(sorted(PROFILES))}") from None
