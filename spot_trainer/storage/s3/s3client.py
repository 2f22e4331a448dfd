"""One place that builds the S3 client and the transfer settings the trainer uses.

The endpoint comes from `AWS_ENDPOINT_URL` (boto3 honours it natively; read here too so a caller can
pass it explicitly), retries use botocore's adaptive mode (backoff plus client-side rate limiting on
throttles such as 503 SlowDown), and the connection pool is sized for the transfer concurrency so
parallel part uploads never wait for a socket.
"""

from __future__ import annotations

import os
from typing import Any

import boto3
from boto3.s3.transfer import TransferConfig
from botocore.config import Config

MB = 1024 * 1024

# Tuned with benchmarks/p2_transfer.py. Fewer, larger requests win: every request costs the server a
# fixed amount of work (S3-compatible servers such as moto even re-read the whole object for each
# ranged GET), so parts are sized to fill the concurrency in one wave, within these bounds.
DEFAULT_CHUNK_BYTES = 64 * MB
MAX_CHUNK_BYTES = 256 * MB  # a failed part is retried whole: keep that bounded
DEFAULT_CONCURRENCY = 8


def transfer_config(
    *, chunk_bytes: int = DEFAULT_CHUNK_BYTES, concurrency: int = DEFAULT_CONCURRENCY
) -> TransferConfig:
    """Multipart above one chunk, `concurrency` parts in flight, threads on."""
    return TransferConfig(
        multipart_threshold=chunk_bytes,
        multipart_chunksize=chunk_bytes,
        max_concurrency=concurrency,
        use_threads=True,
    )


def transfer_config_for(total_bytes: int, *, concurrency: int = DEFAULT_CONCURRENCY) -> TransferConfig:
    """Parts of ceil(total / concurrency), clamped to [64 MiB, 256 MiB]: one wave fills every thread."""
    wave = -(-max(total_bytes, 1) // concurrency)
    chunk = min(MAX_CHUNK_BYTES, max(DEFAULT_CHUNK_BYTES, wave))
    return transfer_config(chunk_bytes=chunk, concurrency=concurrency)


UPLOAD_CHUNK_BYTES = 8 * MB
BIG_UPLOAD_CHUNK_BYTES = 128 * MB
UPLOAD_CONCURRENCY = 10
MAX_PARTS = 9_000  # S3 allows 10,000 parts per object; keep a margin
# Parts per upload thread before parts grow: 8 MiB parts up to 1.25 GiB, then growing to 128 MiB from 20 GiB.
PARTS_PER_THREAD = 16


def upload_config_for(largest_file_bytes: int) -> TransferConfig:
    """Uploads are the opposite case: many small parts keep every thread and the server busy
    (1 GiB to a local S3: 131 MB/s with 8 MiB parts, 76 MB/s with 128 MiB parts). Past
    PARTS_PER_THREAD parts a thread, parts grow up to 128 MiB: an 840 GB save on 64 nodes (13 GB a node,
    83 MiB parts) then goes up in about 10,000 PUTs rather than 100,000, under S3's 3,500 PUT/s per prefix;
    the largest file stays within S3's part-count limit."""
    size = max(largest_file_bytes, 1)
    grown = min(BIG_UPLOAD_CHUNK_BYTES, -(-size // (UPLOAD_CONCURRENCY * PARTS_PER_THREAD)))
    chunk = max(UPLOAD_CHUNK_BYTES, grown, -(-size // MAX_PARTS))
    return transfer_config(chunk_bytes=chunk, concurrency=UPLOAD_CONCURRENCY)


def client_config(
    *,
    max_attempts: int = 8,
    connect_timeout: float = 5.0,
    read_timeout: float = 60.0,
    pool_connections: int = DEFAULT_CONCURRENCY * 2,
) -> Config:
    """botocore settings: adaptive retries, bounded timeouts, a pool wider than the transfer threads."""
    return Config(
        retries={"mode": "adaptive", "max_attempts": max_attempts},
        connect_timeout=connect_timeout,
        read_timeout=read_timeout,
        max_pool_connections=pool_connections,
        # Uploads keep botocore's default CRC trailer: turning it off makes botocore fall back to a
        # slower per-part checksum (1 GiB to a local S3: 124 MB/s with the default, 77 MB/s without).
        # Downloads skip response CRCs: the manifest's block SHA-256 is the integrity check.
        response_checksum_validation="when_required",
    )


def s3_client(
    *,
    region: str | None = None,
    endpoint_url: str | None = None,
    session: boto3.session.Session | None = None,
    **config: Any,
) -> Any:
    """An S3 client for the trainer; `config` goes to `client_config`."""
    session = session or boto3.session.Session()
    return session.client(
        "s3",
        region_name=region or os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION"),
        endpoint_url=endpoint_url or os.environ.get("AWS_ENDPOINT_URL") or None,
        config=client_config(**config),
    )
