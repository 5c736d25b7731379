"""What a sensor is: presets, scan patterns, beams, materials, calibration tables."""
