"""Image content parts: after the text of the last user message, as data: URLs with the
detail asked for; requests without images keep their messages as they were."""

from __future__ import annotations

import orjson

from scenarios.workload.spec import Workload
from workers.client.adapters.openai_chat import chat_body
from workers.client.image_parts import with_images
from workers.prompts.images import GeneratedImage, RequestImages
from workers.prompts.plan import PlannedRequest, request_planner

IMAGE = GeneratedImage("data:image/png;base64,AAAA", 4, 2, 3, "d" * 64)


def test_images_follow_the_text_of_the_last_user_message() -> None:
    messages = [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "first"},
        {"role": "assistant", "content": "ok"},
        {"role": "user", "content": "look at these"},
    ]
    sent = with_images(messages, RequestImages((IMAGE, IMAGE), "low"))
    assert sent[:3] == messages[:3]
    assert sent[3]["content"] == [
        {"type": "text", "text": "look at these"},
        {"type": "image_url", "image_url": {"url": IMAGE.url, "detail": "low"}},
        {"type": "image_url", "image_url": {"url": IMAGE.url, "detail": "low"}},
    ]
    assert messages[3]["content"] == "look at these"  # not changed in place


def test_without_detail_none_is_sent_and_without_images_nothing_changes() -> None:
    messages = [{"role": "user", "content": "x"}]
    assert with_images(messages, None) is messages
    (part,) = with_images(messages, RequestImages((IMAGE,)))[0]["content"][1:]
    assert part == {"type": "image_url", "image_url": {"url": IMAGE.url}}
    only = with_images([{"role": "system", "content": "s"}], RequestImages((IMAGE,)))
    assert only[1] == {"role": "user", "content": [part]}


def test_the_chat_body_carries_the_planned_images() -> None:
    workload = Workload.model_validate(
        {
            "mix": [
                {
                    "prompt_tokens": {"dist": "fixed", "value": 3},
                    "output_tokens": {"dist": "fixed", "value": 2},
                }
            ],
            "images": {"width": 8, "height": 8, "format": "jpeg", "detail": "high"},
        }
    )
    request: PlannedRequest = request_planner(workload, 2, 0)(5)
    assert request.images is not None
    body = orjson.loads(chat_body("m", request))
    (message,) = body["messages"]
    text, image = message["content"]
    assert text == {"type": "text", "text": request.prompt}
    assert image["image_url"]["url"] == request.images.images[0].url
    assert image["image_url"]["url"].startswith("data:image/jpeg;base64,")
    assert image["image_url"]["detail"] == "high"
