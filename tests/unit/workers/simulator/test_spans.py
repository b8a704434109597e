"""The simulator's spans (workers/simulator/spans.py): vLLM's attributes from one
answer's times, unique stream ids of the placeholder's length, a bounded queue."""

from __future__ import annotations

import asyncio

import pytest
from pydantic import ValidationError

from scenarios.providers.simulate import SimulateSpec
from scenarios.wire import otlp
from workers.simulator import spans
from workers.simulator.spans import RequestTiming, SpanExporter


def test_a_finished_answer_becomes_a_vllm_span() -> None:
    async def run() -> SpanExporter:
        exporter = SpanExporter("http://127.0.0.1:9/v1/otlp/v1/traces", "t", "vllm-sim")
        timing = exporter.begin()
        assert spans.current_timing() is timing
        timing.arrival, timing.queued, timing.scheduled = 10.0, 10.0, 10.25
        timing.first_token, timing.last_token = 10.5, 12.0
        exporter.finish("chatcmpl-sim-0123456789abcdef", timing)
        assert spans.current_timing() is None
        await exporter.close()
        return exporter

    exporter = asyncio.run(run())
    (span,) = exporter.pending
    figures = otlp.server_span(
        otlp.decode_protobuf(otlp.encode_request(exporter.resource, [span]))[0]
    )
    assert figures == otlp.ServerSpan(
        "vllm-sim", "chatcmpl-sim-0123456789abcdef", None, span.trace_id.hex(), "llm_request",
        250_000_000, 500_000_000, 250_000_000, 1_500_000_000, 2_000_000_000,
    )  # fmt: skip
    assert exporter.headers["authorization"] == "Bearer t"


def test_no_token_no_first_token_no_span_and_the_queue_is_bounded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(spans, "MAX_PENDING", 1)

    async def run() -> SpanExporter:
        exporter = SpanExporter("http://127.0.0.1:9/", None, "s")
        exporter.finish("never-streamed", RequestTiming(1.0))
        for _ in range(3):
            timing = exporter.begin()
            timing.token()
            exporter.finish(spans.new_response_id(), timing)
        await exporter.close()
        return exporter

    exporter = asyncio.run(run())
    assert "authorization" not in exporter.headers
    assert (len(exporter.pending), exporter.dropped) == (1, 2)


def test_response_ids_are_unique_and_as_long_as_the_placeholder() -> None:
    ids = {spans.new_response_id() for _ in range(100)}
    assert len(ids) == 100
    assert {len(i) for i in ids} == {len(spans.RESPONSE_ID_PLACEHOLDER)}


def test_the_export_goes_to_loopback_with_a_tokenbench_otlp_variable_only() -> None:
    spec = SimulateSpec(
        otlp_traces_url="http://127.0.0.1:8080/v1/otlp/v1/traces",
        otlp_token_env="TOKENBENCH_OTLP_TOKEN",
        otlp_service_name="sim",
    )
    assert SpanExporter.from_spec(spec) is not None
    assert SpanExporter.from_spec(SimulateSpec()) is None
    for url in ("http://10.0.0.1/v1/traces", "http://127.0.0.1.evil.com/", "file:///etc/x"):
        with pytest.raises(ValidationError, match="otlp_traces_url"):
            SimulateSpec(otlp_traces_url=url)
    for name in ("OPENAI_API_KEY", "TOKENBENCH__API__TOKENS", "TOKENBENCH_OTLP_x"):
        with pytest.raises(ValidationError, match="otlp_token_env"):
            SimulateSpec(otlp_token_env=name)
