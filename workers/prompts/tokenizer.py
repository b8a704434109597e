"""The workload's tokenizer on a worker: from an uploaded dataset or the Hugging Face hub.

A dataset's bytes come from Redis, put there by the control plane before dispatch (as
for prompt files; ``tokenbench run`` stores a local ``tokenizer.json`` that way), so a
worker never reads a path a scenario names. A hub name is looked up in the worker's
Hugging Face cache (``HF_HOME``/``HF_HUB_CACHE``) first and downloaded only when it is
not there and the hub is reachable (never with ``HF_HUB_OFFLINE=1``); a gated model
needs ``HF_TOKEN`` in the worker's environment; a file larger than the dataset cap is
refused before it is fetched. Loading and parsing run off the event loop, after a child
process has loaded the tokenizer and encoded a probe text within a time limit
(``scenarios/tokenizers/probe.py``): a tokenizer whose regex backtracks catastrophically
fails the shard with its name instead of hanging it.
"""

from __future__ import annotations

import asyncio
import functools
from pathlib import Path
from typing import TYPE_CHECKING

from redis.asyncio import Redis

from scenarios.settings import env_name
from scenarios.tokenizers.files import (
    INSTALL_HINT,
    TokenizerUnavailable,
    local_tokenizer_file,
    tokenizer_from_bytes,
    tokenizers_module,
)
from scenarios.tokenizers.probe import check_tokenizer
from scenarios.tokenizers.ref import TokenizerRef
from workers.prompts.datasets import dataset_bytes

if TYPE_CHECKING:
    from tokenizers import Tokenizer

__all__ = [
    "checked_tokenizer",
    "hub_tokenizer_file",
    "load_local_tokenizer",
    "workload_tokenizer",
]

# Seconds to wait for the hub before a download is given up (an unreachable hub must
# fail the shard quickly, with the reason).
HUB_TIMEOUT_S = 10.0
# Largest tokenizer.json fetched from the hub without a worker setting (the dataset cap).
DEFAULT_MAX_BYTES = 64 * 1024 * 1024


async def workload_tokenizer(redis: Redis, ref: TokenizerRef, max_bytes: int) -> Tokenizer:
    """The tokenizer ``ref`` names (a dataset in Redis or a hub name); raises
    TokenizerUnavailable with the reason. A path is refused: ``tokenbench run`` and
    ``submit`` turn it into a dataset before the run."""
    if ref.path is not None:
        raise TokenizerUnavailable("workers read tokenizers from datasets, never a path")
    if ref.dataset is not None:
        data = await dataset_bytes(
            redis, ref.dataset, max_bytes, TokenizerUnavailable, "tokenizer dataset"
        )
        return await asyncio.to_thread(checked_tokenizer, data, f"dataset {ref.dataset}")
    return await asyncio.to_thread(load_local_tokenizer, ref, max_bytes)


def checked_tokenizer(data: bytes, source: str) -> Tokenizer:
    """The tokenizer in ``data``, once a child process has loaded it and encoded the
    probe within the time limit (``scenarios/tokenizers/probe.py``; remembered by content
    hash): a tokenizer that would hang this process's encoding fails here, naming
    ``source``, instead. Blocking: call it off the event loop."""
    check_tokenizer(data, source)
    return tokenizer_from_bytes(data, source)


def load_local_tokenizer(ref: TokenizerRef, max_bytes: int = DEFAULT_MAX_BYTES) -> Tokenizer:
    """A tokenizer from this machine: a local path (the local user's own file) or a hub
    name (cache, else download), checked as :func:`checked_tokenizer`. Blocking: call it
    off the event loop."""
    tokenizers_module()
    path = (
        local_tokenizer_file(ref.path)
        if ref.path is not None
        else hub_tokenizer_file(ref.hub or "", ref.revision, max_bytes)
    )
    try:
        size = path.stat().st_size
        if size > max_bytes:
            raise TokenizerUnavailable(
                f"{ref.describe()}: {size} bytes, more than this machine accepts ({max_bytes})"
            )
        data = path.read_bytes()
    except OSError as exc:
        raise TokenizerUnavailable(f"{ref.describe()}: cannot read {path} ({exc})") from None
    return checked_tokenizer(data, ref.describe())


@functools.lru_cache(maxsize=64)
def hub_tokenizer_file(name: str, revision: str | None, max_bytes: int = DEFAULT_MAX_BYTES) -> Path:
    """The cached ``tokenizer.json`` of hub repository ``name``, downloaded when it is
    not cached and the hub is reachable, and no larger than ``max_bytes`` (a hub name
    comes from an untrusted submitter: its file's size is checked before it is fetched)."""
    try:
        from huggingface_hub import (  # noqa: PLC0415 - optional extra
            get_hf_file_metadata,
            hf_hub_download,
            hf_hub_url,
        )
    except ImportError:
        raise TokenizerUnavailable(f"hub tokenizers need huggingface_hub: {INSTALL_HINT}") from None
    try:
        cached = hf_hub_download(name, "tokenizer.json", revision=revision, local_files_only=True)
        return Path(str(cached))  # put there by this machine's operator: trusted
    except Exception:  # noqa: S110 - not cached: try the hub below
        pass
    try:
        url = hf_hub_url(name, "tokenizer.json", revision=revision)
        meta = get_hf_file_metadata(url, timeout=HUB_TIMEOUT_S)
        size = meta.size
        if size is None or size > max_bytes:
            raise TokenizerUnavailable(
                f"tokenizer {name}: its tokenizer.json has {size} bytes, more than this worker "
                f"accepts ({max_bytes}; {env_name('api.max_dataset_bytes')})"
            )
        # The commit whose file size was checked, not a branch that may have moved since.
        downloaded = hf_hub_download(
            name,
            "tokenizer.json",
            revision=meta.commit_hash or revision,
            etag_timeout=HUB_TIMEOUT_S,
        )
    except TokenizerUnavailable:
        raise
    except Exception as exc:  # offline, unreachable, gated, unknown: say which
        raise TokenizerUnavailable(
            f"tokenizer {name}: not in this worker's Hugging Face cache and not downloadable "
            f"({type(exc).__name__}: {str(exc)[:300]}); pre-fetch it on the worker with "
            f"`huggingface-cli download {name} tokenizer.json`, set HF_TOKEN for a gated "
            "model, or upload the tokenizer.json as a dataset"
        ) from None
    return Path(str(downloaded))
