"""Load generation: arrival schedules, the open loop, workload files, shard load shapes.

Kept import-free so that ``workers.prompts`` can use ``workers.load.files`` without a
cycle; import the modules themselves (``workers.load.shapes.build_load``).
"""
