"""What the hosted APIs' own streaming dialects share (``anthropic``, ``openai-responses``,
``gemini``; pure logic).

Each dialect names its events its own way, but what they mean for a measurement is the
same: a piece of answer text is an output token event, a piece of reasoning (thinking) text
a token event that counts for ``first_token`` only (docs/metrics.md), a piece of a tool
call is output too and the call is counted once; the answer's id and the server's request
id header are kept for joins; usage supplies the counts, with the prompt tokens the prefix
cache served (``cached_tokens``) and wrote (``cache_write_tokens``) where the dialect says
them; an answer is finished only when the dialect's own end says why it ended. Error
events (sent with HTTP 200) are failures classified by the HTTP status their kind stands for.
"""

from __future__ import annotations

from typing import Any

from workers.client.errors import IncompleteAnswer, RequestFailure, class_of_status, redact
from workers.client.result import RequestResult
from workers.client.server_ids import note_response_id
from workers.client.streaming import settle_counts, token_event
from workers.prompts.plan import PlannedRequest

# Distinct tool calls counted per answer: a hostile server cannot grow the set unbounded.
MAX_TOOL_CALLS = 1024
# Longest id kept from a response (ids are server text bound for the database).


class NativeStream:
    """Accumulates one streamed answer of a native dialect into a RequestResult."""

    __slots__ = (
        "completion",
        "ended",
        "events",
        "finished",
        "prompt",
        "result",
        "tool_keys",
    )

    def __init__(self, result: RequestResult) -> None:
        self.result = result
        self.events = 0  # token-bearing events
        self.finished: str | None = None  # the finish reason, in the shared vocabulary
        self.ended = False  # saw the dialect's last event
        self.prompt: int | None = None  # usage, when the server gives it
        self.completion: int | None = None
        self.tool_keys: set[object] = set()

    def response_id(self, value: object) -> None:
        """Keep the answer's own id (the first one the stream gives)."""
        note_response_id(self.result, value)

    def event(self, stamp: int, *, output: bool) -> None:
        """One token-bearing event (several tokens in one event are still one)."""
        token_event(self.result, stamp, output=output)
        self.events += 1

    def text(self, stamp: int, text: object, *, output: bool, emit: bool = True) -> bool:
        """A piece of answer (``output``) or reasoning text; empty pieces are no tokens.
        Whether it was one; with ``emit`` False the caller records the event itself."""
        if not isinstance(text, str) or not text:
            return False
        if emit:
            self.event(stamp, output=output)
        if output and self.result.answer is not None:
            self.result.answer.add(text)
        return True

    def tool_call(self, stamp: int, key: object, piece: object = None, emit: bool = True) -> bool:
        """A tool call starting (``piece`` None) or a piece of its arguments: output like
        text; calls are counted by ``key`` (their block index or item id)."""
        if piece is not None and (not isinstance(piece, str) or not piece):
            return False
        if self.result.tool_call_at is None:
            self.result.tool_call_at = stamp
        if key not in self.tool_keys and len(self.tool_keys) < MAX_TOOL_CALLS:
            self.tool_keys.add(key)
        self.result.tool_calls = len(self.tool_keys)
        if emit:
            self.event(stamp, output=True)
        return True

    def cache(self, read: object, written: object = None) -> None:
        """Prompt tokens the server's prefix cache served (and wrote), as usage said."""
        if isinstance(read, int) and read >= 0:
            self.result.cached_tokens = read
        if isinstance(written, int) and written >= 0:
            self.result.cache_write_tokens = written

    def finish(self, dialect_end: str) -> None:
        """Close the stream: check the answer said why it ended, settle token counts."""
        if self.finished is None:
            seen = f"after its {dialect_end}" if self.ended else f"without its {dialect_end}"
            raise IncompleteAnswer(
                f"stream ended {seen} but gave no finish reason after {self.events} token events"
            )
        self.result.finish_reason = self.finished
        settle_counts(self.result, self.prompt, self.completion, self.events)


def event_failure(status: int, kind: object, message: object) -> RequestFailure:
    """Failure of an error event sent mid-stream with HTTP 200: classified as the status
    its kind stands for."""
    return RequestFailure(
        class_of_status(status), redact(f"error event mid-stream ({kind}): {message}"), status
    )


def conversation(request: PlannedRequest) -> tuple[str | None, list[tuple[str, str]]]:
    """The planned conversation as (system text or None, [(user|assistant, text)]): a
    prompt file's or session's messages, else the prompt as one user message."""
    if not request.messages:
        return None, [("user", request.prompt)]
    system = [text for role, text in request.messages if role == "system"]
    turns = [
        ("assistant" if role == "assistant" else "user", text)
        for role, text in request.messages
        if role != "system"
    ]
    return ("\n\n".join(system) if system else None), turns or [("user", "")]


def function_tools(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The workload's OpenAI-style tools as plain functions (name, description,
    parameters), whatever the dialect then wraps them in."""
    functions = []
    for tool in tools:
        function = tool.get("function") if isinstance(tool, dict) else None
        if isinstance(function, dict) and isinstance(function.get("name"), str):
            functions.append(
                {
                    "name": function["name"],
                    "description": str(function.get("description", "")),
                    "parameters": function.get("parameters") or {"type": "object"},
                }
            )
    return functions


def forced_tool(tool_choice: str | dict[str, Any]) -> str | None:
    """The function a ``{"type": "function", "function": {"name": ...}}`` choice names."""
    if isinstance(tool_choice, dict):
        function = tool_choice.get("function")
        name = function.get("name") if isinstance(function, dict) else None
        return name if isinstance(name, str) else None
    return None
