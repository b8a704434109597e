"""The outcome of one measured request, as raw ``perf_counter_ns`` stamps (docs/metrics.md)."""

from __future__ import annotations

from array import array
from dataclasses import dataclass, field

from workers.client.errors import RequestFailure
from workers.client.transport.phases import Phases


@dataclass(slots=True)
class AnswerText:
    """The text of a streamed answer, kept only when asked (a session's next turn sends
    it back) and at most ``limit`` characters: a server that ignores ``max_tokens`` must
    not grow the client's memory; ``cut`` says the limit was reached."""

    limit: int
    parts: list[str] = field(default_factory=list)
    chars: int = 0
    cut: bool = False

    def add(self, text: str) -> None:
        """Append a piece of the answer (what fits)."""
        room = self.limit - self.chars
        if len(text) > room:
            text = text[: max(room, 0)]
            self.cut = True
        if text:
            self.parts.append(text)
            self.chars += len(text)

    def text(self) -> str:
        """The answer so far."""
        return "".join(self.parts)


@dataclass(slots=True)
class RequestResult:
    """Stamps and counts of one request; derived metrics are computed from these only."""

    intended_start: int
    sent: int = 0
    first_byte: int | None = None
    first_token: int | None = None
    first_output_token: int | None = None
    last_token: int | None = None
    end: int | None = None
    # Stamp of every token-bearing event; ITL gaps are their successive differences.
    # 8 bytes each in an array: a list kept ~40 (a pointer and an int object), which at
    # 10,000 streams of 1,024-token answers was ~400 MB of a worker (docs/load.md, "Memory").
    token_stamps: array[int] = field(default_factory=lambda: array("q"))
    # Counts as the server reported them; a count the server did not give stays None
    # (the row builder may count the prompt with the workload's tokenizer, never guess it).
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    reasoning_tokens: int | None = None
    token_count_source: str | None = None  # of completion_tokens: usage | events
    prompt_count_source: str | None = None  # of prompt_tokens: usage, or None (not reported)
    # Why the answer ended, in the shared vocabulary (workers/client/finish.py).
    finish_reason: str | None = None
    server_prompt_ns: int | None = None
    server_decode_ns: int | None = None
    # Stamp of the first streamed tool-call delta, and the tool calls the answer made.
    tool_call_at: int | None = None
    tool_calls: int = 0
    # Image tokens of the prompt, where the server's usage reports them apart.
    image_prompt_tokens: int | None = None
    # Where the time goes (docs/metrics.md): the response's own id and the request id
    # header the server sent; timings the response carried (ns) and their source.
    response_id: str | None = None
    server_request_id: str | None = None
    server_queue_ns: int | None = None
    server_ttft_ns: int | None = None
    server_timing_source: str | None = None
    # Prefix cache, as usage reported it: prompt tokens read from and written to it.
    cached_tokens: int | None = None
    cache_write_tokens: int | None = None
    # Connection phases, filled by the arrival transport as the request goes (stamps
    # None on a reused connection, and everything None with another transport).
    phases: Phases = field(default_factory=Phases)
    retries: int = 0
    retry_wait_ns: int = 0
    failure: RequestFailure | None = None
    answer: AnswerText | None = None  # the answer's text, when the request asked to keep it

    @property
    def ok(self) -> bool:
        """True when the request completed without a classified failure."""
        return self.failure is None

    def itl_gaps(self) -> list[int]:
        """Inter-token latencies: gaps between consecutive token-bearing events (ns)."""
        stamps = self.token_stamps
        return [stamps[i] - stamps[i - 1] for i in range(1, len(stamps))]
