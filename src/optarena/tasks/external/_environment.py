"""The environment an external project's commands need, declared in its spec (`[environment]`).

A project's tests need an interpreter with their dependencies, which a sandbox with a private
`/tmp`, a hidden home and no network does not find by itself: the shell's `python3` silently
became the system one, without pytest, and a venv under `/tmp` or a home directory could not
be seen. So the spec names what its commands use: an interpreter (a venv's, usually), put first
on PATH; a wheelhouse for an offline set-up; other directories to make visible. Each is made
visible read-only to every command (and must be to the agent), and what decides the results
(the interpreter's version and installed distributions, the wheelhouse's files) is hashed into
the frozen identity, so a changed environment is drift, never a silent difference.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from optarena.errors import SpecError

# What the declared interpreter says about itself: its version and where its packages are.
_PROBE = (
    "import json, sys, sysconfig; "
    "print(json.dumps({'version': sys.version.split()[0], 'prefix': sys.prefix, "
    "'purelib': sysconfig.get_paths()['purelib'], 'platlib': sysconfig.get_paths()['platlib']}))"
)


class Environment(BaseModel):
    """`[environment]`: paths relative to the spec file, or absolute."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    python: str | None = Field(
        default=None,
        description="an interpreter (a venv's bin/python3): its directory goes first on PATH, "
        "and its prefix is made visible read-only",
    )
    wheelhouse: str | None = Field(
        default=None,
        description="a directory of wheels for an offline set-up: visible read-only, its path "
        "in $OPTARENA_WHEELHOUSE, its files hashed into the frozen identity",
    )
    paths: list[str] = Field(
        default_factory=list, description="other directories made visible read-only (a toolchain)"
    )


@dataclass(frozen=True)
class ResolvedEnvironment:
    """The declared environment, resolved against the spec's directory and checked to exist."""

    python: Path | None
    python_version: str | None
    prefix: Path | None  # the interpreter's sys.prefix: the venv's root
    site_packages: tuple[Path, ...]
    wheelhouse: Path | None
    paths: tuple[Path, ...]

    def visible(self) -> list[Path]:
        """Every directory a command (and the agent) must be able to read."""
        out = [p for p in (self.prefix, self.wheelhouse) if p is not None]
        if self.python is not None:
            out.append(self.python.parent)
        return [*out, *self.paths]

    def variables(self, path: str) -> dict[str, str]:
        """What the commands' environment gets: PATH with the interpreter's directory first
        (so `python3`, `pip` and `pytest` are the venv's), VIRTUAL_ENV, the wheelhouse."""
        out: dict[str, str] = {}
        if self.python is not None:
            out["PATH"] = f"{self.python.parent}:{path}"
            if self.prefix is not None and (self.prefix / "pyvenv.cfg").is_file():
                out["VIRTUAL_ENV"] = str(self.prefix)
        if self.wheelhouse is not None:
            out["OPTARENA_WHEELHOUSE"] = str(self.wheelhouse)
            out["PIP_FIND_LINKS"] = str(self.wheelhouse)
        return out

    def sha256(self) -> str:
        """The interpreter (path, version, every installed distribution's name and version)
        and the wheelhouse's files: what must not change between freezing and judging."""
        h = hashlib.sha256()
        if self.python is not None:
            h.update(f"python\0{self.python}\0{self.python_version}\0".encode())
            for site in self.site_packages:
                for name in sorted(os.listdir(site)) if site.is_dir() else ():
                    if name.endswith((".dist-info", ".egg-info", ".egg-link", ".pth")):
                        h.update(f"{name}\0".encode())
        if self.wheelhouse is not None:
            h.update(b"wheelhouse\0")
            for f in sorted(p for p in self.wheelhouse.rglob("*") if p.is_file()):
                h.update(os.fsencode(f.relative_to(self.wheelhouse).as_posix()) + b"\0")
                h.update(hashlib.sha256(f.read_bytes()).digest())
        for p in self.paths:
            h.update(f"path\0{p}\0".encode())
        return h.hexdigest()


def _directory(spec_path: Path, field: str, value: str) -> Path:
    path = (spec_path.parent / value).resolve()
    if not path.is_dir():
        raise SpecError(spec_path, field, f"{path} is not a directory")
    return path


def resolve_environment(spec_path: Path, env: Environment) -> ResolvedEnvironment:
    """Check that everything declared exists (and the interpreter runs); SpecError naming the
    field otherwise."""
    python = version = prefix = None
    sites: tuple[Path, ...] = ()
    if env.python is not None:
        # not resolved through links: a venv's bin/python3 links to the base interpreter,
        # and it is the venv's directory that has to go first on PATH
        python = Path(os.path.abspath(spec_path.parent / env.python))
        if not python.is_file() or not os.access(python, os.X_OK):
            raise SpecError(spec_path, "environment.python", f"{python} is not an executable")
        try:
            out = subprocess.run(
                [str(python), "-c", _PROBE], capture_output=True, text=True, timeout=60, check=True
            ).stdout
            info = json.loads(out.strip().splitlines()[-1])
        except (OSError, subprocess.SubprocessError, ValueError, IndexError) as e:
            raise SpecError(
                spec_path, "environment.python", f"{python} does not run as Python: {e}"
            ) from None
        version, prefix = str(info["version"]), Path(info["prefix"])
        sites = tuple(dict.fromkeys(Path(info[k]) for k in ("purelib", "platlib")))
    wheelhouse = None
    if env.wheelhouse is not None:
        wheelhouse = _directory(spec_path, "environment.wheelhouse", env.wheelhouse)
    paths = tuple(
        _directory(spec_path, f"environment.paths.{i}", p) for i, p in enumerate(env.paths)
    )
    return ResolvedEnvironment(python, version, prefix, sites, wheelhouse, paths)
