"""The local user's own workload files, turned into datasets before a run.

``tokenbench run`` and ``tokenbench submit`` run on the user's machine, which may read
the files its scenario names (``workload.prompts.path``, ``workload.replay.path``,
``workload.tokenizer.path``: a tokenizer.json or a directory holding one;
``workload.dataset.path`` or ``.hub``: ``api/cli/dataset_files.py``; relative to the
current directory). Each is read as a regular file of bounded size
(``read_bounded``: never a FIFO, device or directory) and replaced by a reference to a
dataset: stored in the local DuckDB file by ``run`` (:func:`store_local_datasets`),
uploaded with ``POST /v1/datasets`` by ``submit``. A run then takes the same path as
in a deployment: workers get the bytes through Redis, never from a file.
"""

from __future__ import annotations

from collections.abc import Callable

from analytics.datasets.uploads import DatasetStore, dataset_problems
from api.cli.dataset_files import DatasetBlob, read_dataset_source
from scenarios.datasets.files import WorkloadFileError, read_bounded
from scenarios.datasets.formats import Conversion
from scenarios.datasets.spec import DatasetWorkload
from scenarios.loader import Problem, ScenarioError
from scenarios.model import Scenario
from scenarios.settings import ApiSettings
from scenarios.tokenizers.files import TokenizerUnavailable, local_tokenizer_file

__all__ = [
    "Upload",
    "local_files",
    "read_local",
    "store_local_datasets",
    "upload_local_datasets",
    "with_datasets",
]


def local_files(scenario: Scenario) -> dict[str, str]:
    """``{use: path}`` of the local files the scenario names (use: prompts, replay,
    tokenizer)."""
    workload = scenario.workload
    refs = {"prompts": workload.prompts, "replay": workload.replay, "tokenizer": workload.tokenizer}
    return {use: ref.path for use, ref in refs.items() if ref is not None and ref.path}


def read_local(use: str, path: str, limits: ApiSettings, source: str | None = None) -> bytes:
    """The bytes of a local workload file (a tokenizer directory's tokenizer.json);
    ScenarioError at ``workload.<use>.path``."""
    try:
        name = str(local_tokenizer_file(path)) if use == "tokenizer" else path
        return read_bounded(name, limits.max_dataset_bytes)
    except (WorkloadFileError, TokenizerUnavailable) as exc:
        raise ScenarioError([Problem(f"workload.{use}.path", str(exc))], source) from None


def with_datasets(scenario: Scenario, dataset_ids: dict[str, str]) -> Scenario:
    """The scenario with the workload's ``use`` references pointing at dataset ids (a
    converted ``workload.dataset`` loses the conversion's fields: the dataset is the
    converted file)."""
    if not dataset_ids:
        return scenario
    workload = scenario.workload
    update = {}
    for use, dataset_id in dataset_ids.items():
        ref = getattr(workload, use)
        fields: dict[str, object] = {"path": None, "dataset": dataset_id}
        if use == "dataset":
            fields |= {"hub": None, "revision": None, "split": None, "format": "auto"}
            fields["columns"] = None
        update[use] = ref.model_copy(update=fields)
    return scenario.model_copy(update={"workload": workload.model_copy(update=update)})


def _dataset_field(spec: DatasetWorkload) -> str:
    return "workload.dataset.hub" if spec.hub is not None else "workload.dataset.path"


def _conversion(spec: DatasetWorkload) -> Conversion:
    return Conversion.of(spec.format, None if spec.columns is None else spec.columns.mapping())


def _dataset_blob(spec: DatasetWorkload, limits: ApiSettings, source: str | None) -> DatasetBlob:
    try:
        return read_dataset_source(spec, limits.max_dataset_bytes)
    except WorkloadFileError as exc:
        raise ScenarioError([Problem(_dataset_field(spec), str(exc))], source) from None


def store_local_datasets(
    scenario: Scenario, store: DatasetStore, limits: ApiSettings, source: str | None = None
) -> Scenario:
    """``tokenbench run``: store the scenario's local files as datasets in the local
    DuckDB file and point the scenario at them (ScenarioError naming file and line)."""
    ids = {}
    for use, path in local_files(scenario).items():
        data = read_local(use, path, limits, source)
        try:
            info, _ = store.add(data, limits.max_dataset_lines, path)
        except WorkloadFileError as exc:
            raise ScenarioError([Problem(f"workload.{use}.path", str(exc))], source) from None
        if use not in info.kinds:
            message = (
                f"{path} cannot be replayed (every line needs timestamp and max_tokens): "
                f"{info.replay_problem}"
                if use == "replay" and "prompts" in info.kinds
                else f"{path} is not usable as {use} (it is: {', '.join(info.kinds)})"
            )
            raise ScenarioError([Problem(f"workload.{use}.path", message)], source)
        ids[use] = info.dataset_id
    spec = scenario.workload.dataset
    if spec is not None and spec.dataset is None:
        blob = _dataset_blob(spec, limits, source)
        where = _dataset_field(spec)
        try:
            info, _ = store.add(
                blob.data,
                limits.max_dataset_lines,
                blob.name,
                _conversion(spec),
                limits.max_dataset_bytes,
                blob.origin,
            )
        except WorkloadFileError as exc:
            raise ScenarioError([Problem(where, f"{blob.origin}: {exc}")], source) from None
        problems = dataset_problems(scenario.workload, info, where)
        if problems:
            raise ScenarioError(problems, source)
        ids["dataset"] = info.dataset_id
    return with_datasets(scenario, ids)


# upload(use, file name, bytes, conversion, origin) -> dataset id
Upload = Callable[[str, str, bytes, Conversion | None, str | None], str]


def upload_local_datasets(
    scenario: Scenario,
    upload: Upload,
    limits: ApiSettings,
    source: str | None = None,
) -> Scenario:
    """``tokenbench submit``: upload each local file (``workload.dataset``'s with its
    conversion, which the control plane applies), then point the scenario at the
    uploaded datasets."""
    ids = {
        use: upload(use, path, read_local(use, path, limits, source), None, None)
        for use, path in local_files(scenario).items()
    }
    spec = scenario.workload.dataset
    if spec is not None and spec.dataset is None:
        blob = _dataset_blob(spec, limits, source)
        ids["dataset"] = upload("dataset", blob.name, blob.data, _conversion(spec), blob.origin)
    return with_datasets(scenario, ids)
