"""Validation experiments against published figures (run by :mod:`rt_lidar.validation.report`)."""

from rt_lidar.validation.experiments import EXPERIMENTS, Experiment
from rt_lidar.validation.scenes import rain_test_scene

__all__ = ["EXPERIMENTS", "Experiment", "rain_test_scene"]
