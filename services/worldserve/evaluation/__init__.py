"""Fidelity evaluation: AgentWorldBench-format samples through the platform, scored."""
