"""The on-disk task format: `task.toml`, validated by pydantic.

Every field has a description because the same text is what a task author reads when the
loader rejects a spec (the error names the file, the field and what was expected).
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

TASK_SCHEMA_VERSION = 1

_ID_RE = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")
_VERSION_RE = re.compile(r"^\d+\.\d+\.\d+$")
_REF_RE = re.compile(r"^[A-Za-z0-9_./-]+\.py:[A-Za-z_][A-Za-z0-9_]*$")

Role = Literal["timed", "check", "edge"]


REASON_CODES = frozenset(
    {
        "entry_missing",
        "import_failed",
        "raised",
        "exited",
        "aborted",
        "timeout",
        "worker_crashed",
        "protocol_violation",
        "wrong_type",
        "wrong_shape",
        "wrong_dtype",
        "non_finite",
        "out_of_tolerance",
        "precision_downcast",
        "output_too_large",
        "stale_output",
        "history_dependent",
        "input_mutated",
        "output_aliases_input",
        "lazy_output",
        "output_changed_after_return",
        "oracle_access",
        "judge_memory_access",
        "write_outside_workdir",
        "network_access",
        "process_outlived_call",
        "freeze_resisted",
        "clock_patched",
        "numpy_patched",
        "worker_tampered",
        "judge_tampered",
        "timing_tampered",
        "process_limit",
        "memory_limit",
        "cpu_limit",
        "file_size_limit",
        "open_files_limit",
        "judge_error",
        "out_of_scope",
        "compile_failed",
    }
)
"""Every reason code a rejection can carry (README: "Reason codes"); a control expects one."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class CBinding(_Strict):
    """How the worker calls a C entry point through ctypes, declared as data so that no code
    of the task package has to run in the candidate's process.

    The generator's positional arguments are the `inputs` (arrays of `dtype`, C-contiguous);
    `sizes` are C `int`s read off their shapes; the worker allocates the `output` array, fills
    it with garbage (a finite value drawn per call), passes every parameter in `params` order
    (sizes by value, arrays as pointers) and returns the output.
    """

    params: list[str] = Field(min_length=1, description="the C function's parameters, in order")
    inputs: list[str] = Field(min_length=1, description="names of the generator's positional args")
    sizes: dict[str, str] = Field(
        default_factory=dict, description="int parameter -> 'input.axis', e.g. m = 'a.0'"
    )
    output: str = Field(description="name of the output parameter (a pointer the C code fills)")
    output_shape: list[str] = Field(min_length=1, description="the output's shape, in sizes")
    dtype: Literal["float32", "float64"] = Field(
        default="float32", description="dtype of every array"
    )

    @model_validator(mode="after")
    def _consistent(self) -> CBinding:
        names = [*self.inputs, *self.sizes, self.output]
        if len(set(names)) != len(names):
            raise ValueError("inputs, sizes and output must have distinct names")
        for p in self.params:
            if not p.isidentifier():
                raise ValueError(f"parameter '{p}' is not a C identifier")
        if sorted(self.params) != sorted(names):
            raise ValueError(
                f"params {self.params} must name each input, size and the output exactly once"
            )
        for size, where in self.sizes.items():
            arg, _, axis = where.partition(".")
            if arg not in self.inputs or not axis.isdigit():
                raise ValueError(f"size '{size}' = '{where}' must be 'input.axis', e.g. 'a.0'")
        for dim in self.output_shape:
            if dim not in self.sizes:
                raise ValueError(f"output_shape names '{dim}', which is not a size")
        return self


class EntryPoint(_Strict):
    """Where the judge finds the candidate's code."""

    file: str = Field(description="path of the entry file, relative to the candidate directory")
    function: str = Field(description="name of the function the judge calls")
    language: Literal["python", "c"] = Field(
        default="python",
        description="python (a module) | c (compiled in the worker's sandbox, called via ctypes)",
    )
    c: CBinding | None = Field(default=None, description="for language 'c': how to call it")

    @field_validator("function")
    @classmethod
    def _identifier(cls, v: str) -> str:
        if not v.isidentifier():
            raise ValueError("must be a Python identifier")
        return v

    @model_validator(mode="after")
    def _binding(self) -> EntryPoint:
        if self.language == "c" and self.c is None:
            raise ValueError("a C entry needs an [entry.c] binding (params, inputs, output)")
        if self.language != "c" and self.c is not None:
            raise ValueError("[entry.c] is only for language = 'c'")
        return self


class Workload(_Strict):
    """One input family. `timed` workloads are measured; `check` and `edge` only judged."""

    name: str = Field(description="unique workload name")
    role: Role = Field(description="timed | check | edge")
    params: dict[str, Any] = Field(default_factory=dict, description="passed to the generator")
    description: str = ""

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not _ID_RE.match(v):
            raise ValueError("must be lower-case letters, digits, '-' or '_'")
        return v


class Tolerance(_Strict):
    """Elementwise: |out - ref| <= atol + rtol * |ref|, with ref the float64 oracle."""

    atol: float = Field(ge=0.0, description="absolute tolerance")
    rtol: float = Field(ge=0.0, description="relative tolerance")


class Correctness(_Strict):
    """How hard the correctness phase looks."""

    calls_per_workload: int = Field(
        default=3,
        ge=2,
        le=50,
        description="fresh inputs per workload; >= 2 so a replaying candidate fails",
    )


class MeasurementDefaults(_Strict):
    """Defaults for the speed phase; the CLI may override them per judgement."""

    min_effect: float = Field(
        default=0.03,
        gt=0.0,
        lt=1.0,
        description=(
            "relative change inside which an interval reads no_difference, and beyond which "
            "it must reach for improved/regressed (0.03 = 3%)"
        ),
    )
    budget_s: float = Field(default=30.0, gt=0.0, description="measurement time budget (s)")
    warmup_calls: int = Field(
        default=2, ge=0, description="untimed calls per workload in each fresh process"
    )
    calls_per_slot: int = Field(
        default=3,
        ge=1,
        description="timed calls per arm per slot; a round is four slots, ABBA or BAAB",
    )
    rounds_per_pair: int = Field(
        default=2,
        ge=2,
        multiple_of=2,
        description="rounds in each fresh process pair; even, as ABBA and BAAB alternate",
    )
    min_pairs: int = Field(
        default=6, ge=2, description="process pairs before any verdict (the interval is over pairs)"
    )
    max_pairs: int = Field(default=60, ge=2, description="fresh process pairs at most")
    confidence: float = Field(default=0.95, gt=0.5, lt=1.0, description="interval level")


class WorkerLimits(_Strict):
    """Resource limits for the candidate's worker process (enforced by optarena.sandbox)."""

    load_timeout_s: float = Field(default=60.0, gt=0.0, description="import of the entry module")
    call_timeout_s: float = Field(default=30.0, gt=0.0, description="one call of the entry")
    total_timeout_s: float = Field(default=900.0, gt=0.0, description="one whole judgement")
    memory_mb: int = Field(default=4096, ge=64, description="address space of the worker (MiB)")
    cpu_s: int = Field(default=600, ge=1, description="CPU seconds of the worker")
    file_size_mb: int = Field(default=64, ge=1, description="largest file the worker may write")
    open_files: int = Field(default=256, ge=16, description="open file descriptors")
    processes: int = Field(default=64, ge=1, description="processes/threads of the worker's user")


class Requirements(_Strict):
    """What a machine needs to run the task."""

    device: Literal["cpu", "cuda"] = Field(default="cpu", description="cpu | cuda")
    python: str = Field(default=">=3.11", description="Python version specifier")
    packages: list[str] = Field(default_factory=list, description="e.g. 'numpy>=1.26'")
    programs: list[str] = Field(
        default_factory=list, description="executables that must be on PATH, e.g. 'cc'"
    )

    @field_validator("python")
    @classmethod
    def _python(cls, v: str) -> str:
        from optarena.tasks._requirements import parse_specifier

        parse_specifier(v)
        return v

    @field_validator("packages")
    @classmethod
    def _packages(cls, v: list[str]) -> list[str]:
        from optarena.tasks._requirements import parse_requirement

        for text in v:
            parse_requirement(text)
        return v


class Control(_Strict):
    """A candidate shipped with the task whose verdict is known in advance."""

    name: str = Field(description="control name")
    dir: str = Field(description="directory with the control's editable files")
    expect: Literal["accepted", "rejected"] = Field(description="accepted | rejected")
    reason: str | None = Field(
        default=None, description="for rejected controls: the reason code that must appear"
    )
    description: str = ""

    @model_validator(mode="after")
    def _reason_for_rejected(self) -> Control:
        if self.expect == "rejected" and not self.reason:
            raise ValueError("a rejected control must name the reason code it expects")
        if self.reason is not None and self.reason not in REASON_CODES:
            raise ValueError(
                f"unknown reason code '{self.reason}' (known: {', '.join(sorted(REASON_CODES))})"
            )
        return self


class TaskSpec(_Strict):
    """A versioned optimization task package (`task.toml`)."""

    schema_version: int = Field(default=TASK_SCHEMA_VERSION, description="task.toml format")
    id: str = Field(description="task id: lower-case letters, digits, '-' or '_'")
    version: str = Field(description="task version, MAJOR.MINOR.PATCH")
    title: str = Field(min_length=1, description="one line")
    prompt: str = Field(default="TASK.md", description="the prompt an agent gets")
    editable: list[str] = Field(
        min_length=1, description="globs: the only files an agent may change"
    )
    entry: EntryPoint
    baseline: str = Field(default="baseline", description="directory with the baseline files")
    generator: str = Field(description="'file.py:function', (workload, seed) -> (args, kwargs)")
    oracle: str = Field(description="'file.py:function', float64 reference, not the baseline")
    workloads: list[Workload] = Field(min_length=1)
    tolerance: Tolerance
    correctness: Correctness = Field(default_factory=Correctness)
    measurement: MeasurementDefaults = Field(default_factory=MeasurementDefaults)
    limits: WorkerLimits = Field(default_factory=WorkerLimits)
    requirements: Requirements = Field(default_factory=Requirements)
    controls: list[Control] = Field(default_factory=list)

    @field_validator("id")
    @classmethod
    def _id(cls, v: str) -> str:
        if not _ID_RE.match(v):
            raise ValueError("must be lower-case letters, digits, '-' or '_' (at most 64)")
        return v

    @field_validator("version")
    @classmethod
    def _version(cls, v: str) -> str:
        if not _VERSION_RE.match(v):
            raise ValueError("must be MAJOR.MINOR.PATCH, e.g. '1.0.0'")
        return v

    @field_validator("generator", "oracle")
    @classmethod
    def _ref(cls, v: str) -> str:
        if not _REF_RE.match(v):
            raise ValueError("must be 'file.py:function'")
        return v

    @model_validator(mode="after")
    def _consistent(self) -> TaskSpec:
        names = [w.name for w in self.workloads]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"workloads: duplicate names {dupes}")
        if not any(w.role == "timed" for w in self.workloads):
            raise ValueError("workloads: at least one workload needs role = 'timed'")
        controls = [c.name for c in self.controls]
        if len(set(controls)) != len(controls):
            raise ValueError("controls: duplicate names")
        if self.entry.language == "c" and "cc" not in self.requirements.programs:
            raise ValueError("requirements: a C entry needs programs = ['cc'] (the compiler)")
        if self.measurement.max_pairs < self.measurement.min_pairs:
            raise ValueError("measurement: max_pairs must be >= min_pairs")
        return self

    def workload(self, name: str) -> Workload:
        for w in self.workloads:
            if w.name == name:
                return w
        raise KeyError(name)
