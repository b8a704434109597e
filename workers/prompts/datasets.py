"""A shard's dataset on the worker: fetched from Redis, parsed off the event loop, cached.

``workload.dataset`` rows are also counted and filtered off the event loop, once per
dataset, tokenizer and filters (:meth:`DatasetCache.workload_rows`).

The control plane puts a dataset's bytes in Redis (``scenarios.wire.contract.dataset_key``)
before it dispatches a shard that uses it; the worker never reads a file a scenario
names. The size is checked before the bytes are fetched, the parse runs in a thread (a
large dataset must not stall the measurement of the other shards on this event loop),
and the parsed entries are kept per dataset id: ids are content hashes, so a cached
entry is never stale. Shards that need the same dataset at once share one fetch.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict

from redis.asyncio import Redis

from scenarios.datasets.files import FileEntry, WorkloadFileError, parse_entries
from scenarios.settings import env_name
from scenarios.wire.contract import dataset_key
from scenarios.workload.spec import Workload
from workers.prompts.dataset_requests import DatasetRows
from workers.prompts.plan import PromptMaker, dataset_rows

__all__ = ["DatasetCache", "dataset_cache"]

Entries = tuple[FileEntry, ...]


class DatasetCache:
    """Parsed datasets of this process, the ``max_datasets`` most recently used."""

    def __init__(self, max_datasets: int = 4) -> None:
        self.max_datasets = max_datasets
        self._loads: OrderedDict[tuple[str, bool], asyncio.Future[Entries]] = OrderedDict()
        self._rows: OrderedDict[tuple[str, str, str, bool], DatasetRows] = OrderedDict()

    async def workload_rows(
        self, workload: Workload, entries: Entries | None, maker: PromptMaker
    ) -> DatasetRows | None:
        """``workload.dataset``'s rows, counted with the shard's prompt maker and filtered
        (in a thread: a tokenizer counts every row), None for other workloads."""
        spec = workload.dataset
        if spec is None or not entries:
            return None
        counter = workload.tokenizer.describe() if workload.tokenizer is not None else "estimate"
        key = (spec.dataset or "", counter, spec.filters.model_dump_json(), not workload.mix)
        rows = self._rows.get(key)
        if rows is None:
            rows = await asyncio.to_thread(dataset_rows, workload, entries, maker)
            self._rows[key] = rows
            while len(self._rows) > self.max_datasets:
                self._rows.popitem(last=False)
        self._rows.move_to_end(key)
        return rows

    async def workload_entries(
        self, redis: Redis, workload: Workload, max_bytes: int
    ) -> Entries | None:
        """The entries of the workload's dataset (replay or prompts), None without one.
        Raises WorkloadFileError when it cannot be had (a local path, missing, too big)."""
        source = workload.replay or workload.prompts or workload.dataset
        if source is None:
            return None
        if source.dataset is None:
            # Paths are turned into datasets by `tokenbench run`/`submit` before a run.
            raise WorkloadFileError("workers read datasets only, never a path from a scenario")
        return await self.entries(redis, source.dataset, workload.replay is not None, max_bytes)

    async def entries(self, redis: Redis, dataset_id: str, replay: bool, max_bytes: int) -> Entries:
        """The dataset's parsed entries (replay: every line timed, in timestamp order)."""
        key = (dataset_id, replay)
        load = self._loads.get(key)
        if load is not None and load.get_loop() is not asyncio.get_running_loop():
            load = None  # from an event loop that is gone (tests run several in turn)
        if load is None:
            load = asyncio.ensure_future(_fetch(redis, dataset_id, replay, max_bytes))
            self._loads[key] = load
            while len(self._loads) > self.max_datasets:
                self._loads.popitem(last=False)
        else:
            self._loads.move_to_end(key)
        try:
            # Shielded: one shard giving up must not cancel the load others wait for.
            return await asyncio.shield(load)
        except BaseException:
            if load.done() and self._loads.get(key) is load:
                del self._loads[key]  # a failed load is retried by the next shard
            raise


async def dataset_bytes(
    redis: Redis,
    dataset_id: str,
    max_bytes: int,
    error: type[Exception] = WorkloadFileError,
    what: str = "dataset",
) -> bytes:
    """An uploaded dataset's bytes from Redis, refused (as ``error``) when larger than this
    worker accepts or gone; its size is checked before it is read."""
    key = dataset_key(dataset_id)
    size = int(await redis.strlen(key))
    if size > max_bytes:
        raise error(
            f"{what} {dataset_id} has {size} bytes, more than this worker accepts "
            f"({max_bytes}; {env_name('api.max_dataset_bytes')})"
        )
    data: bytes | str | None = await redis.get(key) if size else None
    if not data:
        raise error(
            f"{what} {dataset_id} is not in Redis (expired or lost); the control plane "
            "puts it back when it dispatches the shard again"
        )
    return data if isinstance(data, bytes) else data.encode()


async def _fetch(redis: Redis, dataset_id: str, replay: bool, max_bytes: int) -> Entries:
    raw = await dataset_bytes(redis, dataset_id, max_bytes)
    return await asyncio.to_thread(parse_entries, raw, f"dataset {dataset_id}", replay=replay)


# The worker process's cache (one event loop per worker process, decision 3).
dataset_cache = DatasetCache()
