"""Calibrating generated prompts from the server's own counts (docs/lengths.md).

Without a tokenizer a prompt is words, and a server counts them its own way (English
BPE ~1.3 tokens a word, plus its chat template). Each shard fits ``reported ≈ a·words +
b`` on the ``usage.prompt_tokens`` of its successful requests; until
:data:`MIN_SAMPLES` have come back it sends one word per planned token (its *warm-up*
requests, marked ``warmup``), then ``(N − b) / a`` words for N planned tokens (marked
``calibrated``, with ``a`` and ``b`` recorded). The fit is least squares when the
prompt lengths vary, else proportional (``b = 0``), and keeps improving with every
answer. Its sums are kept in Redis per run, provider and region, so the next stage
starts calibrated. Requests with images (``workload.images``) teach it only where the
server reports their image tokens apart.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Protocol

import orjson
from redis.asyncio import Redis

from scenarios.wire.contract import calibration_key
from workers.prompts.plan import WORDS, PlannedRequest, PromptText, RepeatedText, make_prompt

__all__ = ["MIN_SAMPLES", "Answer", "CalibratedPrompts", "LengthFit", "load_fit", "save_fit"]

MIN_SAMPLES = 8
# Tokens per word a fit may claim: beyond, the server's counts are not believed (and a
# prompt never grows past 4 words per planned token).
MIN_TOKENS_PER_WORD = 0.25
MAX_TOKENS_PER_WORD = 8.0
# Least squares only when the words' spread is at least this share of their mean: with
# (nearly) fixed lengths the intercept cannot be told from the slope.
MIN_RELATIVE_SPREAD = 0.1
FIT_TTL_S = 7 * 24 * 3600


class Answer(Protocol):
    """What calibration reads of a measured answer: a ``RequestResult`` of the client
    (``workers/client/result.py``; the prompts room sits below the client it feeds)."""

    @property
    def failure(self) -> object | None: ...
    @property
    def prompt_count_source(self) -> str | None: ...
    @property
    def prompt_tokens(self) -> int | None: ...
    @property
    def image_prompt_tokens(self) -> int | None: ...


@dataclass(slots=True)
class LengthFit:
    """Running sums of (words sent, prompt tokens reported) pairs."""

    n: int = 0
    sx: float = 0.0
    sy: float = 0.0
    sxx: float = 0.0
    sxy: float = 0.0

    def add(self, words: int, reported: int) -> None:
        """One answer's pair."""
        self.n += 1
        self.sx += words
        self.sy += reported
        self.sxx += words * words
        self.sxy += words * reported

    def line(self) -> tuple[float, float] | None:
        """``(tokens per word, template tokens)``, or None before MIN_SAMPLES pairs."""
        if self.n < MIN_SAMPLES or self.sx <= 0:
            return None
        mean = self.sx / self.n
        variance = self.sxx / self.n - mean * mean
        if variance > (MIN_RELATIVE_SPREAD * mean) ** 2:
            slope = (self.n * self.sxy - self.sx * self.sy) / (self.n * self.sxx - self.sx**2)
            if MIN_TOKENS_PER_WORD <= slope <= MAX_TOKENS_PER_WORD:
                return slope, (self.sy - slope * self.sx) / self.n
        ratio = min(max(self.sy / self.sx, MIN_TOKENS_PER_WORD), MAX_TOKENS_PER_WORD)
        return ratio, 0.0

    def to_json(self) -> bytes:
        """The sums, for Redis."""
        return orjson.dumps([self.n, self.sx, self.sy, self.sxx, self.sxy])

    @classmethod
    def from_json(cls, data: bytes | str) -> LengthFit:
        """Sums stored by :meth:`to_json` (an empty fit when they are unreadable)."""
        try:
            n, sx, sy, sxx, sxy = orjson.loads(data)
            return cls(int(n), float(sx), float(sy), float(sxx), float(sxy))
        except (orjson.JSONDecodeError, TypeError, ValueError):
            return cls()


class CalibratedPrompts:
    """Generated prompts sized by the server's measured tokens per word."""

    vocabulary = tuple(WORDS)

    def __init__(self, fit: LengthFit | None = None) -> None:
        self.fit = fit or LengthFit()
        self._line = self.fit.line()

    def observe(self, words: int, reported: int) -> None:
        """A successful answer's reported prompt tokens for a prompt of ``words`` words."""
        self.fit.add(words, reported)
        self._line = self.fit.line()

    def observe_answer(self, request: PlannedRequest, result: Answer) -> None:
        """Learn from a successful answer whose server reported its prompt tokens. A
        session's later turns are not words alone (their conversation holds answers), and
        image tokens are not text: a request with images counts only where the server
        reported its image tokens apart (they are subtracted), else it is skipped."""
        if request.session is not None and request.session.turn > 1:
            return
        usage = result.failure is None and result.prompt_count_source == "usage"
        if not (usage and result.prompt_tokens):
            return
        text_tokens = result.prompt_tokens
        if request.images is not None:
            if result.image_prompt_tokens is None:
                return
            text_tokens -= result.image_prompt_tokens
        if text_tokens > 0:
            self.observe(len(request.prompt.split()), text_tokens)

    def words_for(self, tokens: int) -> int:
        """Words expected to make ``tokens`` tokens on this server."""
        if self._line is None:
            return max(tokens, 1)
        slope, template = self._line
        return max(1, round((tokens - template) / slope))

    def prefix(self, tokens: int, seed: int) -> str:
        """The run's shared prefix: ``tokens`` tokens at the measured tokens per word."""
        words = tokens if self._line is None else max(1, round(tokens / self._line[0]))
        return make_prompt(words, random.Random(f"{seed}/shared-prefix"))

    def count(self, text: str) -> int | None:
        """Unknown: no tokenizer."""
        return None

    def repeated(self, tokens: int, text: RepeatedText) -> str:
        """``tokens`` tokens of the repeated text at the measured tokens per word (no
        template: the text is inside the prompt, after it)."""
        return text.text(tokens if self._line is None else max(1, round(tokens / self._line[0])))

    def prompt(self, tokens: int, rng: random.Random, prefix: str = "") -> PromptText:
        """A prompt planned as ``tokens`` tokens (``prefix`` counted in them)."""
        prefix_words = len(prefix.split())
        tail = max(self.words_for(tokens) - prefix_words, 1)
        body = make_prompt(tail, rng)
        text = f"{prefix} {body}" if prefix else body
        if self._line is None:
            return PromptText(text, tokens, "warmup")
        slope, template = self._line
        return PromptText(text, tokens, "calibrated", slope, template)


async def load_fit(redis: Redis, run_id: str, provider: str, region: str) -> LengthFit:
    """The sums earlier stages left (an empty fit when there are none)."""
    data: bytes | str | None = await redis.get(calibration_key(run_id, provider, region))
    return LengthFit() if not data else LengthFit.from_json(data)


async def save_fit(redis: Redis, run_id: str, provider: str, region: str, fit: LengthFit) -> None:
    """Keep the sums for the next stage."""
    if fit.n:
        await redis.set(calibration_key(run_id, provider, region), fit.to_json(), ex=FIT_TTL_S)
