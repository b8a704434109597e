"""Fake provider servers: real HTTP servers on loopback replaying recorded wire formats."""
