"""Chat messages with a request's images: OpenAI ``image_url`` content parts.

The one place a message's content becomes a list of parts: only requests that carry
images (``workload.images``) get them, and their other messages are left as they are.
"""

from __future__ import annotations

from typing import Any

from workers.prompts.images import RequestImages

__all__ = ["with_images"]


def with_images(
    messages: list[dict[str, Any]], images: RequestImages | None
) -> list[dict[str, Any]]:
    """``messages`` with ``images`` after the text of the last user message (text first,
    so that a repeated image never extends a prompt-cache prefix), as ``data:`` URLs with
    the workload's ``detail`` if it names one."""
    if images is None:
        return messages
    parts: list[dict[str, Any]] = []
    for image in images.images:
        url: dict[str, Any] = {"url": image.url}
        if images.detail is not None:
            url["detail"] = images.detail
        parts.append({"type": "image_url", "image_url": url})
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if message.get("role") == "user":
            text = message.get("content")
            content = [{"type": "text", "text": text}, *parts] if text else parts
            return [*messages[:index], {**message, "content": content}, *messages[index + 1 :]]
    return [*messages, {"role": "user", "content": parts}]
