"""Local files of the checkpoint folder: the `step-N` contract and the built-in store (`names`, `local`, the
one module that imports torch), a file opened only when it is a regular file of its own, a file proven whole
by its own format, checksums, files this disk already holds, and the private view kept for an upload.

Storage's ground floor: it imports nothing of storage but its vocabulary (`record_kinds`,
`failure_causes`, `upload_outcome`).
"""
