"""Checkpoint storage: where a checkpoint lives and how it moves.

The torch-free checkpoint directory contract (`names`), the local store that writes `step-N`
atomically (`local`, the one module that imports torch, for its serializer), the S3 store with
manifests, verified restore and retention (`remote`, `checksums`, `s3client`), the background
uploader and the job lease, and each framework's checkpoints as one entry (`frameworks`). It imports
nothing from `trainer.agent` or `trainer.builtin`, and of `trainer.integrations` only the names both sides
of a framework agree on (`checkpoint_names`, which imports nothing).
"""
