"""Tokenizer files: a Hugging Face ``tokenizer.json`` read from bytes, shared by the
dataset store (which validates an upload) and the workers (which count with it).

The ``tokenizers`` library is an optional extra (``pip install tokenbench[tokenizer]``);
without it, naming a tokenizer fails with :class:`TokenizerUnavailable` saying how to
install it, and nothing else of tokenbench needs it. Files are parsed from bytes: the
only file access is :func:`local_tokenizer_file`, for the local user's own paths.
"""

from __future__ import annotations

from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

import orjson

from scenarios.errors import BadInput

if TYPE_CHECKING:
    from tokenizers import Tokenizer

__all__ = [
    "INSTALL_HINT",
    "TokenizerUnavailable",
    "local_tokenizer_file",
    "looks_like_tokenizer",
    "tokenizer_from_bytes",
    "tokenizers_module",
]

INSTALL_HINT = "pip install 'tokenbench[tokenizer]' (the tokenizers library)"


class TokenizerUnavailable(BadInput, ValueError):
    """A tokenizer that cannot be had: the library is missing, the file is not a
    tokenizer, or a hub name is neither cached nor downloadable."""


def tokenizers_module() -> ModuleType:
    """The ``tokenizers`` library, or TokenizerUnavailable saying how to install it."""
    try:
        import tokenizers  # noqa: PLC0415 - optional extra, imported when a tokenizer is named
    except ImportError:
        raise TokenizerUnavailable(
            f"the scenario names a tokenizer but the tokenizers library is not installed on "
            f"this machine: {INSTALL_HINT}"
        ) from None
    return tokenizers


def looks_like_tokenizer(data: bytes) -> bool:
    """Whether ``data`` is one JSON object shaped like a ``tokenizer.json`` (a ``model``
    object with a ``type`` or ``vocab``), as opposed to JSONL prompts."""
    stripped = data.lstrip()
    if not stripped.startswith(b"{"):
        return False
    try:
        document = orjson.loads(data)
    except orjson.JSONDecodeError:
        return False  # e.g. JSONL: several objects, one a line
    model = document.get("model") if isinstance(document, dict) else None
    return isinstance(model, dict) and ("type" in model or "vocab" in model)


def tokenizer_from_bytes(data: bytes, source: str) -> Tokenizer:
    """The tokenizer serialised in ``data`` (a ``tokenizer.json``); TokenizerUnavailable
    naming ``source`` when it is not one or the library is missing."""
    module = tokenizers_module()
    try:
        tokenizer: Tokenizer = module.Tokenizer.from_str(data.decode())
    except (UnicodeDecodeError, Exception) as exc:  # the Rust side raises plain Exception
        raise TokenizerUnavailable(f"{source}: not a tokenizer.json ({exc})") from None
    return tokenizer


def local_tokenizer_file(path: str | Path) -> Path:
    """The ``tokenizer.json`` a local path names: the file itself, or the one in the
    directory (a saved Hugging Face model or tokenizer directory)."""
    candidate = Path(path).expanduser()
    if candidate.is_dir():
        candidate = candidate / "tokenizer.json"
        if not candidate.is_file():
            raise TokenizerUnavailable(
                f"{path}: the directory holds no tokenizer.json (only fast tokenizers are "
                "read: save one with tokenizer.save_pretrained, or give the file)"
            )
    return candidate
