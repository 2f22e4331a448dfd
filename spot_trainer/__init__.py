"""Spot Trainer on-instance runtime: resumable training, checkpoints and the agent."""

__version__ = "0.2.0"
