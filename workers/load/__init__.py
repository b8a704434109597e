"""Load generation: the closed and open loops, arrival schedules, sessions, shard load shapes.

Kept import-free; import the modules themselves (``workers.load.shapes.build_load``).
"""
