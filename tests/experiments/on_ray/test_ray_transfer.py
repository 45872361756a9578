"""A trial's way home from its node (`_ray._transfer`), without Ray: a real trial run into a
staging ledger, packed, received chunk by chunk into the driver's ledger and written once.
Negative controls: a chunk that does not hash to its name, out of order or past its size, a
shipment of another trial or key, the same attempt shipped twice with another record."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path

import pytest

# private: the Ray executor's transfer protocol, fed hostile chunks directly
from optarena.experiments._ray._transfer import (
    CHUNK_BYTES,
    Chunk,
    Receiver,
    Shipment,
    TransferError,
    import_trial,
    pack,
)
from optarena.ledger import Ledger
from optarena.records import load_trial
from optarena.tasks import resolve_task
from optarena.trials import TrialConfig, run_trial

KEY = ("experiment_key", "rmsnorm/a/0")
LOG_BYTES = 3 * CHUNK_BYTES + 123  # a log of several chunks


@pytest.fixture(scope="module")
def staged(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Ledger, str]]:
    """A staging ledger holding one finished trial with a multi-chunk log."""
    root = tmp_path_factory.mktemp("staging")
    script = root / "agent.sh"
    script.write_text(
        "set -e\n"
        f'head -c {LOG_BYTES} /dev/zero | tr "\\0" x > "$OPTARENA_LOGS_DIR/big.log"\n'
        + 'printf "import numpy as np\\n" > "$OPTARENA_WORKSPACE/solution.py"\n'
    )
    config = TrialConfig(
        task=resolve_task("rmsnorm"),
        agent="command",
        agent_args={"command": f"sh {script}"},
        labels=dict([KEY]),
        measure=False,
    )
    with Ledger(root / "ledger") as led:
        record = run_trial(config, led, trial_id="a1b2c3d4e5")
        yield led, record.id


def _driver(tmp_path: Path, staging: Ledger, trial_id: str) -> Ledger:
    """A driver's ledger with the trial's row begun, as `_driver._begin` leaves it."""
    led = Ledger(tmp_path / "driver")
    start = staging.get(trial_id).model_copy(update={"state": "running", "finished_at": None})
    led.begin_trial(start)
    return led


def _arrived(led: Ledger, shipment: Shipment, chunks: Iterable[Chunk]) -> Receiver:
    receiver = Receiver(led.store, shipment)
    for piece in chunks:
        receiver.add(piece)
    return receiver


def test_a_trial_arrives_whole_and_is_written_once(
    staged: tuple[Ledger, str], tmp_path: Path
) -> None:
    staging, trial_id = staged
    shipment, chunks = pack(staging, trial_id, "vm/abc", {}, limit_mb=64)
    pieces = list(chunks)
    assert max(len(c.data) for c in pieces) == CHUNK_BYTES
    with _driver(tmp_path, staging, trial_id) as led:
        assert _arrived(led, shipment, pieces).done
        record = import_trial(led, trial_id, KEY, shipment)
        stored = led.get(trial_id)
        assert stored.state == "complete" and stored == record == staging.get(trial_id)
        assert led.judgements(trial_id)[0].verdict == staging.judgements(trial_id)[0].verdict
        assert led.calls(trial_id) == staging.calls(trial_id)
        for name, sha in stored.artifacts.items():
            assert led.store.read_bytes(sha) == staging.store.read_bytes(sha), name
        tree = led.store.tree(stored.artifacts["candidate"])
        assert all(led.store.has(sha) for sha in tree.files.values())
        import_trial(led, trial_id, KEY, shipment)  # again: nothing changes
        assert len(led.judgements(trial_id)) == 1


def test_a_chunk_that_is_not_its_artifact_is_never_stored(
    staged: tuple[Ledger, str], tmp_path: Path
) -> None:
    staging, trial_id = staged
    shipment, chunks = pack(staging, trial_id, "vm/abc", {}, limit_mb=64)
    pieces = list(chunks)
    with Ledger(tmp_path / "driver") as led:
        forged = Receiver(led.store, shipment)
        first = pieces[0]
        with pytest.raises(TransferError, match=r"do not hash|past its size|out of order"):
            forged.add(Chunk(first.sha, first.data[:-1] + b"!"))
            for piece in pieces[1:]:
                forged.add(piece)
        assert not led.store.has(first.sha)
        shuffled = Receiver(led.store, shipment)
        with pytest.raises(TransferError, match="out of order"):
            shuffled.add(pieces[-1])
        long = Receiver(led.store, shipment)
        with pytest.raises(TransferError, match="past its size"):
            long.add(Chunk(first.sha, first.data * (CHUNK_BYTES // max(1, len(first.data)) + 2)))


def test_a_shipment_of_another_trial_or_key_is_refused(
    staged: tuple[Ledger, str], tmp_path: Path
) -> None:
    staging, trial_id = staged
    shipment, chunks = pack(staging, trial_id, "vm/abc", {}, limit_mb=64)
    with _driver(tmp_path, staging, trial_id) as led:
        _arrived(led, shipment, chunks)
        with pytest.raises(TransferError, match="is of trial"):
            import_trial(led, "ffffffffff", KEY, shipment)
        with pytest.raises(TransferError, match="is of trial"):
            import_trial(led, trial_id, ("experiment_key", "rmsnorm/b/0"), shipment)
        assert led.get(trial_id).state == "running"  # nothing written


def test_a_different_record_for_a_finished_attempt_is_an_error(
    staged: tuple[Ledger, str], tmp_path: Path
) -> None:
    staging, trial_id = staged
    shipment, chunks = pack(staging, trial_id, "vm/abc", {}, limit_mb=64)
    with _driver(tmp_path, staging, trial_id) as led:
        _arrived(led, shipment, chunks)
        import_trial(led, trial_id, KEY, shipment)
        other, _ = pack(staging, trial_id, "vm/abc", {"agent_detail": "forged"}, limit_mb=64)
        with pytest.raises(TransferError, match="finished and differs"):
            import_trial(led, trial_id, KEY, other)
        assert led.get(trial_id).agent_detail != "forged"


def test_logs_over_the_limit_stay_on_the_node_and_the_record_says_so(
    staged: tuple[Ledger, str],
) -> None:
    staging, trial_id = staged
    limit_mb = 1.0  # the delivery fits, the multi-chunk log does not
    shipment, chunks = pack(staging, trial_id, "vm/abc", {}, limit_mb=limit_mb)
    sent = sum(size for _sha, size in shipment.artifacts)
    assert sent <= limit_mb * (1 << 20)
    shipped = load_trial(shipment.record)
    assert "logs/big.log" not in shipped.artifacts
    assert "candidate" in shipped.artifacts and "diff" in shipped.artifacts
    assert "not transferred" in shipped.agent_detail and "logs/big.log" in shipped.agent_detail
    assert sum(len(c.data) for c in chunks) == sent


def test_a_delivery_over_the_limit_is_refused_not_cut(staged: tuple[Ledger, str]) -> None:
    staging, trial_id = staged
    with pytest.raises(TransferError, match="exceeds the transfer limit"):
        pack(staging, trial_id, "vm/abc", {}, limit_mb=1e-6)


def test_a_row_never_begun_is_not_finished_by_a_shipment(
    staged: tuple[Ledger, str], tmp_path: Path
) -> None:
    staging, trial_id = staged
    shipment, chunks = pack(staging, trial_id, "vm/abc", {}, limit_mb=64)
    with Ledger(tmp_path / "driver") as led:
        _arrived(led, shipment, chunks)
        with pytest.raises(TransferError, match="no row began"):
            import_trial(led, trial_id, KEY, shipment)
