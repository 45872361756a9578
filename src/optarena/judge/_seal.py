"""The judge's seal: hashes of everything that decides a verdict, before and after judging.

What is hashed: the judge's code in use (the loaded modules of the judging code manifest and the
files the worker runs), the whole task package, and the oracle and generator files on their own.
The oracle and generator are imported before the candidate's worker starts, so a change made
while it runs cannot alter the code the judge uses; a mismatch afterwards rejects the candidate
with `judge_tampered` all the same, because something that should be unreachable was reached.

This detects drift, not every kind of malice: a process that can write these files could also
change them and put them back before the second hash. The sandbox (a dedicated uid, the task
package hidden) is what keeps the candidate from writing them in the first place.
"""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass
from pathlib import Path

from optarena.errors import OptarenaError
from optarena.identity import (
    PACKAGE_DIR,
    hash_files,
    hash_tree,
    installation_changes,
    judging_code,
    loaded_files,
    sha256_bytes,
)
from optarena.tasks import Task


@dataclass(frozen=True)
class Seal:
    judge: str
    task: str
    oracle: str

    def as_dict(self) -> dict[str, str]:
        return asdict(self)


# Run by the worker, never imported here.
_WORKER_SIDE = ("worker/_loop.py", "worker/_wire.py", "worker/_guard.py")


def judge_code_files() -> list[Path]:
    """The judge code in use: the loaded modules of the judging code manifest
    (`identity.JUDGING_CODE`) and the files the worker runs. (Files merely present in the tree
    do not judge anything.)"""
    files = {PACKAGE_DIR / "judge" / f for f in _WORKER_SIDE}
    files |= {PACKAGE_DIR / rel for rel in loaded_files() if judging_code(rel)}
    return sorted(files)


def _hash_code(files: list[Path]) -> str:
    h = hashlib.sha256()
    for f in files:
        try:
            data = f.read_bytes()
        except OSError:
            data = b"<missing>"
        h.update(f"{f}\0{sha256_bytes(data)}\n".encode())
    return h.hexdigest()


def take_seal(task: Task, code_files: list[Path] | None = None) -> Seal:
    """`code_files`: pass the list from the first seal to the second, so both hash the same."""
    refs = sorted({ref.split(":")[0] for ref in (task.spec.oracle, task.spec.generator)})
    return Seal(
        judge=_hash_code(code_files if code_files is not None else judge_code_files()),
        task=hash_tree(task.root),
        oracle=hash_files(task.root, refs),
    )


def broken(before: Seal, after: Seal) -> list[str]:
    """What changed, in words; empty when the seal holds."""
    names = {"judge": "the judge's code", "task": "the task package", "oracle": "the oracle"}
    b, a = before.as_dict(), after.as_dict()
    return [names[k] for k in b if b[k] != a[k]]


class JudgeTamperedError(OptarenaError):
    """optarena's installed code, or the task package, is not what it was: nothing is judged,
    since a verdict from altered code would be worthless. `changes` names what differs."""

    code = "judge_tampered"

    def __init__(self, changes: list[str], reference: str) -> None:
        self.changes = changes
        self.reference = reference
        more = f"; and {len(changes) - 8} more" if len(changes) > 8 else ""
        super().__init__(
            f"judge_tampered: refusing to judge: files differ from {reference}: "
            f"{'; '.join(changes[:8])}{more}. Reinstall optarena (pip install "
            "--force-reinstall) and restore the task package"
        )


def verify_judge(task: Task | None = None, task_sha256: str | None = None) -> None:
    """Before every judgement: optarena's installed files must match their install-time
    reference (`identity.code_references`) and the task package the hash it had when the trial
    began. Raises JudgeTamperedError otherwise. A few milliseconds (one hash of each tree)."""
    changes, reference = installation_changes()
    if task is not None and task_sha256 is not None and hash_tree(task.root) != task_sha256:
        changes.append(f"task package {task.root}: differs from its hash when the trial began")
        reference = reference or "the task package as the trial began"
    if changes:
        raise JudgeTamperedError(changes, reference)
