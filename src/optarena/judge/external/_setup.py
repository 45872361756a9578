"""A set-up's result, kept and reused when its inputs are the same (`[setup] cache = true`).

Every judgement runs set-up in two fresh clones, and every round of an experiment does it
again, though the baseline's tree is the same each time (a `pip install` into the worktree
took 22 of a judgement's 36 s). With `cache = true`, what set-up changed in the tree (new and
changed entries, removed paths) is kept under optarena's cache, keyed by everything set-up
could read that optarena knows of: the command, the spec's variables, the declared
environment's hash and the digest of every entry of the tree before set-up (`.git` aside).
The same key later puts the kept result in place instead of running the command; the tree is
then checked against the digests the real set-up left, and set-up runs after all if they
differ. The cache is written by the judge, never by a command, so a candidate's set-up can
only ever be reused for the very same tree. Opt-in, because a set-up may write the worktree's
own path into its output (an editable install's `.pth`), which a later clone does not share.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path

from optarena.files import copy_entry, remove_tree
from optarena.judge.external._tree import entry_digest, tree_digests

_MANIFEST = "manifest.json"


def _cache_root() -> Path:
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "optarena" / "external-setup"


def _outside_git(digests: dict[str, str]) -> dict[str, str]:
    return {p: d for p, d in digests.items() if p != ".git" and not p.startswith(".git/")}


def setup_key(
    command: str, env: dict[str, str], environment: str | None, before: dict[str, str]
) -> str:
    """Everything the set-up could read that optarena knows of, as one hash."""
    data = {"command": command, "env": env, "environment": environment,
            "tree": _outside_git(before)}  # fmt: skip
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        remove_tree(path)
    elif path.exists() or path.is_symlink():
        path.unlink()


def store(key: str, tree: Path, before: dict[str, str]) -> None:
    """Keep what set-up changed in `tree` (relative to `before`) under `key`."""
    after = _outside_git(tree_digests(tree))
    if any(d.startswith(("special:", "unreadable:")) for d in after.values()):
        return  # a FIFO or a path past PATH_MAX: not something to keep
    was = _outside_git(before)
    changed = sorted(p for p, d in after.items() if was.get(p) != d)
    removed = sorted(p for p in was if p not in after)
    root = _cache_root()
    root.mkdir(parents=True, exist_ok=True, mode=0o700)
    dest = root / key
    if dest.exists():
        return
    tmp = Path(tempfile.mkdtemp(prefix=".setup-", dir=root))
    try:
        for rel in changed:
            src, out = tree / rel, tmp / "files" / rel
            out.parent.mkdir(parents=True, exist_ok=True)
            if after[rel].startswith("dir:"):
                out.mkdir(exist_ok=True)
            else:
                copy_entry(src, out)
        manifest = {"changed": changed, "removed": removed, "after": after}
        (tmp / _MANIFEST).write_text(json.dumps(manifest))
        os.rename(tmp, dest)
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)


def restore(key: str, tree: Path) -> bool:
    """Put the kept result of set-up `key` into `tree`. False, with the tree untouched, when
    there is none or a kept entry is not what the real set-up left (then set-up runs)."""
    kept = _cache_root() / key
    try:
        manifest = json.loads((kept / _MANIFEST).read_text())
        after: dict[str, str] = manifest["after"]
        for rel in manifest["changed"]:
            if (
                not after[rel].startswith("dir:")
                and entry_digest(kept / "files" / rel) != after[rel]
            ):
                return False
    except (OSError, ValueError, KeyError, TypeError):
        return False
    for rel in manifest["removed"]:
        _remove(tree / rel)
    for rel in manifest["changed"]:
        out = tree / rel
        if after[rel].startswith("dir:"):
            if not out.is_dir() or out.is_symlink():
                _remove(out)
                out.mkdir(parents=True)
            os.chmod(out, int(after[rel].split(":")[1], 8))
        else:
            out.parent.mkdir(parents=True, exist_ok=True)
            _remove(out)
            copy_entry(kept / "files" / rel, out)
    return True
