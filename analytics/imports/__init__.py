"""Other tools' result files, read into tokenbench's own shape (docs/import.md).

One module per tool (``aiperf``, ``guidellm``, ``vllm_bench``, ``inference_perf``,
``llmd``) turns the bytes of a result set into an ``ImportedRun`` (``model``); ``tools``
names them and recognises which one wrote a file; ``child`` parses in a child process of
bounded memory and time (untrusted files never parse in the control plane);
``analytics.store.imported_runs`` stores the result as a run of kind ``imported``.
"""
