"""What the loop says to the agent in its follow-up turns (same session as the attempt).

Each prompt starts with a marker line (`optarena-harness: reflect` ...), so a transcript says
which phase a turn was, and the scripted model can tell the phases apart by content. The
judge's result is given as the judge reported it: verdict, reason codes, speed; never the
agent's own claims.
"""

from __future__ import annotations

from optarena.records import TrialRecord

REFLECT_MARKER = "optarena-harness: reflect"
BUILD_MARKER = "optarena-harness: build"
REPAIR_MARKER = "optarena-harness: repair"

AREA = ".harness"

LAYOUT = f"""\
- `{AREA}/skills/NAME/SKILL.md`: a skill; front matter `---` with `name:` and `description:`;
- `{AREA}/mcp/NAME/`: an MCP server (stdio) with `manifest.json`:
  `{{"command": ["python3", "server.py"], "self_test": [{{"tool": "T", "arguments": {{}}}}]}}`;
  the self-test must call every tool the server lists, each without an error;
- `{AREA}/tools/NAME/` or `{AREA}/verifiers/NAME/`: with `manifest.json` `{{"test": [argv]}}`,
  a test that exits 0;
- `{AREA}/fixtures/NAME`, `{AREA}/docs/NAME`: data or notes, not empty."""


def judge_summary(record: TrialRecord | None, error: str | None = None) -> str:
    """The independent judge's result of the attempt, in a few lines."""
    if record is None:
        return f"The attempt did not finish: {error or 'unknown error'}."
    lines = [f"verdict: {record.verdict or 'none (not judged)'}"]
    if record.reason_codes:
        lines.append("reason codes: " + ", ".join(record.reason_codes))
    for reason in record.reasons[:5]:
        lines.append(f"- {reason[:300]}")
    overall = _overall(record.metrics)
    if overall:
        lines.append(
            f"speed: time ratio {overall.get('ratio')} (candidate/baseline), "
            f"verdict {overall.get('verdict')}"
        )
    elif record.verdict == "accepted":
        lines.append("speed: not measured")
    return "\n".join(lines)


def _overall(metrics: object) -> dict[str, object] | None:
    if metrics is None:
        return None
    data = metrics.model_dump() if hasattr(metrics, "model_dump") else metrics
    overall = data.get("overall") if isinstance(data, dict) else None
    return overall if isinstance(overall, dict) else None


def reflect_prompt(judged: str) -> str:
    return (
        f"{REFLECT_MARKER}\n\n"
        "Your attempt has ended and optarena's judge (independent of you) found:\n\n"
        f"{judged}\n\n"
        "Which single reusable harness artifact (a skill, an MCP server, a tool, a verifier, "
        "a fixture or a doc) would most help a fresh session on this task next time, and why? "
        "Answer in a few sentences; do not build it yet."
    )


def build_prompt() -> str:
    return (
        f"{BUILD_MARKER}\n\n"
        f"Now build that artifact in `{AREA}/` of this workspace, in one of these layouts:\n"
        f"{LAYOUT}\n\n"
        "It is qualified in a clean copy of the workspace: anything it runs runs contained "
        "(no network, only its own directory and the workspace writable). Only a qualified "
        "artifact is given to the next session."
    )


def repair_prompt(failures: list[tuple[str, str]]) -> str:
    """`failures`: (what, the exact qualification report) per failing artifact."""
    body = "\n\n".join(f"{what}:\n{report}" for what, report in failures)
    return (
        f"{REPAIR_MARKER}\n\n"
        "Qualification failed; the exact reports:\n\n"
        f"{body}\n\n"
        f"Fix the artifacts in `{AREA}/` so they qualify (layouts:\n{LAYOUT})"
    )
