"""Validation experiments of the sensor model against published figures (see :mod:`rt_lidar.validate`)."""

from rt_lidar.validation.experiments import EXPERIMENTS, Experiment
from rt_lidar.validation.scenes import rain_test_scene

__all__ = ["EXPERIMENTS", "Experiment", "rain_test_scene"]
