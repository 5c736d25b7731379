"""rt-lidar: a real-time, realistic LiDAR simulator (see docs/architecture.md)."""
