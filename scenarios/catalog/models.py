"""Catalog entries: accelerators, model architectures, weight formats and KV-cache dtypes.

These are data about the world (public specs, docs/roofline.md "Catalog data"), not
settings of a run, so they live in YAML next to this module and users extend them from
their own file. Units are part of every numeric field's name; decimal prefixes (TB/s,
TFLOP/s) except device memory, which vendors size in binary units (an H100's "80 GB" is
80 GiB).
"""

from __future__ import annotations

from datetime import date
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

ID_PATTERN = r"^[a-z0-9][a-z0-9_.-]{0,63}$"


class CatalogEntry(BaseModel):
    """Base of every entry: unknown keys are errors, entries are immutable."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(
        pattern=ID_PATTERN,
        description="Lower-case identifier used on the command line and in scenarios.",
    )
    name: str = Field(min_length=1, description="Human-readable name.")
    notes: str | None = Field(default=None, description="Caveats and sources, free text.")


class Hardware(CatalogEntry):
    """One accelerator (a GPU or an SoC with unified memory), as one tensor-parallel rank."""

    vendor: str = Field(min_length=1, description="Maker, e.g. NVIDIA, AMD, Apple.")
    memory_gib: float = Field(gt=0, description="Device memory in GiB (2**30 bytes).")
    memory_type: str = Field(min_length=1, description="Memory technology, e.g. HBM3.")
    bandwidth_tb_s: float = Field(gt=0, description="Peak memory bandwidth in TB/s (1e12 B/s).")
    bf16_tflops: float = Field(
        gt=0, description="Dense (no sparsity) BF16/FP16 tensor throughput in TFLOP/s."
    )
    fp8_tflops: float | None = Field(
        default=None,
        gt=0,
        description="Dense FP8 tensor throughput in TFLOP/s; null when there are no FP8 units.",
    )
    interconnect: str = Field(min_length=1, description="Device-to-device link, e.g. NVLink 4.")
    interconnect_gb_s: float | None = Field(
        default=None, gt=0, description="Per-device interconnect bandwidth in GB/s, if known."
    )
    max_devices: int = Field(
        default=8,
        ge=1,
        description="Most devices one tensor-parallel group can span (one node or box).",
    )
    gpu_hour_usd: float | None = Field(
        default=None,
        ge=0,
        description="Default rental price per device-hour in USD; null when not rented.",
    )
    price_date: date | None = Field(
        default=None, description="When gpu_hour_usd was observed (YYYY-MM-DD)."
    )
    price_source: str | None = Field(
        default=None, description="Where gpu_hour_usd comes from; prices vary by market."
    )

    @model_validator(mode="after")
    def _priced_with_provenance(self) -> Hardware:
        # A price without a date and source cannot be judged for staleness.
        if self.gpu_hour_usd is not None and (self.price_date is None or not self.price_source):
            raise ValueError("gpu_hour_usd needs price_date and price_source")
        return self


class Model(CatalogEntry):
    """A decoder-only transformer, described by what decides its memory and FLOPs."""

    params_billions: float = Field(gt=0, description="Parameter count in billions.")
    layers: int = Field(ge=1, description="Number of transformer layers.")
    hidden_size: int = Field(ge=1, description="Model (residual stream) width.")
    attention_heads: int = Field(ge=1, description="Query heads per layer.")
    kv_heads: int = Field(ge=1, description="Key/value heads per layer (GQA groups).")
    head_dim: int = Field(ge=1, description="Width of one attention head.")
    context_tokens: int = Field(ge=1, description="Longest supported context in tokens.")
    tokenizer: str | None = Field(
        default=None,
        description=(
            "Hugging Face repository whose tokenizer.json the model uses: give it as "
            "workload.tokenizer for exact prompt lengths (docs/lengths.md)."
        ),
    )

    @model_validator(mode="after")
    def _grouped_heads(self) -> Model:
        # Grouped-query attention shares each KV head among a whole number of query heads.
        if self.attention_heads % self.kv_heads:
            raise ValueError(
                f"attention_heads ({self.attention_heads}) must be a multiple of "
                f"kv_heads ({self.kv_heads})"
            )
        return self


class Quantization(CatalogEntry):
    """A weight format: how many bits each weight takes and which math units run it."""

    bits_per_weight: float = Field(
        gt=0, le=32, description="Average stored bits per weight, scales included."
    )
    compute_dtype: Literal["bf16", "fp8"] = Field(
        description=(
            "Tensor-core rate the matrix multiplies run at: fp8 for W8A8 FP8; bf16 for "
            "16-bit and weight-only formats, which dequantise to 16 bits before the matmul. "
            "Hardware without FP8 units falls back to bf16."
        )
    )


class KvDtype(CatalogEntry):
    """Element type of the KV cache."""

    bytes_per_element: float = Field(gt=0, description="Bytes per stored key/value element.")
