"""The speed metrics of a judgement (`JudgeResult.metrics`, `Judgement.metrics`,
`TrialRecord.metrics`), as a versioned on-disk format: `Metrics` for a builtin task's paired
calls, `ExternalMetrics` for an external project's benchmark runs; `kind` tells them apart.

Raw samples are stored, in the order they were taken; every statistic can be recomputed from
them. Ratios are time(b) / time(a): below 1 means arm b (the candidate) is faster. Speed-ups are
the inverse, time(a) / time(b). Intervals are over process pairs, not calls (see `_stats`).

Two clocks time every call, both on the judge's side of the process boundary: the kernel's CPU
time of the worker's cgroup over the call (all threads, exited threads and children) and the
judge's wall clock from request to reply. Verdicts use CPU time, which a busy shared machine
disturbs far less (a preempted call keeps running on the wall clock only), unless an arm waits
per call more than the other (sleeps, blocks: work CPU time does not show) or the machine has
no cgroup CPU accounting; then they use wall time, and `clock_note` says why.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

# 2: judge-side clocks (cgroup CPU, request wall), no warm-up slot call; 3: `kind`;
# 4: runs of go frames, the null arm's cost subtracted, per-call wall from go to answer
METRICS_SCHEMA_VERSION = 4
EXTERNAL_METRICS_VERSION = 2  # 2: the OS check (os_check), the low scale's runs

StopReason = Literal["decided", "precise", "budget", "max_pairs", "deadline", "discarded"]
BenchmarkStopReason = Literal["decided", "budget", "max_rounds"]  # an external benchmark's rounds
Clock = Literal["cpu", "wall"]
VerdictName = Literal["improved", "regressed", "no_difference", "inconclusive"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SpeedProtocol(_Model):
    """The frozen measurement protocol of one comparison."""

    min_effect: float = Field(
        description="relative change inside which an interval reads no_difference; "
        "improved/regressed need one that excludes no change and reaches beyond it"
    )
    budget_s: float = Field(
        description="time budget for the whole comparison (stretched by up to half of it "
        "where that reaches min_pairs, never past the judgement's deadline)"
    )
    warmup_calls: int = Field(description="uncounted calls per workload per process")
    calls_per_slot: int = Field(
        description="timed calls per arm per slot at least (ABBA: 4 slots); short calls get "
        "more, about 2 ms of work per slot; every call of a slot counts"
    )
    rounds_per_pair: int = Field(
        description="ABBA/BAAB rounds per process pair; calls under 0.5 ms get twice as many"
    )
    min_pairs: int
    max_pairs: int
    confidence: float = Field(description="interval level")
    precision: float = Field(description="stop once the interval half-width (log) is this small")
    resamples: int = Field(description="bootstrap resamples")
    bootstrap_seed: int = Field(description="seed of the bootstrap, for recomputation")
    stream: int = Field(description="input stream under the judgement seed (0 main, 1 A/A)")
    cpus: list[int | None] = Field(description="the CPU both arms of each pair were pinned to")
    null_arm: bool = Field(
        default=False,
        description="each pair also ran the judge's null function (the protocol's own cost per "
        "call), subtracted from both arms before their ratio (false in records before v4)",
    )
    slot_replay: bool = Field(
        default=False,
        description="each slot of a workload whose calls take under 1 ms opened with one "
        "uncounted call on the last input its worker had already answered (output checked), "
        "so counted calls do not start cold (false in records before it)",
    )
    turn: Literal["native", "python"] = Field(
        default="python",
        description="the judge's turn between two timed calls: native (compiled here; it "
        "takes each answer read from the worker's memory, and hands anything else to the Python "
        "reader) or python (no compiler, or records before it); the protocol's dilution of a "
        "short call's ratio differs between them (docs/measurement.md)",
    )


class PairSamples(_Model):
    """One freshly spawned process pair: raw per-call times of both arms, in order."""

    pair: int
    cpu: int | None = Field(description="the CPU both workers were pinned to (null: unpinned)")
    spawn_order: str = Field(description="'ab' or 'ba': which worker started first")
    warmup_calls: int = Field(description="uncounted warm-up calls per arm (outputs checked)")
    calls_per_slot: int = Field(description="counted calls per slot in this pair")
    orders: list[str] = Field(description="per round: ABBA or BAAB (alternating)")
    a_ns: list[int] = Field(description="arm a, judge's wall time of every counted call (ns)")
    b_ns: list[int] = Field(description="arm b, judge's wall time of every counted call (ns)")
    a_cpu_ns: list[int] = Field(description="arm a, cgroup CPU time of each call (ns); [] if none")
    b_cpu_ns: list[int] = Field(description="arm b, cgroup CPU time of each call (ns); [] if none")
    n_ns: list[int] = Field(default_factory=list, description="the null arm, wall time per call")
    n_cpu_ns: list[int] = Field(
        default_factory=list, description="the null arm, cgroup CPU time of each call (ns)"
    )
    a_call_ns: list[int] = Field(
        default_factory=list,
        description="arm a, wall time from go to answer of each call (the judge's own work "
        "between calls left out: what the waiting check compares)",
    )
    b_call_ns: list[int] = Field(default_factory=list, description="arm b, as a_call_ns")
    round_log_ratios: list[float] = Field(
        description="per round: log(b / a) of the mean over all its calls, on the verdict clock"
    )
    log_ratio: float = Field(description="the pair's statistic: mean of its round log-ratios")


class Summary(_Model):
    """An estimate over pairs with its interval and the verdict it earns."""

    ratio: float | None = Field(description="time(b)/time(a), Hodges-Lehmann over pairs")
    ratio_ci: list[float] | None = Field(description="[lo, hi] of the ratio; null if none")
    speedup: float | None = Field(description="time(a)/time(b)")
    speedup_ci: list[float] | None
    verdict: VerdictName
    why: str = Field(description="the verdict's reason in words")
    pairs: int = Field(description="independent process pairs behind the estimate")
    outliers: int = Field(description="pairs with a modified z-score > 3.5 (kept, counted)")
    notes: list[str] = Field(description="too_few_samples, zero_variance, outliers, ...")


class WorkloadMetrics(_Model):
    name: str
    summary: Summary
    median_a_ns: float = Field(description="median call time of arm a (verdict clock), all pairs")
    median_b_ns: float = Field(description="median call time of arm b (verdict clock), all pairs")
    crosscheck: Summary | None = Field(
        default=None,
        description="the same estimate on the other clock; an improvement needs both",
    )
    median_null_ns: float | None = Field(
        default=None,
        description="median call time of the null arm (verdict clock): the protocol's cost per "
        "call, taken off both arms before their ratio; null without a null arm",
    )
    pairs: list[PairSamples]


class Stop(_Model):
    """Why measuring stopped, and how much it took."""

    reason: StopReason
    pairs: int
    rounds: int = Field(description="ABBA/BAAB rounds, all pairs and workloads together")
    samples: int = Field(description="timed calls over both arms and all workloads")
    budget_s: float
    used_s: float
    discarded: list[str] = Field(
        default_factory=list, description="pairs that ran but do not count, and why"
    )


class Integrity(_Model):
    """Whether CPU time represents one arm: its waiting per call against the other arm's."""

    arm: str
    workload: str
    clock: Clock = Field(description="the clock checked (cpu: is it representative)")
    passed: bool
    detail: str
    excess_ns: float | None = Field(description="waiting per call beyond the other arm's")
    allowed_ns: float


class Instructions(_Model):
    """Deterministic instruction counts, beside time and never instead of it."""

    available: bool
    tool: str | None = None
    reason: str = Field(description="what was counted, or why nothing could be")
    per_call: dict[str, dict[str, float]] = Field(
        default_factory=dict, description="workload -> arm -> instructions per call (median)"
    )
    ratio: dict[str, float] = Field(
        default_factory=dict, description="workload -> instructions(b)/instructions(a)"
    )


class Comparison(_Model):
    """One paired comparison of arm a against arm b."""

    arms: dict[str, str] = Field(description="a/b -> what they are (baseline, candidate, ...)")
    protocol: SpeedProtocol
    overall: Summary = Field(
        description="Hodges-Lehmann over process pairs of each pair's mean log-ratio across "
        "the timed workloads (not a geometric mean of the workload estimates)"
    )
    workloads: list[WorkloadMetrics]
    stop: Stop
    clock: Clock = Field(description="the clock the verdicts use")
    crosscheck: Summary | None = Field(
        default=None,
        description="the overall estimate on the other clock: a verdict of improved needs "
        "both clocks to say so (null without CPU accounting, and in records before v4)",
    )
    clock_note: str = Field(description="why that clock")
    integrity: list[Integrity]
    cpu_accounting: str = Field(description="cpuacct | cgroup2 | unavailable (why)")
    freeze: str = Field(
        description="how the arm not being called was kept from running: freezer | cgroup2 | "
        "sigstop | none (why)"
    )


class AAControl(_Model):
    """The A/A control: the baseline against a copy of itself, under the same protocol."""

    comparison: Comparison
    noise_floor: float | None = Field(
        description="largest |time ratio - 1| the A/A interval allows; effects inside are noise"
    )


class Metrics(Comparison):
    """`JudgeResult.metrics` for an accepted candidate that was measured."""

    schema_version: int = METRICS_SCHEMA_VERSION
    kind: Literal["paired_calls"] = Field(
        default="paired_calls", description="a builtin task's interleaved calls in workers"
    )
    verdict: VerdictName = Field(description="the overall speed verdict (= overall.verdict)")
    aa: AAControl | None = Field(default=None, description="present when --aa was run")
    instructions: Instructions


class _ArmRuns(_Model):
    """Each arm's command run once: what the benchmark printed, and what the OS counted."""

    baseline: float = Field(description="the benchmark's metric, baseline run")
    candidate: float = Field(description="the benchmark's metric, candidate run")
    baseline_wall_s: float = Field(description="the OS's wall time of the baseline run")
    candidate_wall_s: float
    baseline_cpu_s: float | None = Field(description="CPU of the run's cgroup; null: unknown")
    candidate_cpu_s: float | None


class ScaleRuns(_ArmRuns):
    """Both arms' runs of a round at the declared scale's low size."""


class BenchmarkRound(_ArmRuns):
    """One AB or BA round of an external benchmark: each arm's command run once (at the
    scale's high size, when the spec declares a scale)."""

    order: Literal["AB", "BA"]
    log_ratio: float = Field(description="log(candidate/baseline) on the lower-is-better scale")
    low: ScaleRuns | None = Field(
        default=None, description="the same round's runs at the scale's low size; null: no scale"
    )


OsOutcome = Literal["confirmed", "unresolved", "contradicted", "not_needed"]


class OsCheck(_Model):
    """What the OS's own time of the runs says about the metric's effect (the metric is
    printed by a process that runs the candidate's code; the OS's count is not)."""

    outcome: OsOutcome = Field(
        description="confirmed: its interval excludes no change on the metric's side; "
        "contradicted: on the other side; unresolved: it cannot tell (the effect is within its "
        "noise); not_needed: the metric claims no effect, or is the judge's own wall clock"
    )
    basis: Literal["process", "scaled_difference"] = Field(
        description="process: each whole run; scaled_difference: a run at the scale's high "
        "size minus one at its low size, fixed costs cancelled"
    )
    clock: Clock | None = Field(description="cpu (the runs' cgroups) or wall; null: not looked at")
    ratio: float | None = Field(description="the OS's candidate/baseline estimate; null: none")
    ratio_ci: list[float] | None = Field(description="its 95% interval; null: none")
    metric_ratio: float = Field(
        description="the metric's ratio that was to be confirmed (the verdict's own estimate)"
    )
    why: str = Field(description="the outcome in words")
    advice: str | None = Field(default=None, description="what the spec could add to resolve it")


class BenchmarkStop(_Model):
    reason: BenchmarkStopReason
    rounds: int
    budget_s: float
    os_second_look: bool = Field(
        default=False,
        description="the metric decided before the OS could tell, so the rounds the spec still "
        "allowed ran and the OS looked once more over all of them (reason: where those ended)",
    )


class ExternalMetrics(_Model):
    """`metrics` of an external project's judgement: its own benchmark, rounds AB/BA."""

    schema_version: int = EXTERNAL_METRICS_VERSION
    kind: Literal["external_benchmark"] = "external_benchmark"
    metric: dict[str, Any] = Field(description="the frozen spec's metric: how it was read")
    direction: Literal["lower", "higher"] = Field(description="which way the metric is better")
    ratio_meaning: str
    verdict: VerdictName = Field(description="= overall.verdict")
    overall: Summary
    stop: BenchmarkStop
    rounds: list[BenchmarkRound]
    scale: list[int] | None = Field(default=None, description="[low, high] sizes; null: none")
    os_check: OsCheck | None = Field(default=None, description="null in records before v2")
    crosscheck: list[str] = Field(
        description="where the OS's time of the runs (CPU, else wall) does not confirm the "
        "metric's effect (its 95% interval does not exclude no change on the metric's side); "
        "one turns an improved or regressed verdict into inconclusive"
    )


LEGACY_NOTE = (
    "measured by an older protocol (the worker timed itself, before the judge-side clocks): "
    "shown as recorded, never compared with today's figures"
)


class LegacyMetrics(_Model):
    """Speed metrics of a protocol this optarena no longer measures by (format version 1, the
    first release's): kept verbatim and listed, marked, and kept out of comparisons with newer
    ones. Upgrading never hides history: such a trial lists and shows as it was."""

    kind: Literal["legacy_protocol"] = "legacy_protocol"
    protocol_version: int = Field(description="the metrics format version it was written in")
    verdict: VerdictName | None = Field(description="the speed verdict as recorded, if readable")
    overall: Summary | None = Field(description="the overall estimate as recorded, if readable")
    note: str = LEGACY_NOTE
    data: dict[str, Any] = Field(description="the metrics exactly as recorded")


AnyMetrics = Annotated[Metrics | ExternalMetrics | LegacyMetrics, Field(discriminator="kind")]
"""Whichever metrics a judgement has; `kind` says which."""
