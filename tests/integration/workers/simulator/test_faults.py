"""`tokenbench simulate --fault ...` over HTTP: a 429 burst with its Retry-After, a reset
connection, an offset burst, and the request log that says what was received (the id
from the header or the body's user field, the prompt hash) and how it was answered."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from api.local.redis_server import free_port
from workers.client.request_ids import REQUEST_ID_HEADER, prompt_hash

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[4]
CHAT = {"model": "simulated", "max_tokens": 3, "stream": True}


class Endpoint:
    def __init__(self, args: list[str], log: Path) -> None:
        self.port = free_port()
        with log.open("wb") as out:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "api", "simulate", "--port", str(self.port),
                 "--ttft-ms", "1", "--itl-ms", "1", *args],
                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=REPO,
            )  # fmt: skip
        self.base = f"http://127.0.0.1:{self.port}"
        deadline = time.monotonic() + 30
        while True:
            try:
                if httpx.get(f"{self.base}/health", timeout=0.5).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert self.process.poll() is None, log.read_text()
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.05)

    def chat(self, text: str, **extra: Any) -> httpx.Response:
        headers = extra.pop("headers", {})
        body = {**CHAT, "messages": [{"role": "user", "content": text}], **extra}
        return httpx.post(
            f"{self.base}/v1/chat/completions", content=orjson.dumps(body), headers=headers
        )

    def log(self, after: int = 0) -> dict[str, Any]:
        return dict(httpx.get(f"{self.base}/tokenbench/requests", params={"after": after}).json())

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(10)


@pytest.fixture
def start(tmp_path: Path) -> Iterator[Any]:
    started: list[Endpoint] = []

    def run(*args: str) -> Endpoint:
        endpoint = Endpoint(list(args), tmp_path / f"sim-{len(started)}.log")
        started.append(endpoint)
        return endpoint

    yield run
    for endpoint in started:
        endpoint.stop()


def test_a_429_burst_and_the_log_of_what_was_received(start: Any) -> None:
    # The first half hour after the first request is a burst: every request gets a 429.
    endpoint = start("--fault", "http_429:every_s=3600,for_s=1800,retry_after_s=2.5")
    tagged = endpoint.chat("one", headers={REQUEST_ID_HEADER: "tokenbench.s0.p.r.1.0"})
    assert tagged.status_code == 429
    assert tagged.headers["retry-after"] == "3"
    assert endpoint.chat("two", user="tokenbench.s0.p.r.1.1").status_code == 429
    assert endpoint.chat("three", user="alice").status_code == 429

    page = endpoint.log()
    assert [(e["request_id"], e["status"], e["outcome"]) for e in page["entries"]] == [
        ("tokenbench.s0.p.r.1.0", 429, "http_429"),
        ("tokenbench.s0.p.r.1.1", 429, "http_429"),
        (None, 429, "http_429"),  # a user field that is not a request id is not one
    ]
    assert page["entries"][2]["prompt_hash"] == prompt_hash([("user", "three")])
    assert page["started_at_ns"] == page["entries"][0]["received_at_ns"]
    assert [e["seq"] for e in endpoint.log(after=2)["entries"]] == [3]


def test_an_offset_burst_and_a_reset(start: Any) -> None:
    late = start("--fault", "http_5xx:every_s=3600,for_s=60,offset_s=1800,status=502")
    answer = late.chat("fine")
    assert answer.status_code == 200 and b"[DONE]" in answer.content
    assert late.log()["entries"][0]["outcome"] == "ok"

    reset = start("--fault", "reset:rate=1", "--request-log", "1")
    for text in ("a", "b"):
        with pytest.raises(httpx.RemoteProtocolError):
            reset.chat(text)
    page = reset.log()
    assert [(e["seq"], e["status"], e["outcome"]) for e in page["entries"]] == [(2, 0, "reset")]
    assert page["oldest"] == 2  # the first entry was dropped: a reader from 0 missed one


def test_bad_fault_options_exit_2_naming_the_fault(tmp_path: Path) -> None:
    for fault, words in (
        ("http_429:every_s=1,for_s=2", "--fault 1: burst: for_s 2 is longer than every_s 1"),
        ("stall:rate=0.5", "--fault 1: stall_ms: Field required"),
        ("http_5xx:rate", "is not key=value"),
    ):
        done = subprocess.run(
            [sys.executable, "-m", "api", "simulate", "--port", "0", "--fault", fault],
            capture_output=True, text=True, cwd=REPO, timeout=60, check=False,
        )  # fmt: skip
        assert done.returncode == 2, done.stderr
        assert words in done.stderr and "Traceback" not in done.stderr
