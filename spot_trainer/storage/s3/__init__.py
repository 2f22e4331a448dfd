"""The job's objects in S3: the client and transfer settings, conditional writes, keys and their names,
the job's small JSON objects and records, and the single-writer lease.

It may import the `files` wing and storage's vocabulary.
"""
