"""Load generation: arrival schedules, the open loop, shard load shapes.

Kept import-free; import the modules themselves (``workers.load.shapes.build_load``).
"""
