"""`TrialPaths`: where one trial keeps what it makes, as one documented directory contract.

<ledger>/work/<trial id>/        work: kept after the trial, hidden from other trials' agents
    workspace/                   the agent's workspace (unless `--workspace DIR` moved it)
    api_calls.jsonl              the metering proxy's calls, one CallRecord per line, where no
                                 agent can write (a command agent may write logs/)
    logs/                        the agent's logs, stored as the trial's `logs/...` artifacts
        prompt.md                the prompt as given
        api_calls.jsonl          a copy of the proxy's log, made once the agent has ended
    home/                        the agent's private $HOME inside the agent sandbox
    <runner>-home/               a CLI agent's private config home (claude-home, codex-home)
    candidate/                   the delivered editable files the judge sees
    shadow.git/                  the baseline repository the agent cannot reach
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

CALLS_LOG = "api_calls.jsonl"


class TrialPaths(BaseModel):
    """The directories of one trial (see the module docstring for the layout)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    work: Path = Field(description="the trial's work directory, <ledger>/work/<trial id>")
    workspace: Path = Field(description="where the agent works; <work>/workspace by default")
    logs: Path = Field(description="<work>/logs: every file there is kept as a log artifact")
    home: Path = Field(description="<work>/home: the agent's private $HOME in its sandbox")
    candidate: Path = Field(description="<work>/candidate: the delivered editables, judged")
    shadow: Path = Field(description="<work>/shadow.git: the baseline repo, out of reach")

    @classmethod
    def of(cls, work: Path, workspace: Path | None = None) -> TrialPaths:
        """The layout under `work`, with the workspace elsewhere when one was given."""
        return cls(
            work=work,
            workspace=workspace if workspace is not None else work / "workspace",
            logs=work / "logs",
            home=work / "home",
            candidate=work / "candidate",
            shadow=work / "shadow.git",
        )

    def config_home(self, runner: str) -> Path:
        """A CLI agent's private config home: `<work>/<runner>-home`."""
        return self.work / f"{runner}-home"

    @property
    def calls_log(self) -> Path:
        """The metering proxy's log of this trial's calls, taken in if the trial never ends.
        Outside `logs/`: a command agent may write there, and this log is evidence of cost."""
        return self.work / CALLS_LOG

    @property
    def kept_calls_log(self) -> Path:
        """Where the trial keeps a copy of `calls_log` (its `logs/api_calls.jsonl` artifact)."""
        return self.logs / CALLS_LOG
