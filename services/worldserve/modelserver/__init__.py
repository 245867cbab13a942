"""The model server: a real Triton Inference Server (PyTriton) in front of a generation engine."""
