"""A running session's conversation: what each turn sends, how its context is counted,
the cap, and a replayed session sent as captured."""

from __future__ import annotations

from dataclasses import replace

from scenarios.limits import MAX_ANSWER_CHARS_PER_TOKEN
from workers.client.result import AnswerText, RequestResult
from workers.load.conversation import Conversation
from workers.load.session_plans import PlannedSession
from workers.prompts.plan import PlannedRequest, WordPrompts

# Three turns: messages of 10, 20 and 30 tokens, answers of at most 5, 6 and 7.
TURNS = [PlannedRequest(t, 10 * (t + 1), 5 + t, f"message {t}") for t in range(3)]


def _session(turns: list[PlannedRequest] = TURNS, captured: bool = False) -> PlannedSession:
    return PlannedSession(9, len(turns), (0,) * (len(turns) - 1), turns.__getitem__, captured)


def _answer(text: str, completion: int | None, reasoning: int | None = None) -> RequestResult:
    answer = AnswerText(1000)
    answer.add(text)
    source = None if completion is None else "usage"
    return RequestResult(
        0, completion_tokens=completion, reasoning_tokens=reasoning,
        token_count_source=source, answer=answer,
    )  # fmt: skip


class Counted(WordPrompts):
    """A maker with a tokenizer: one token a character."""

    def count(self, text: str) -> int | None:
        return len(text)


def test_each_turn_sends_the_history_and_counts_its_context() -> None:
    conversation = Conversation(_session(), 1000, WordPrompts())
    first = conversation.turn(0)
    assert first is not None and first.session is not None
    assert first.messages == (("user", "message 0"),)
    assert (first.prompt_tokens, first.session.context_tokens, first.session.turn) == (10, 0, 1)
    assert first.session.answer_chars == 5 * MAX_ANSWER_CHARS_PER_TOKEN
    # Usage counts the answer, less its reasoning tokens (reasoning is not sent back).
    assert conversation.answered(first, _answer("first answer", completion=7, reasoning=2))
    second = conversation.turn(1)
    assert second is not None and second.session is not None
    assert second.messages == (
        ("user", "message 0"), ("assistant", "first answer"), ("user", "message 1"),
    )  # fmt: skip
    assert second.session.context_tokens == 10 + 5 and second.prompt_tokens == 15 + 20
    # Without usage the answer is estimated from its text (4 characters a token).
    assert conversation.answered(second, _answer("x" * 40, completion=None))
    third = conversation.turn(2)
    assert third is not None and third.session is not None
    assert third.session.context_tokens == 15 + 20 + 10
    assert third.session.answer_chars == 0  # the last turn's answer is never sent back
    assert (third.session.turns, third.session.session_id) == (3, 9)


def test_a_tokenizer_counts_the_answer() -> None:
    conversation = Conversation(_session(), 1000, Counted())
    first = conversation.turn(0)
    assert first is not None
    assert conversation.answered(first, _answer("abc", completion=50))
    second = conversation.turn(1)
    assert second is not None and second.session is not None
    assert second.session.context_tokens == 10 + 3


def test_the_cap_ends_the_conversation_but_never_before_its_first_turn() -> None:
    # 10 + 5 fits a cap of 12? no, yet the first turn is always sent.
    conversation = Conversation(_session(), 12, WordPrompts())
    first = conversation.turn(0)
    assert first is not None
    assert conversation.answered(first, _answer("a", completion=1))
    assert conversation.turn(1) is None  # 11 of context + 20 + 6 > 12
    roomy = Conversation(_session(), 11 + 20 + 6, WordPrompts())
    first = roomy.turn(0)
    assert first is not None and roomy.answered(first, _answer("a", completion=1))
    assert roomy.turn(1) is not None  # exactly at the cap


def test_an_answer_cut_at_its_limit_cannot_go_on() -> None:
    conversation = Conversation(_session(), 1000, WordPrompts())
    first = conversation.turn(0)
    assert first is not None
    cut = AnswerText(4)
    cut.add("longer than four")
    assert cut.cut and cut.text() == "long"
    assert not conversation.answered(first, RequestResult(0, answer=cut))
    assert not conversation.answered(first, RequestResult(0))  # nothing kept


def test_a_replayed_turn_is_sent_as_captured() -> None:
    captured = [
        PlannedRequest(0, 3, 4, "q0", messages=(("user", "q0"),)),
        PlannedRequest(
            1, 9, 4, "...",
            messages=(("user", "q0"), ("assistant", "captured answer here"), ("user", "q1")),
        ),
    ]  # fmt: skip
    conversation = Conversation(_session(captured, captured=True), 1, WordPrompts())
    first = conversation.turn(0)
    assert first is not None and first.session is not None and first.session.context_tokens == 0
    assert conversation.answered(first, _answer("a live answer", completion=3))
    second = conversation.turn(1)  # no cap for what was captured
    assert second is not None and second.session is not None
    assert second.messages == captured[1].messages and second.session.answer_chars == 0
    # "user: q0\n\nassistant: captured answer here" at 4 characters a token.
    assert second.session.context_tokens == 10


def test_with_a_target_hit_rate_a_later_turn_plans_its_context_as_cached() -> None:
    planned = [replace(t, cached_prefix_tokens=4 if t.seq == 0 else 0) for t in TURNS]
    conversation = Conversation(_session(planned), 1000, WordPrompts())
    first = conversation.turn(0)
    assert first is not None and first.cached_prefix_tokens == 4  # its share of the stage text
    assert conversation.answered(first, _answer("first answer", completion=5))
    second = conversation.turn(1)
    assert second is not None and second.cached_prefix_tokens == 10 + 5  # the conversation
    # Without a target nothing is planned, whatever the context.
    plain = Conversation(_session(), 1000, WordPrompts())
    assert (turn := plain.turn(0)) is not None and turn.cached_prefix_tokens is None
