"""The shipped catalogs load and validate; a user file adds and overrides entries."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import pytest
from pydantic import BaseModel

from scenarios.catalog import (
    CatalogError,
    Hardware,
    KvDtype,
    Model,
    Quantization,
    UnknownIdError,
    default_catalog,
    load_catalog,
)
from tests.support.builders import NEW_MODEL


def test_shipped_catalogs_load() -> None:
    catalog = load_catalog()
    assert {"h100", "h200", "a100-80gb", "mi300x", "l40s", "rtx-4090", "m3-ultra"} <= set(
        catalog.hardware
    )
    assert {"llama-3.1-8b", "llama-3.1-70b", "llama-3.1-405b"} <= set(catalog.models)
    assert {
        "fp16",
        "bf16",
        "fp8",
        "int8",
        "q8_0",
        "q6_k",
        "q5_k_m",
        "q4_k_m",
        "iq4_xs",
        "q3_k_m",
        "int4-awq",
    } <= set(catalog.quantization)
    assert {"fp16", "fp8"} <= set(catalog.kv_dtypes)


def test_shipped_specs_match_the_published_datasheets() -> None:
    catalog = default_catalog()
    h100, h200 = catalog.get_hardware("h100"), catalog.get_hardware("h200")
    assert (h100.memory_gib, h100.bandwidth_tb_s, h100.bf16_tflops) == (80, 3.35, 989)
    assert (h200.memory_gib, h200.bandwidth_tb_s, h200.fp8_tflops) == (141, 4.8, 1979)
    assert catalog.get_hardware("a100-80gb").fp8_tflops is None
    llama = catalog.get_model("llama-3.1-405b")
    assert (llama.layers, llama.kv_heads, llama.head_dim, llama.hidden_size) == (
        126,
        8,
        128,
        16384,
    )
    bits = {q.id: q.bits_per_weight for q in catalog.quantization.values()}
    assert bits["q4_k_m"] == 4.85
    assert bits["q8_0"] == 8.5
    assert bits["int4-awq"] == 4.25


def test_every_priced_hardware_entry_has_a_dated_source() -> None:
    for hardware in default_catalog().hardware.values():
        if hardware.gpu_hour_usd is not None:
            assert isinstance(hardware.price_date, date)
            assert hardware.price_source


@pytest.mark.parametrize("entry", [Hardware, Model, Quantization, KvDtype])
def test_every_field_is_described_and_extra_keys_forbidden(entry: type[BaseModel]) -> None:
    assert entry.model_config.get("extra") == "forbid"
    for name, field in entry.model_fields.items():
        assert field.description, f"{entry.__name__}.{name} has no description"


def test_lookup_is_case_insensitive_and_lists_valid_ids() -> None:
    catalog = default_catalog()
    assert catalog.get_hardware("H100").id == "h100"
    with pytest.raises(UnknownIdError) as info:
        catalog.get_model("llama-9")
    assert "llama-3.1-405b" in str(info.value)
    assert info.value.valid == list(catalog.models)


def test_user_file_adds_a_model(tmp_path: Path) -> None:
    user = tmp_path / "catalog.yaml"
    user.write_text(NEW_MODEL, encoding="utf-8")
    catalog = load_catalog(user)
    assert catalog.get_model("qwen2.5-72b").params_billions == 72.7
    assert "llama-3.1-405b" in catalog.models  # shipped entries stay
    assert list(catalog.models)[-1] == "qwen2.5-72b"


def test_user_file_overrides_fields_of_a_shipped_entry(tmp_path: Path) -> None:
    user = tmp_path / "catalog.yaml"
    user.write_text(
        "hardware:\n"
        "  - id: h100\n"
        "    gpu_hour_usd: 2.1\n"
        "    price_date: 2026-01-05\n"
        "    price_source: our contract\n",
        encoding="utf-8",
    )
    h100 = load_catalog(user).get_hardware("h100")
    assert (h100.gpu_hour_usd, h100.price_source, h100.price_date) == (
        2.1,
        "our contract",
        date(2026, 1, 5),
    )
    assert h100.bandwidth_tb_s == 3.35  # untouched fields keep the shipped value


def test_a_new_price_needs_its_own_provenance(tmp_path: Path) -> None:
    user = tmp_path / "catalog.yaml"
    user.write_text("hardware:\n  - id: h100\n    gpu_hour_usd: 2.1\n", encoding="utf-8")
    with pytest.raises(CatalogError, match="price_date and price_source"):
        load_catalog(user)


def test_incomplete_new_entry_is_reported_by_path(tmp_path: Path) -> None:
    user = tmp_path / "catalog.yaml"
    user.write_text(
        "models:\n  - id: tiny\n    name: Tiny\n    layers: 2\n    colour: red\n",
        encoding="utf-8",
    )
    with pytest.raises(CatalogError) as info:
        load_catalog(user)
    message = str(info.value)
    assert str(user) in message
    assert "models.0.params_billions: Field required" in message
    assert "models.0.colour: Extra inputs are not permitted" in message


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("gpus: []\n", "unknown section"),
        ("models: {id: x}\n", "must be a list"),
        ("models:\n  - name: no id\n", "string 'id'"),
        (NEW_MODEL + NEW_MODEL.replace("models:\n", ""), "appears twice"),
        ("- 1\n", "is a mapping"),
        ("models: [\n", "not valid YAML"),
    ],
)
def test_malformed_user_files(tmp_path: Path, text: str, expected: str) -> None:
    user = tmp_path / "catalog.yaml"
    user.write_text(text, encoding="utf-8")
    with pytest.raises(CatalogError, match=expected):
        load_catalog(user)


def test_missing_user_file(tmp_path: Path) -> None:
    with pytest.raises(CatalogError, match="cannot read file"):
        load_catalog(tmp_path / "absent.yaml")


def test_model_rejects_kv_heads_that_do_not_divide_query_heads() -> None:
    with pytest.raises(ValueError, match="multiple of kv_heads"):
        Model(
            id="odd",
            name="Odd",
            params_billions=1,
            layers=1,
            hidden_size=64,
            attention_heads=6,
            kv_heads=4,
            head_dim=16,
            context_tokens=1024,
        )
