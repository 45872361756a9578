"""The suite's own set-up: what its speed relies on and nothing else would notice."""

from __future__ import annotations

import pytest

GROUP = "suite-setup"


@pytest.mark.xdist_group(GROUP)
def test_xdist_groups_reach_the_scheduler(request: pytest.FixtureRequest) -> None:
    """`--dist loadgroup` keeps a group on one worker only through the suffix xdist adds to the
    node id. When a pytest release drops it (9.2.0, pytest-xdist#1386), nothing fails: tests
    are spread over the workers, the Ray tests start a cluster on each and the controls are
    judged twice (the suite 20% longer). This fails instead."""
    dist = request.config.getoption("dist", default="no")
    loadgroup = getattr(request.config.option, "loadgroup", False)
    if not loadgroup:
        pytest.skip(f"not run by xdist with --dist loadgroup (dist={dist})")
    assert request.node.nodeid.endswith(f"@{GROUP}"), (
        f"{request.node.nodeid}: xdist's group suffix is missing, so --dist loadgroup does not "
        "group (see the pytest pin in pyproject.toml)"
    )
