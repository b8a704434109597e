"""Catalog entries: strict identifiers, units that must be positive, and the rules
between fields (a price needs its provenance, query heads group over KV heads)."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from scenarios.catalog import default_catalog
from scenarios.catalog.models import Hardware, KvDtype, Model, Quantization

GPU: dict[str, Any] = {
    "id": "test-gpu",
    "name": "Test GPU",
    "vendor": "Acme",
    "memory_gib": 80,
    "memory_type": "HBM3",
    "bandwidth_tb_s": 3.0,
    "bf16_tflops": 900,
    "interconnect": "PCIe 5",
}
LLAMA: dict[str, Any] = {
    "id": "tiny",
    "name": "Tiny",
    "params_billions": 1.0,
    "layers": 16,
    "hidden_size": 2048,
    "attention_heads": 32,
    "kv_heads": 8,
    "head_dim": 64,
    "context_tokens": 8192,
}


def test_a_price_needs_its_date_and_source() -> None:
    assert Hardware.model_validate(GPU).gpu_hour_usd is None  # not rented: fine
    with pytest.raises(ValidationError, match="price_date and price_source"):
        Hardware.model_validate({**GPU, "gpu_hour_usd": 2.5})
    with pytest.raises(ValidationError, match="price_date and price_source"):
        Hardware.model_validate({**GPU, "gpu_hour_usd": 2.5, "price_date": "2025-01-31"})
    priced = Hardware.model_validate(
        {**GPU, "gpu_hour_usd": 2.5, "price_date": "2025-01-31", "price_source": "a list price"}
    )
    assert priced.price_date is not None and priced.price_date.isoformat() == "2025-01-31"
    assert priced.max_devices == 8  # one node unless the entry says otherwise


def test_query_heads_must_group_evenly_over_kv_heads() -> None:
    assert Model.model_validate(LLAMA).kv_heads == 8
    with pytest.raises(
        ValidationError, match=r"attention_heads \(32\) must be a multiple of kv_heads \(6\)"
    ):
        Model.model_validate({**LLAMA, "kv_heads": 6})


@pytest.mark.parametrize(
    ("entry", "field", "value"),
    [
        (GPU, "memory_gib", 0),
        (GPU, "bandwidth_tb_s", -1.0),
        (GPU, "fp8_tflops", 0),
        (GPU, "max_devices", 0),
        (LLAMA, "layers", 0),
        (LLAMA, "id", "Upper-Case"),  # ids are lower case: typed on command lines
        (LLAMA, "id", "-leading"),
        (LLAMA, "name", ""),
        (LLAMA, "unknown", 1),
    ],
)
def test_out_of_range_values_are_refused(entry: dict[str, Any], field: str, value: Any) -> None:
    kind = Hardware if entry is GPU else Model
    with pytest.raises(ValidationError) as caught:
        kind.model_validate({**entry, field: value})
    assert caught.value.errors()[0]["loc"] == (field,)


def test_weight_formats_and_kv_dtypes() -> None:
    fp8 = Quantization.model_validate(
        {"id": "w8a8", "name": "FP8", "bits_per_weight": 8, "compute_dtype": "fp8"}
    )
    assert fp8.compute_dtype == "fp8"
    with pytest.raises(ValidationError):
        Quantization.model_validate(
            {"id": "q", "name": "Q", "bits_per_weight": 33, "compute_dtype": "bf16"}
        )
    with pytest.raises(ValidationError):
        Quantization.model_validate(
            {"id": "q", "name": "Q", "bits_per_weight": 4, "compute_dtype": "int4"}
        )
    assert (
        KvDtype.model_validate(
            {"id": "fp8", "name": "FP8", "bytes_per_element": 1}
        ).bytes_per_element
        == 1
    )


def test_entries_are_immutable_and_the_shipped_catalog_obeys_the_rules() -> None:
    catalog = default_catalog()
    h100 = catalog.get_hardware("h100")
    with pytest.raises(ValidationError):
        h100.gpu_hour_usd = 0.0  # type: ignore[misc]
    # Re-validating every shipped entry runs the cross-field rules again.
    sections = (catalog.hardware, catalog.models, catalog.quantization, catalog.kv_dtypes)
    for entries in sections:
        assert entries
        for entry in entries.values():
            assert type(entry).model_validate(entry.model_dump()) == entry
    rented = [h for h in catalog.hardware.values() if h.gpu_hour_usd is not None]
    assert rented and all(h.price_date and h.price_source for h in rented)
