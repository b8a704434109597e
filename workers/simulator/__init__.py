"""The built-in simulated OpenAI-compatible endpoint and its pluggable latency models."""

from workers.simulator.batching import BatchingLatency, latency_for
from workers.simulator.latency import FixedLatency, LatencyModel
from workers.simulator.pool import SimulatorPool
from workers.simulator.process import run
from workers.simulator.server import SimulatorApp, start_server

__all__ = [
    "BatchingLatency",
    "FixedLatency",
    "LatencyModel",
    "SimulatorApp",
    "SimulatorPool",
    "latency_for",
    "run",
    "start_server",
]
