"""The worker process's file-descriptor budget: a shard it cannot serve is refused at start.

Every connection a shard opens is a descriptor of the worker process, bounded by its
``RLIMIT_NOFILE``. A shard that needs more than is left used to fail later, and so did
every shard after it on that worker, with ``Too many open files`` (EMFILE): its
pre-warm had taken every descriptor and kept them. Now a shard claims the connections
it needs (``workers.load.shapes.connections_needed``) when it starts, before anything
is opened, and is refused with a message naming the need and the budget when they do
not fit (docs/load.md, "Connections"):

    budget = soft RLIMIT_NOFILE - descriptors open now - RESERVE - claimed, not yet open

where "claimed, not yet open" is what the shards running in this process claimed beyond
the connections their pool holds now (two shards starting together each see the
other's claim before either opened anything). The check is at shard start, from the
plan; an open loop without a cap is checked for what it pre-warms (one second of its
arrivals, at most 1,024), as its real concurrency depends on the server's latency.
"""

from __future__ import annotations

import itertools
import os
import resource

__all__ = [
    "DESCRIPTORS",
    "RESERVE",
    "DescriptorBudget",
    "DescriptorBudgetExceeded",
    "HeldDescriptors",
    "budget_refusal",
    "descriptor_limit",
    "descriptors_open",
]

# Descriptors kept out of every shard's budget: Redis connections, the simulators'
# pipes, log files, DNS lookups, dataset and tokenizer files, the metrics scraper.
RESERVE = 256


class DescriptorBudgetExceeded(Exception):
    """A shard needs more connections than the worker's descriptor budget leaves."""


def descriptor_limit() -> int:
    """The process's soft RLIMIT_NOFILE (what an ``open`` or ``socket`` hits)."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return soft if soft != resource.RLIM_INFINITY else 1 << 20


def descriptors_open() -> int:
    """Descriptors this process holds now."""
    try:
        return len(os.listdir("/proc/self/fd")) - 1  # less the one listdir held
    except OSError:  # no /proc (not Linux): nothing known to be held
        return 0


def budget_refusal(need: int, limit: int, held: int, reserve: int, pending: int) -> str | None:
    """Why a shard needing ``need`` connections cannot run, or None when it fits:
    ``limit`` the soft RLIMIT_NOFILE, ``held`` descriptors open now, ``pending``
    claimed by running shards but not yet open."""
    budget = limit - held - reserve - pending
    if need <= budget:
        return None
    return (
        f"this shard needs {need} connections but the worker's descriptor budget is "
        f"{max(budget, 0)} (RLIMIT_NOFILE {limit} - {held} open - {reserve} reserved"
        + (f" - {pending} claimed by running shards" if pending else "")
        + "): plan smaller shards (fewer streams per shard) or raise the worker's "
        "open-file limit"
    )


class DescriptorBudget:
    """The claims of the shards running in this process (one event loop: no lock)."""

    def __init__(self, reserve: int = RESERVE) -> None:
        self.reserve = reserve
        self._claims: dict[int, int] = {}
        self._ids = itertools.count()

    @property
    def claimed(self) -> int:
        """Connections claimed by the shards running now."""
        return sum(self._claims.values())

    def claim(self, need: int, pool_open: int) -> HeldDescriptors:
        """Claim ``need`` connections of the budget now, held until the returned
        context exits; :class:`DescriptorBudgetExceeded` when they do not fit.
        ``pool_open`` is the connections the client's pool holds now (already open,
        so already counted in what the process holds)."""
        pending = max(0, self.claimed - pool_open)
        refusal = budget_refusal(
            need, descriptor_limit(), descriptors_open(), self.reserve, pending
        )
        if refusal is not None:
            raise DescriptorBudgetExceeded(refusal)
        token = next(self._ids)
        self._claims[token] = need
        return HeldDescriptors(self._claims, token)


class HeldDescriptors:
    """A shard's claim on the budget; ``with`` it for the shard's run."""

    def __init__(self, claims: dict[int, int], token: int) -> None:
        self._claims = claims
        self._token = token

    def __enter__(self) -> None:
        """Nothing to do: the claim was made when this was created."""

    def __exit__(self, *_: object) -> None:
        """Give the claim back."""
        self._claims.pop(self._token, None)


# The worker process's budget (one per process: the limit is the process's).
DESCRIPTORS = DescriptorBudget()
