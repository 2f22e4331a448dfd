"""Checkpoint storage: where a checkpoint lives and how it moves.

The torch-free checkpoint directory contract (`names`), the local store that writes `step-N`
atomically (`local`, the one module that imports torch, for its serializer), the S3 store with
manifests, verified restore and retention (`remote`, `checksums`, `s3client`), the background
uploader and the job lease. It imports nothing from `trainer.agent` or `trainer.builtin`.
"""
