"""The `cluster` fixture: one local Ray cluster per module (see `local_cluster`)."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from local_cluster import LocalCluster


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalCluster]:
    # short: Ray's Unix socket paths under it must fit in 107 bytes
    temp = Path(tempfile.mkdtemp(prefix="oa-ray-", dir="/tmp"))
    c = LocalCluster(temp)
    try:
        c.start_head()
        c.start_node()
        yield c
    finally:
        c.stop()
        shutil.rmtree(temp, ignore_errors=True)


@pytest.fixture
def ray_cluster(cluster: LocalCluster) -> LocalCluster:
    cluster.ensure_node()
    return cluster
