"""Collect real trajectories and train the default tiny world model (one command: `make train`)."""
