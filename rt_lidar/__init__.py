"""rt-lidar: a real-time, realistic LiDAR simulator (see DESIGN.md)."""
