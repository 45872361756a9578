"""Processes as /proc shows them: the one reader of `/proc/PID/stat` (parent, state, start
time), the process table, a tree's descendants (with start times, so that a pid reused by
another process is never signalled), and ending whole trees, children that left the group
included. Imports nothing of optarena: every package may use it (isolation itself is
`optarena.sandbox`)."""

from optarena.processes._tree import (
    HeldNamespace,
    ProcInfo,
    all_pids,
    children_of,
    continue_all,
    descendants,
    describe,
    is_zombie,
    kill_tree,
    namespace_of,
    parse_stat,
    pids_in_namespace,
    pids_of_uid,
    process_table,
    real_uid,
    signal_all,
    signal_same,
    start_ticks,
    stat_of,
    stop_all,
    stop_then_kill,
    wait_dead,
)

__all__ = [
    "HeldNamespace",
    "ProcInfo",
    "all_pids",
    "children_of",
    "continue_all",
    "descendants",
    "describe",
    "is_zombie",
    "kill_tree",
    "namespace_of",
    "parse_stat",
    "pids_in_namespace",
    "pids_of_uid",
    "process_table",
    "real_uid",
    "signal_all",
    "signal_same",
    "start_ticks",
    "stat_of",
    "stop_all",
    "stop_then_kill",
    "wait_dead",
]
