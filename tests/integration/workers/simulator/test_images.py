"""The simulated endpoint with images over loopback HTTP: image parts are counted by its
rule into prompt_tokens (and reported apart when asked), the latency model is handed the
image tokens as prompt (so the batching model's TTFT grows with them), and images it
cannot read are a 400 naming why."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import AsyncIterator, Coroutine
from typing import Any, TypeVar

import httpx
import orjson
import pytest

from scenarios.providers.simulate import SimulateSpec
from workers.prompts.images import generate_image
from workers.runtime.event_loop import new_loop
from workers.simulator import FixedLatency
from workers.simulator.scheduler import BatchScheduler, replay
from workers.simulator.server import SimulatorApp, start_server

pytestmark = pytest.mark.integration

T = TypeVar("T")
JPEG = base64.b64encode(generate_image(1024, 1024, "jpeg", 80, "sim")).decode()


class Recording:
    """A latency model that remembers the prompt tokens each request was handed."""

    def __init__(self) -> None:
        self.inner = FixedLatency(0.001, 0.001)
        self.prompts: list[int] = []

    def emissions(self, prompt_tokens: int, max_tokens: int, cached: int = 0) -> AsyncIterator[int]:
        self.prompts.append(prompt_tokens)
        return self.inner.emissions(prompt_tokens, max_tokens, cached)


def _chat(*parts: dict[str, Any], detail: str | None = None) -> dict[str, Any]:
    image: dict[str, Any] = {"url": f"data:image/jpeg;base64,{JPEG}"}
    if detail:
        image["detail"] = detail
    content = [
        {"type": "text", "text": "three word prompt"},
        {"type": "image_url", "image_url": image},
    ]
    return {
        "model": "x",
        "messages": [{"role": "user", "content": [*content, *parts]}],
        "stream": True,
        "max_tokens": 2,
        "stream_options": {"include_usage": True},
    }


def _run(coro: Coroutine[Any, Any, T]) -> T:
    with asyncio.Runner(loop_factory=new_loop) as runner:
        return runner.run(coro)


async def _post(app: SimulatorApp, body: dict[str, Any]) -> httpx.Response:
    server = await start_server(app)
    port = server.sockets[0].getsockname()[1]
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=30) as client:
            return await client.post("/v1/chat/completions", json=body)
    finally:
        server.close()
        await server.wait_closed()


def _usage(answer: httpx.Response) -> dict[str, Any]:
    assert answer.status_code == 200, answer.text
    events = [line.removeprefix("data: ") for line in answer.text.split("\n\n") if line]
    (usage,) = [orjson.loads(e)["usage"] for e in events if e != "[DONE]" and '"usage"' in e]
    return dict(usage)


def test_image_tokens_are_prompt_tokens_reported_apart() -> None:
    latency = Recording()
    app = SimulatorApp(SimulateSpec(), latency=latency)
    usage = _usage(_run(_post(app, _chat())))
    # 1024 x 1024 scales to 768 x 768: 4 tiles, 85 + 4 x 170 = 765 tokens, plus 3 words.
    assert usage["prompt_tokens"] == 768
    assert usage["prompt_tokens_details"] == {"image_tokens": 765, "text_tokens": 3}
    assert latency.prompts == [768]  # the latency model prefills the image tokens too
    low = _usage(_run(_post(app, _chat(detail="low"))))
    assert low["prompt_tokens"] == 3 + 85


def test_patches_and_a_summed_report() -> None:
    spec = SimulateSpec(image_token_rule="patches", image_patch_px=32, report_image_tokens=False)
    usage = _usage(_run(_post(SimulatorApp(spec, latency=Recording()), _chat())))
    assert usage["prompt_tokens"] == 3 + 32 * 32
    assert "prompt_tokens_details" not in usage


def test_the_batching_model_takes_longer_to_first_token_with_image_tokens() -> None:
    spec = SimulateSpec(model="llama-3.1-8b", hardware="h100", gpus=1)
    latency = Recording()
    _usage(_run(_post(SimulatorApp(spec, latency=latency), _chat())))
    (with_image,) = latency.prompts
    # On the model's virtual clock: the same request with and without its image tokens.
    (text_only,) = replay(BatchScheduler.from_spec(spec), [(0.0, 3, 2)])
    (imaged,) = replay(BatchScheduler.from_spec(spec), [(0.0, with_image, 2)])
    assert imaged[0] > text_only[0]


@pytest.mark.parametrize(
    ("url", "words"),
    [("https://example.com/cat.png", "data: URLs only"), ("data:image/png;base64,AAAA", "invalid")],
)
def test_unreadable_images_are_a_400_naming_why(url: str, words: str) -> None:
    body = _chat()
    body["messages"][0]["content"][1]["image_url"]["url"] = url
    answer = _run(_post(SimulatorApp(SimulateSpec(), latency=Recording()), body))
    assert answer.status_code == 400
    assert words in answer.json()["error"]["message"]
