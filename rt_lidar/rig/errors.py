"""Errors of sensor rigs."""

from __future__ import annotations

from rt_lidar.errors import FieldError

__all__ = ["RigError"]


class RigError(FieldError):
    """A rig file is invalid: names the file, the sensor (when one is at fault) and the field."""

    def __init__(self, source: str, field: str, problem: str, sensor: str | None = None) -> None:
        super().__init__(source, field, problem)
        self.sensor = sensor
        where = f"sensor '{sensor}': " if sensor is not None else ""
        self.args = (f"{source}: {where}field '{field}': {problem}",)

    def __str__(self) -> str:
        return str(self.args[0])
