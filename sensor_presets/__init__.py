"""Sensor presets: one TOML file per real sensor, read with ``rt_lidar.presets.load_preset``.

A data package only; the beam tables are written by ``tools/import_calibrations.py``.
"""
