"""One running session's conversation: what each turn sends, and how large it has grown.

A generated session's turn sends every earlier user message and the answer text the
server returned for it, then the turn's new user message (docs/workloads.md). What is
sent therefore depends on the provider's answers; the plan (each new message, each
answer's max_tokens) does not. ``context_tokens`` counts the earlier turns' tokens sent
with a turn: user messages as planned, answers counted with the workload's tokenizer,
else as the server's usage reported them (less reasoning tokens, which are not sent
back), else estimated from their text. A turn that would need more than
``max_context_tokens`` (its context, its new message and its max_tokens) is not sent:
the session ends there (``context_cap``); the first turn is always sent, since the cap
bounds a conversation's growth, not the mix's prompts.

A replayed session sends each turn's captured messages as captured (the log is what its
clients sent), so the provider's answers are not appended and no cap applies; its
context is the captured messages before the last one.
"""

from __future__ import annotations

from dataclasses import replace

from scenarios.datasets.files import Message, prompt_text
from scenarios.limits import MAX_ANSWER_CHARS_PER_TOKEN
from workers.client.result import RequestResult
from workers.load.session_plans import PlannedSession
from workers.prompts.plan import PlannedRequest, PromptMaker, SessionTurn, estimate_tokens

__all__ = ["Conversation"]


class Conversation:
    """The state of one session while its turns run."""

    def __init__(
        self, session: PlannedSession, max_context_tokens: int, maker: PromptMaker
    ) -> None:
        self.session = session
        self.max_context_tokens = max_context_tokens
        self.maker = maker
        self.context_tokens = 0
        self._history: list[Message] = []

    def turn(self, index: int) -> PlannedRequest | None:
        """The request of turn ``index`` (from 0), or None when it would exceed the cap."""
        session = self.session
        planned = session.plan_turn(index)
        if session.captured:
            messages = planned.messages or (("user", planned.prompt),)
            context = self._count(prompt_text(messages[:-1])) if len(messages) > 1 else 0
            place = SessionTurn(session.session_id, index + 1, session.turns, context)
            return replace(planned, session=place)
        needed = self.context_tokens + planned.prompt_tokens + planned.output_tokens
        if index > 0 and needed > self.max_context_tokens:
            return None
        last = index + 1 >= session.turns
        # The last turn's answer is never sent back: no need to keep its text.
        keep = 0 if last else planned.output_tokens * MAX_ANSWER_CHARS_PER_TOKEN
        place = SessionTurn(session.session_id, index + 1, session.turns, self.context_tokens, keep)
        cached = planned.cached_prefix_tokens  # a target hit rate: the context repeats
        return replace(
            planned,
            prompt_tokens=self.context_tokens + planned.prompt_tokens,
            cached_prefix_tokens=None if cached is None else cached + self.context_tokens,
            messages=(*self._history, ("user", planned.prompt)),
            session=place,
        )

    def answered(self, request: PlannedRequest, result: RequestResult) -> bool:
        """Add a successful turn's answer to the conversation; False when the answer's
        text was not kept whole (longer than a turn's answer may be: the server ignored
        max_tokens), so the conversation cannot go on."""
        if self.session.captured:
            return True
        answer, place = result.answer, request.session
        if answer is None or answer.cut or place is None:
            return False
        text = answer.text()
        self._history += [("user", request.prompt), ("assistant", text)]
        new_message = request.prompt_tokens - place.context_tokens
        self.context_tokens += new_message + self._answer_tokens(text, result)
        return True

    def _answer_tokens(self, text: str, result: RequestResult) -> int:
        counted = self.maker.count(text) if text else 0
        if counted is not None:
            return counted
        if result.token_count_source == "usage" and result.completion_tokens is not None:
            return max(0, result.completion_tokens - (result.reasoning_tokens or 0))
        return estimate_tokens(text) if text else 0

    def _count(self, text: str) -> int:
        counted = self.maker.count(text)
        return counted if counted is not None else estimate_tokens(text)
