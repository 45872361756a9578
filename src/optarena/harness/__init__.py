"""The harness-improvement loop (`run_harness`) and its parts: a versioned registry of built
artifacts, their vetting in a clean replay workspace (every declared command contained),
quarantine by content hash, activation for the next fresh session (skills as files, MCP
servers behind recording relays), and export of the qualified ones as an experiment
condition's artifacts."""

from optarena.harness._activate import export_artifacts
from optarena.harness._hook import HarnessHook
from optarena.harness._loop import HarnessConfig, run_harness
from optarena.harness._prompts import BUILD_MARKER, REFLECT_MARKER, REPAIR_MARKER
from optarena.harness._record import HarnessRun, IterationRecord, PhaseRecord, load_run
from optarena.harness._registry import ArtifactEntry, Registry, load_registry, save_registry
from optarena.harness._relay import ServerHost, read_telemetry
from optarena.harness._scan import scan_area
from optarena.harness._vet import Vetting, vet

__all__ = [
    "BUILD_MARKER",
    "REFLECT_MARKER",
    "REPAIR_MARKER",
    "ArtifactEntry",
    "HarnessConfig",
    "HarnessHook",
    "HarnessRun",
    "IterationRecord",
    "PhaseRecord",
    "Registry",
    "ServerHost",
    "Vetting",
    "export_artifacts",
    "load_registry",
    "load_run",
    "read_telemetry",
    "run_harness",
    "save_registry",
    "scan_area",
    "vet",
]
