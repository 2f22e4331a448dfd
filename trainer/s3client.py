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
        # Skip opportunistic CRC trailers: per-file SHA-256 in the manifest is the integrity check.
        request_checksum_calculation="when_required",
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
