"""Consumable capacity (DRA ``DRAConsumableCapacity``, beta and on by default in 1.36): how
much of a device a request takes, and whether it still fits beside the shares already taken.

A device that ``allowMultipleAllocations`` (``Device.shareable``) is handed to many requests,
each taking a share of its capacities (a GPU's memory); the shares' sum never exceeds the
device's ``capacity[*].value``. What one request takes of each capacity follows the
upstream allocator (``dynamic-resource-allocation/structured``, ``consumable_capacity.go``
at v0.36.3): the amount it names, rounded up by the capacity's ``requestPolicy`` (to the
next valid value, or to ``minimum + n*step``); a capacity it does not name costs the
policy's default, or the whole capacity when there is no policy. A rounded amount the policy
still refuses (above every valid value, above the maximum) makes the device unfit.

One place for the rule: the allocator (``scheduler.placement.device_search``) asks ``consumption``
and ``overflow``; the reasons they give name the capacity and the amounts, so a claim that
waits says which share did not fit on which device.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from fractions import Fraction

from scheduler.model.devices import CapacityPolicy, Device, qualify


def _rounded(asked: Fraction, policy: CapacityPolicy) -> Fraction:
    if policy.minimum is not None:
        if asked < policy.minimum:
            return policy.minimum
        if policy.step is None:
            return asked
        return policy.minimum + policy.step * math.ceil((asked - policy.minimum) / policy.step)
    for value in policy.valid_values:
        if asked <= value:
            return value
    return asked


def _refused(amount: Fraction, policy: CapacityPolicy) -> bool:
    if policy.default is not None and amount == policy.default:
        return False
    if policy.minimum is not None:
        if policy.maximum is not None and amount > policy.maximum:
            return True
        return policy.step is not None and (amount - policy.minimum) % policy.step != 0
    return bool(policy.valid_values) and amount not in policy.valid_values


def consumption(asked_as_written: Mapping[str, Fraction], device: Device,
                driver: str) -> dict[str, Fraction] | str:
    """What a request asking *asked_as_written* (capacity name -> amount) takes of each
    capacity of *device* (of *driver*), or why the device cannot serve it. A device held
    whole takes nothing from a capacity count (``{}``): its capacity requests only select
    (each must be at most the device's value)."""
    capacity = dict(device.capacity)
    asked = {qualify(k, driver): v for k, v in asked_as_written.items()}
    for name in asked:
        if name not in capacity:
            return f"device {device.name} has no capacity {name}"
    if not device.shareable:
        for name, amount in asked.items():
            if amount > capacity[name]:
                return (f"device {device.name}: {name} {amount_text(amount)} asked, "
                        f"{amount_text(capacity[name])} in all")
        return {}
    policies = dict(device.policies)
    out: dict[str, Fraction] = {}
    for name, value in capacity.items():
        policy = policies.get(name)
        named = asked.get(name)
        if named is None:
            amount = policy.default if policy and policy.default is not None else value
        else:
            amount = _rounded(named, policy) if policy is not None else named
        if policy is not None and _refused(amount, policy):
            return (f"device {device.name}: {name} {amount_text(amount)} not allowed by its "
                    "requestPolicy")
        out[name] = amount
    return out


def overflow(device: Device, used: Mapping[str, Fraction],
             wanted: Mapping[str, Fraction]) -> str | None:
    """Why a share *wanted* does not fit on *device* beside the shares *used* (summed over
    every claim that holds one), or None if it does: never over a capacity's value."""
    for name, value in device.capacity:
        want = wanted.get(name, Fraction(0))
        have = used.get(name, Fraction(0))
        if have + want > value:
            return (f"device {device.name}: a share of {name} {amount_text(want)} does not fit, "
                    f"{amount_text(value - have)} of {amount_text(value)} free")
    return None


#: How many shares a capacity without a lower bound on a share is counted to hold (a request
#: may name any amount of it, however small).
UNBOUNDED_SHARES = 1024


def most_shares(device: Device, used: Mapping[str, Fraction]) -> int:
    """At most how many more requests *device* can serve beside the shares *used*: each
    takes at least its capacity's smallest valid amount (the policy's minimum or smallest
    valid value) of every capacity; a capacity without one bounds nothing
    (``UNBOUNDED_SHARES``). For quick "could it fit" counts: never fewer than the truth."""
    most = UNBOUNDED_SHARES
    policies = dict(device.policies)
    for name, value in device.capacity:
        policy = policies.get(name)
        least = None
        if policy is not None:
            least = policy.minimum if policy.minimum is not None else min(
                policy.valid_values, default=None)
        if least:
            most = min(most, int((value - used.get(name, Fraction(0))) // least))
    return max(most, 0)


def amount_text(amount: Fraction) -> str:
    """An amount as a quantity-like text: bytes in Gi/Mi when exact, else the number."""
    for unit, size in (("Gi", 2**30), ("Mi", 2**20)):
        if amount and amount % size == 0:
            return f"{amount // size}{unit}"
    return str(amount.numerator) if amount.denominator == 1 else str(float(amount))
