"""Whole runs: the demo and the live controller run, their configuration, real-time process settings."""
