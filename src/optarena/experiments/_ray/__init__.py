"""Experiments on a Ray cluster: agents as Ray tasks on agent nodes, judging on quiet judge
nodes, every trial written by the driver alone (see `docs/scale-out.md`).

Ray is an optional dependency (`pip install 'optarena[ray]'`): nothing here imports it until
a run asks for it (`run_on_ray`), and then a missing Ray is one line saying how to install it.
"""

from optarena.experiments._ray._cluster import import_ray
from optarena.experiments._ray._driver import RayOptions, attempt_id, run_on_ray

__all__ = [
    "RayOptions",
    "attempt_id",
    "import_ray",
    "run_on_ray",
]
