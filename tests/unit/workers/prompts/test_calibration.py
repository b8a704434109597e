"""Calibrating generated prompts from the server's reported prompt tokens."""

from __future__ import annotations

import random

import pytest

from scenarios.workload.spec import FixedLength, MixClass, UniformLength, Workload
from workers.client.result import RequestResult
from workers.prompts.calibration import MIN_SAMPLES, CalibratedPrompts, LengthFit
from workers.prompts.images import GeneratedImage, RequestImages
from workers.prompts.plan import PlannedRequest, SessionTurn, request_planner


def _answer(prompt_tokens: int) -> RequestResult:
    result = RequestResult(intended_start=0, sent=0)
    result.prompt_tokens = prompt_tokens
    result.token_count_source = result.prompt_count_source = "usage"
    return result


def _workload(low: int, high: int) -> Workload:
    prompt = (
        FixedLength(dist="fixed", value=low)
        if low == high
        else UniformLength(dist="uniform", min=low, max=high)
    )
    return Workload(
        mix=[MixClass(prompt_tokens=prompt, output_tokens=FixedLength(dist="fixed", value=1))]
    )


def _serve(plan_seq: PlannedRequest, tokens_per_word: float, template: int) -> int:
    return round(len(plan_seq.prompt.split()) * tokens_per_word) + template


@pytest.mark.parametrize(
    ("low", "high", "tokens_per_word", "template"),
    [(512, 512, 1.3, 0), (200, 2000, 1.3, 0), (200, 2000, 2.4, 25), (64, 64, 0.8, 0)],
)
def test_after_warm_up_the_planned_length_is_what_the_server_counts(
    low: int, high: int, tokens_per_word: float, template: int
) -> None:
    maker = CalibratedPrompts()
    plan = request_planner(_workload(low, high), 3, 0, maker=maker)
    errors = {"warmup": [], "calibrated": []}  # type: dict[str, list[float]]
    for seq in range(60):
        request = plan(seq)
        reported = _serve(request, tokens_per_word, template)
        errors[request.prompt_source].append(reported / request.prompt_tokens - 1)
        maker.observe_answer(request, _answer(reported))
    assert len(errors["warmup"]) == MIN_SAMPLES
    before = sum(errors["warmup"]) / MIN_SAMPLES
    after = sum(errors["calibrated"]) / len(errors["calibrated"])
    assert abs(before) > 0.15  # one word a token is far off on this server
    assert abs(after) < 0.01
    last = plan(60)
    assert last.tokens_per_word == pytest.approx(tokens_per_word, rel=0.02)


def test_fixed_lengths_fit_a_ratio_varied_ones_a_line() -> None:
    fixed, varied = LengthFit(), LengthFit()
    for _ in range(MIN_SAMPLES):
        fixed.add(100, 130)
    ratio, none = fixed.line() or (0.0, 1.0)
    assert ratio == pytest.approx(1.3) and none == 0.0
    for words in range(100, 100 + 10 * MIN_SAMPLES, 10):
        varied.add(words, round(words * 2) + 30)
    slope, template = varied.line() or (0, 0)
    assert slope == pytest.approx(2.0) and template == pytest.approx(30.0)


def test_no_fit_before_enough_answers_and_absurd_counts_are_bounded() -> None:
    fit = LengthFit()
    for _ in range(MIN_SAMPLES - 1):
        fit.add(100, 100)
    assert fit.line() is None
    fit.add(100, 100_000)  # a server reporting nonsense cannot grow prompts without bound
    assert fit.line() == (8.0, 0.0)
    assert LengthFit.from_json(fit.to_json()) == fit
    assert LengthFit.from_json(b"garbage") == LengthFit()


def test_errors_and_other_count_sources_are_not_learnt_from() -> None:
    maker = CalibratedPrompts()
    request = PlannedRequest(0, 10, 1, "a b c d e f g h i j")
    counted = _answer(99)
    counted.prompt_count_source = None  # the server reported no prompt count
    for _ in range(2 * MIN_SAMPLES):
        maker.observe_answer(request, counted)
    assert maker.fit.n == 0
    made = maker.prompt(10, random.Random(1))
    assert made.source == "warmup" and len(made.text.split()) == 10


def test_a_carried_fit_starts_calibrated_and_scales_the_shared_prefix() -> None:
    fit = LengthFit()
    for _ in range(MIN_SAMPLES):
        fit.add(100, 200)
    maker = CalibratedPrompts(fit)
    assert len(maker.prefix(100, seed=1).split()) == 50
    made = maker.prompt(300, random.Random(2), maker.prefix(100, seed=1))
    assert made.source == "calibrated" and len(made.text.split()) == 150


def test_a_sessions_later_turns_do_not_calibrate() -> None:
    maker = CalibratedPrompts()
    answered = RequestResult(0, prompt_tokens=80, prompt_count_source="usage")
    later = PlannedRequest(1, 60, 4, "ten words " * 5, session=SessionTurn(0, 2, 3, 50))
    maker.observe_answer(later, answered)  # 80 tokens of conversation, not of its words
    assert maker.fit.n == 0
    first = PlannedRequest(0, 10, 4, "ten words " * 5, session=SessionTurn(0, 1, 3, 0))
    maker.observe_answer(first, answered)
    assert maker.fit.n == 1


def test_image_tokens_never_count_as_text() -> None:
    images = RequestImages((GeneratedImage("u", 512, 512, 9, "d" * 64),))
    words = "a b c d e f g h i j"
    with_image = PlannedRequest(0, 10, 1, words, images=images)
    # A server that reports only the sum: the text share is unknown, nothing is learnt.
    maker = CalibratedPrompts()
    for _ in range(2 * MIN_SAMPLES):
        maker.observe_answer(with_image, _answer(13 + 255))
    assert maker.fit.n == 0
    # One that reports image tokens apart: they are subtracted.
    split = _answer(13 + 255)
    split.image_prompt_tokens = 255
    for _ in range(MIN_SAMPLES):
        maker.observe_answer(with_image, split)
        maker.observe_answer(PlannedRequest(0, 10, 1, words), _answer(13))
    assert maker.fit.line() == pytest.approx((1.3, 0.0))
