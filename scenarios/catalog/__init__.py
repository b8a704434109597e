"""Catalogs of hardware, model architectures, weight formats and KV-cache dtypes.

Shipped as package data (``*.yaml`` next to this file) and extensible from a user file;
see ``loader`` for the file layout and override rules.
"""

from scenarios.catalog.loader import (
    Catalog,
    CatalogError,
    UnknownIdError,
    default_catalog,
    load_catalog,
)
from scenarios.catalog.models import CatalogEntry, Hardware, KvDtype, Model, Quantization

__all__ = [
    "Catalog",
    "CatalogEntry",
    "CatalogError",
    "Hardware",
    "KvDtype",
    "Model",
    "Quantization",
    "UnknownIdError",
    "default_catalog",
    "load_catalog",
]
