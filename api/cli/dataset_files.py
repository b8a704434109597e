"""The local user's dataset files for ``workload.dataset``: a file, a directory of data
files, or a Hugging Face hub dataset, read as one blob to convert or upload.

Read on the user's own machine by ``tokenbench run`` and ``submit``, never by a server.
A directory (``Dataset.save_to_disk``, a downloaded hub repository) is read as its data
files (``.parquet``, ``.arrow``, ``.jsonl``, ``.json``, ``.csv``) in name order: JSON
lines are concatenated, tables joined into one Arrow stream, so the rows keep the files'
order. A hub name is resolved with ``huggingface_hub`` from the Hugging Face cache
(``HF_HOME``/``HF_HUB_CACHE``) and downloaded only when it is not cached and the hub is
reachable (never under ``HF_HUB_OFFLINE=1``), data files only, their total size checked
before anything is fetched. No loading script of a hub dataset is ever run: the
``datasets`` library is not used.
"""

from __future__ import annotations

import io
import os
from dataclasses import dataclass
from pathlib import Path

from scenarios.datasets.files import WorkloadFileError, read_bounded
from scenarios.datasets.spec import DatasetWorkload
from scenarios.settings import env_name

__all__ = ["HUB_INSTALL_HINT", "DatasetBlob", "hub_snapshot", "read_dataset_source"]

HUB_INSTALL_HINT = "pip install 'tokenbench[hub]' (the huggingface_hub library)"
DATA_SUFFIXES = (".parquet", ".arrow", ".jsonl", ".json", ".csv")
# Files of a saved dataset or hub repository that describe it rather than hold rows.
METADATA_FILES = frozenset(
    {"dataset_info.json", "dataset_infos.json", "state.json", "dataset_dict.json"}
)
# Seconds to wait for the hub before a download is given up.
HUB_TIMEOUT_S = 10.0


@dataclass(frozen=True, slots=True)
class DatasetBlob:
    """The bytes to convert, a file name hinting their format, and where they came from
    (a path, or ``hub:owner/name@commit``)."""

    data: bytes
    name: str
    origin: str


def read_dataset_source(spec: DatasetWorkload, max_bytes: int) -> DatasetBlob:
    """The bytes ``spec.path`` or ``spec.hub`` names (WorkloadFileError with the reason)."""
    if spec.hub is not None:
        root, commit = hub_snapshot(spec.hub, spec.revision, max_bytes)
        files = _data_files(root, spec.split)
        if not files:
            raise WorkloadFileError(
                f"hub dataset {spec.hub} has no data files"
                + (f" of split {spec.split!r}" if spec.split else "")
                + f" ({', '.join(DATA_SUFFIXES)})"
            )
        blob = _combined(files, max_bytes)
        return DatasetBlob(blob.data, blob.name, f"hub:{spec.hub}@{commit}")
    assert spec.path is not None
    path = Path(spec.path).expanduser()
    if path.is_dir():
        files = _data_files(path, None)
        if not files:
            raise WorkloadFileError(
                f"the directory holds no data files ({', '.join(DATA_SUFFIXES)})"
            )
        return _combined(files, max_bytes, spec.path)
    return DatasetBlob(read_bounded(path, max_bytes), path.name, spec.path)


def _data_files(root: Path, split: str | None) -> list[Path]:
    files = [
        p
        for p in sorted(root.rglob("*"))
        if p.suffix in DATA_SUFFIXES
        and p.name not in METADATA_FILES
        and not any(part.startswith(".") for part in p.relative_to(root).parts)
        and p.is_file()
    ]
    if split is not None:
        files = [p for p in files if split in p.relative_to(root).as_posix()]
    return files


def _combined(files: list[Path], max_bytes: int, origin: str | None = None) -> DatasetBlob:
    """One blob of several data files of one kind, rows in file order."""
    suffixes = {p.suffix for p in files}
    label = origin or str(files[0].parent)
    if len(files) == 1:
        only = files[0]
        return DatasetBlob(read_bounded(only, max_bytes), only.name, label)
    if suffixes <= {".parquet", ".arrow"}:
        return DatasetBlob(_arrow_stream(files, max_bytes), "combined.arrow", label)
    if suffixes == {".jsonl"}:
        parts, size = [], 0
        for file in files:
            data = read_bounded(file, max_bytes - size)
            size += len(data) + 1
            parts.append(data if data.endswith(b"\n") else data + b"\n")
        return DatasetBlob(b"".join(parts), "combined.jsonl", label)
    raise WorkloadFileError(
        f"{label}: {len(files)} data files of kinds {', '.join(sorted(suffixes))}: give one "
        "file, or a directory of Parquet/Arrow or of JSONL files"
    )


def _arrow_stream(files: list[Path], max_bytes: int) -> bytes:
    import pyarrow as pa  # noqa: PLC0415
    import pyarrow.parquet as pq  # noqa: PLC0415

    tables, size = [], 0
    for file in files:
        data = read_bounded(file, max_bytes - size)
        size += len(data)
        buffer = pa.BufferReader(data)
        if file.suffix == ".parquet":
            tables.append(pq.read_table(buffer))
        elif data[:6] == b"ARROW1":
            tables.append(pa.ipc.open_file(buffer).read_all())
        else:
            tables.append(pa.ipc.open_stream(buffer).read_all())
    try:
        table = pa.concat_tables(tables, promote_options="permissive")
    except pa.ArrowInvalid as exc:
        raise WorkloadFileError(f"the data files' columns do not match ({exc})") from None
    sink = io.BytesIO()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue()


def hub_snapshot(name: str, revision: str | None, max_bytes: int) -> tuple[Path, str]:
    """The local snapshot directory of hub dataset ``name`` (its data files) and its
    commit: from the Hugging Face cache, else downloaded when the hub is reachable and
    the data files are no larger than ``max_bytes`` together."""
    try:
        from huggingface_hub import HfApi, snapshot_download  # noqa: PLC0415 - optional extra
    except ImportError:
        raise WorkloadFileError(f"hub datasets need huggingface_hub: {HUB_INSTALL_HINT}") from None
    patterns = [f"*{suffix}" for suffix in DATA_SUFFIXES] + [
        f"**/*{suffix}" for suffix in DATA_SUFFIXES
    ]
    # Read now, not when huggingface_hub was imported: the environment of this call rules.
    cache_dir = os.environ.get("HF_HUB_CACHE") or None
    offline = os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in {"1", "true", "yes", "on"}
    try:
        cached = snapshot_download(
            name, repo_type="dataset", revision=revision, allow_patterns=patterns,
            local_files_only=True, cache_dir=cache_dir,
        )  # fmt: skip
        path = Path(str(cached))
        return path, path.name
    except Exception as exc:
        if offline:
            raise WorkloadFileError(
                f"hub dataset {name}: not in this machine's Hugging Face cache, and "
                f"HF_HUB_OFFLINE is set ({type(exc).__name__}); fetch it with "
                f"`huggingface-cli download --repo-type dataset {name}` where the hub is "
                "reachable, or give its files as workload.dataset.path"
            ) from None
    try:
        info = HfApi().dataset_info(
            name, revision=revision, files_metadata=True, timeout=HUB_TIMEOUT_S
        )
        files = [s for s in info.siblings or [] if s.rfilename.endswith(DATA_SUFFIXES)]
        size = sum(s.size or 0 for s in files)
        if size > max_bytes:
            raise WorkloadFileError(
                f"hub dataset {name}: its data files have {size} bytes, more than the "
                f"{max_bytes} allowed ({env_name('api.max_dataset_bytes')})"
            )
        downloaded = snapshot_download(
            name, repo_type="dataset", revision=info.sha or revision, allow_patterns=patterns,
            etag_timeout=HUB_TIMEOUT_S, cache_dir=cache_dir,
        )  # fmt: skip
    except WorkloadFileError:
        raise
    except Exception as exc:  # offline, unreachable, gated, unknown: say which
        raise WorkloadFileError(
            f"hub dataset {name}: not in this machine's Hugging Face cache and not "
            f"downloadable ({type(exc).__name__}: {str(exc)[:300]}); fetch it with "
            f"`huggingface-cli download --repo-type dataset {name}`, or give its files as "
            "workload.dataset.path"
        ) from None
    path = Path(str(downloaded))
    return path, path.name
