"""The harness-improvement loop's parts: a versioned registry of built artifacts, their
qualification in a clean replay workspace (every declared command contained), quarantine by
content hash, and export of the qualified ones as an experiment condition's artifacts."""

from optarena.harness._activate import export_artifacts
from optarena.harness._qualify import Qualification, qualify
from optarena.harness._registry import (
    ArtifactEntry,
    Registry,
    content_sha256,
    load_registry,
    save_registry,
)
from optarena.harness._scan import scan_area

__all__ = [
    "ArtifactEntry",
    "Qualification",
    "Registry",
    "content_sha256",
    "export_artifacts",
    "load_registry",
    "qualify",
    "save_registry",
    "scan_area",
]
