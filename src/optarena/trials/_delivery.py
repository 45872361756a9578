"""What a trial keeps of the agent's delivery: its logs, diff, candidate and outcome in the
artifact store, or, for a workspace that cannot be read safely, the refusal as the verdict.

Everything here reads what the agent could have written (the logs directory a command agent
may write, files a runner names as logs), so every read goes through
`optarena.files.open_untrusted` / `walk_untrusted`: never through a link, FIFO or hard link
the agent made.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from optarena import __version__
from optarena.files import name_line, open_untrusted, remove_tree
from optarena.identity import judge_sha256
from optarena.ledger import Ledger, utc_now
from optarena.records import AgentOutcome, Judgement, TrialPaths, TrialRecord, evolve
from optarena.trials._workspace import Delivery, DeliveryRefused


def keep_log(written: Path, kept: Path) -> None:
    """Copy a log optarena wrote outside the agent's reach (`written`) into the trial's logs
    once the agent has ended, replacing whatever the agent left at `kept`; always written (empty
    when there was none), so a file the agent left under that name never passes for it. The
    new file is created, never opened through what the agent left (a link would be written
    through, as optarena's user)."""
    if kept.is_dir() and not kept.is_symlink():
        remove_tree(kept)
    kept.unlink(missing_ok=True)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    with open(os.open(kept, flags, 0o644), "wb") as out:
        if written.is_file():
            with open(written, "rb") as src:
                shutil.copyfileobj(src, out)


def describe(delivery: Delivery) -> str:
    """The capture phase's note: what changed (names as one line each, never a control
    character the terminal would act on)."""
    if not delivery.changed:
        return "no change"
    names = ", ".join(name_line(c.path) for c in delivery.changed)
    text = f"{len(delivery.changed)} changed: {names}"
    if delivery.out_of_scope:
        text += f" (out of scope: {', '.join(map(name_line, delivery.out_of_scope))})"
    if delivery.ignored:
        text += f" (new outside the scope, ignored: {', '.join(map(name_line, delivery.ignored))})"
    return text


def store_delivery(
    ledger: Ledger, delivery: Delivery | None, paths: TrialPaths, outcome: AgentOutcome
) -> tuple[dict[str, str], AgentOutcome]:
    """Logs, the diff, the candidate tree (none for a refused delivery) and the agent's
    outcome into the artifact store; returns them and the outcome as stored (noting the logs
    left out). The logs are read as the agent may have left them: never through a link, a
    FIFO or a hard link it made (`ArtifactStore.put_untrusted_tree`). The proxy's call log is
    kept from where optarena wrote it, never from what the agent left."""
    store = ledger.store
    if paths.calls_log.exists() or os.path.lexists(paths.kept_calls_log):
        keep_log(paths.calls_log, paths.kept_calls_log)
    logs, left_out = store.put_untrusted_tree(paths.logs)
    out = {f"logs/{rel}": sha for rel, sha in logs.items()}
    for name, raw in outcome.logs.items():
        path = Path(raw)
        if path == paths.calls_log or path.is_relative_to(paths.logs):
            continue  # kept above
        try:
            with open_untrusted(path) as f:
                out[f"logs/{name}"] = store.put_stream(f)
        except FileNotFoundError:
            continue
        except OSError as e:
            left_out.append(f"{name}: {e}")
    if left_out:
        note = f"logs not kept: {'; '.join(left_out[:20])}"
        detail = "; ".join(filter(None, [outcome.detail, note]))
        outcome = evolve(outcome, detail=detail)
    if delivery is not None:
        out["diff"] = store.put_bytes(delivery.diff)
        out["candidate"] = store.put_tree(paths.candidate, delivery.editable)
    out["outcome"] = store.put_text(outcome.model_dump_json(indent=2))
    return out, outcome


def refusal_judgement(record: TrialRecord, refused: DeliveryRefused) -> Judgement:
    """The trial's judgement when its delivery was refused unread: rejected, with each
    refusal's code and reason, no candidate and no metrics (nothing was judged)."""
    codes = list(dict.fromkeys(code for code, _reason in refused.refusals))
    return Judgement(
        trial_id=record.id,
        kind="trial",
        created_at=utc_now(),
        verdict="rejected",
        reasons=[reason for _code, reason in refused.refusals],
        reason_codes=codes,
        settings=record.judge_settings,
        judge_version=__version__,
        judge_sha256=judge_sha256(),
        task_sha256=record.task.sha256,
    )
