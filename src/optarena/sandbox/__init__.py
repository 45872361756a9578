"""Process isolation for untrusted code: sessions, rlimits, timeouts, process-tree cleanup."""

from optarena.sandbox._process import ResourceLimits, kill_tree, spawn

__all__ = ["ResourceLimits", "kill_tree", "spawn"]
