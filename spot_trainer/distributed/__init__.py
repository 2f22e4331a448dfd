"""Several nodes training as one: torchrun elastic with its rendezvous in the job's S3 prefix.

Owns the S3 rendezvous backend and store (no node hosts anything that outlives a round), their
registration with torchrun, and the launcher the agent runs on each node. It may import torch and
`storage` (the S3 client and the conditional-write helpers); never the agent or the built-in trainer.
"""
