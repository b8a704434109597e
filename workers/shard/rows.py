"""Turning a RequestResult into a row of the request-record schema."""

from __future__ import annotations

import time
from dataclasses import dataclass, replace

from scenarios.security.redaction import redact
from scenarios.wire.records import STAMPS
from workers.client.request_ids import prompt_hash, request_id
from workers.client.result import RequestResult
from workers.prompts.plan import PlannedRequest

# One (wall, perf) pair read together at import: wall-clock instants are derived from
# perf stamps through it, so every *_at column of a process shares one offset.
_WALL_ANCHOR_NS = time.time_ns()
_PERF_ANCHOR_NS = time.perf_counter_ns()


def wall_ns(perf_ns: int | None) -> int | None:
    """Wall-clock epoch ns of a ``perf_counter_ns`` stamp of this process."""
    return None if perf_ns is None else _WALL_ANCHOR_NS + (perf_ns - _PERF_ANCHOR_NS)


@dataclass(frozen=True, slots=True)
class RowContext:
    """Identity columns shared by every record of one shard attempt."""

    run_id: str
    stage: int
    shard_id: str
    attempt: int
    provider: str
    model: str
    region: str
    worker: str
    load_kind: str
    concurrency: int
    request_key: str | None = None
    # Failover runs (scenario.upstreams): each record keeps the id its request was sent
    # with and its prompt hash, by which the upstreams' logs are joined to it.
    tag_requests: bool = False


_INT32_MAX = 2**31 - 1
_INT64_MAX = 2**63 - 1


def _holds(value: int | None, ceiling: int) -> bool:
    return value is None or 0 <= value <= ceiling


def _within(value: int | None, ceiling: int) -> int | None:
    """A server-reported figure if a record column can hold it, else unknown: one absurd
    number from a broken or hostile server must not make the whole batch unencodable."""
    return value if _holds(value, ceiling) else None


def _counts(
    request: PlannedRequest, result: RequestResult
) -> tuple[int | None, int | None, str | None, str | None]:
    """``(prompt_tokens, completion_tokens, token_count_source, prompt_count_source)`` of
    a record (docs/metrics.md, "Token counts"). A prompt count the server did not report
    is the workload tokenizer's when the plan counted the prompt with it (``tokenizer``),
    else unknown (NULL): a planned length is never recorded as if it had been reported."""
    prompt, completion = result.prompt_tokens, result.completion_tokens
    source, prompt_source = result.token_count_source, result.prompt_count_source
    if not (_holds(prompt, _INT32_MAX) and _holds(completion, _INT32_MAX)):
        # Counts no record column can hold (negative, past 2^31 - 1) are not believed,
        # neither of them (one broken usage object): completions fall back to counted
        # events, the prompt to unknown, and the sources say so.
        prompt, prompt_source = None, None
        completion, source = len(result.token_stamps), "events"
    text_only = request.images is None  # a tokenizer counts no image tokens
    if (
        prompt is None
        and result.failure is None
        and request.prompt_source == "tokenizer"
        and text_only
    ):
        # The plan made (or counted) this prompt's text with the workload's tokenizer, so
        # its planned length is that tokenizer's count of the text sent (no chat template).
        prompt, prompt_source = request.prompt_tokens, "tokenizer"
    return prompt, completion, source, prompt_source


_SESSION_COLUMNS = ("session_id", "turn", "session_turns", "context_tokens", "session_end")


def _session_columns(request: PlannedRequest) -> dict[str, object]:
    place = request.session
    if place is None:
        return dict.fromkeys(_SESSION_COLUMNS)
    return {
        "session_id": place.session_id,
        "turn": place.turn,
        "session_turns": place.turns,
        "context_tokens": _within(place.context_tokens, _INT32_MAX),
        "session_end": place.end,
    }


def _image_columns(request: PlannedRequest, result: RequestResult) -> dict[str, object]:
    images = request.images
    return {
        "images": 0 if images is None else images.count,
        "image_bytes": 0 if images is None else images.size,
        "image_pixels": 0 if images is None else images.pixels,
        "image_digest": None if images is None else images.digest(),
        "image_prompt_tokens": _within(result.image_prompt_tokens, _INT32_MAX),
    }


def planned_messages(request: PlannedRequest) -> list[tuple[str, str]]:
    """The conversation a chat request sends: a file's or session's messages, else the
    prompt as one user message (as ``chat_body`` builds it)."""
    return list(request.messages) if request.messages else [("user", request.prompt)]


def tagged(ctx: RowContext, request: PlannedRequest) -> PlannedRequest:
    """``request`` with the id it is sent with in a failover run (the record finds the
    same id again from its shard, attempt and seq), else unchanged."""
    if not ctx.tag_requests:
        return request
    return replace(request, request_id=request_id(ctx.shard_id, ctx.attempt, request.seq))


def _tag_columns(ctx: RowContext, request: PlannedRequest) -> dict[str, object]:
    if not ctx.tag_requests:
        return {"client_request_id": None, "prompt_hash": None}
    return {
        "client_request_id": request_id(ctx.shard_id, ctx.attempt, request.seq),
        "prompt_hash": prompt_hash(planned_messages(request)),
    }


def _span(start: int | None, end: int | None) -> int | None:
    return None if start is None or end is None else end - start


def _timing_columns(result: RequestResult) -> dict[str, object]:
    """Where the time went (docs/metrics.md): ids, the server's own timings, prefix
    cache usage and connection phases; a figure no column can hold is unknown."""
    phases = result.phases
    return {
        # Already cut and checked where they were read (workers/client/server_ids.py).
        "response_id": result.response_id,
        "server_request_id": result.server_request_id,
        "server_queue_ns": _within(result.server_queue_ns, _INT64_MAX),
        "server_ttft_ns": _within(result.server_ttft_ns, _INT64_MAX),
        "server_timing_source": result.server_timing_source,
        "cached_tokens": _within(result.cached_tokens, _INT32_MAX),
        "cache_write_tokens": _within(result.cache_write_tokens, _INT32_MAX),
        "dns_ns": _span(phases.dns_start, phases.dns_end),
        "connect_ns": _span(phases.connect_start, phases.connect_end),
        "tls_ns": _span(phases.tls_start, phases.tls_end),
        "request_written_ns": _span(result.sent, phases.request_written),
        "connection_new": phases.connection_new,
    }


def record_row(
    ctx: RowContext, request: PlannedRequest, result: RequestResult
) -> dict[str, object]:
    """The record of one request: identity, stamps as durations and instants, outcome."""
    sent = result.sent

    def since_sent(stamp: int | None) -> int | None:
        return None if stamp is None else stamp - sent

    failure = result.failure
    prompt_tokens, completion_tokens, source, prompt_source = _counts(request, result)
    row: dict[str, object] = {
        "run_id": ctx.run_id,
        "stage": ctx.stage,
        "shard_id": ctx.shard_id,
        "attempt": ctx.attempt,
        "seq": request.seq,
        "provider": ctx.provider,
        "model": ctx.model,
        "region": ctx.region,
        "worker": ctx.worker,
        "load_kind": ctx.load_kind,
        "concurrency": ctx.concurrency,
        "planned_prompt_tokens": request.prompt_tokens,
        "planned_output_tokens": request.output_tokens,
        "schedule_lag_ns": sent - result.intended_start,
        "first_byte_ns": since_sent(result.first_byte),
        "ttft_ns": since_sent(result.first_token),
        "ttfot_ns": since_sent(result.first_output_token),
        "last_token_ns": since_sent(result.last_token),
        "e2e_ns": since_sent(result.end),
        "itl_ns": result.itl_gaps(),
        "token_events": len(result.token_stamps),
        "prompt_tokens": _within(prompt_tokens, _INT32_MAX),
        "completion_tokens": _within(completion_tokens, _INT32_MAX),
        "reasoning_tokens": _within(result.reasoning_tokens, _INT32_MAX),
        "token_count_source": source,
        "prompt_count_source": prompt_source,
        "server_prompt_ns": _within(result.server_prompt_ns, _INT64_MAX),
        "server_decode_ns": _within(result.server_decode_ns, _INT64_MAX),
        "retries": result.retries,
        "retry_wait_ns": result.retry_wait_ns,
        "request_key": ctx.request_key,
        "status": "ok" if failure is None else "error",
        "error_class": None if failure is None else failure.error_class.value,
        "http_status": None if failure is None else failure.http_status,
        # Every message is redacted here, whatever built it (an adapter, the gateway, a
        # retry): the record is what leaves the worker (docs/security.md, "Error messages").
        "error_message": None if failure is None else redact(failure.message),
        "planned_prompt_source": request.prompt_source,
        "prompt_tokens_per_word": request.tokens_per_word,
        "prompt_template_tokens": request.template_tokens,
        "tools_offered": request.tools is not None,
        "tool_call": result.tool_call_at is not None,
        "tool_call_at_ns": since_sent(result.tool_call_at),
        "tool_calls": result.tool_calls,
        "finish_reason": result.finish_reason,
        **_session_columns(request),
        "dataset_id": request.dataset_id,
        "dataset_row": request.dataset_row,
        **_image_columns(request, result),
        **_tag_columns(ctx, request),
        **_timing_columns(result),
        "planned_cached_tokens": _within(request.cached_prefix_tokens, _INT32_MAX),
    }
    for stamp in STAMPS:
        row[f"{stamp}_at"] = wall_ns(getattr(result, stamp))
    return row
