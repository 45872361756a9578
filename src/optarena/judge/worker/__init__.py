"""What runs inside the candidate's worker interpreter: the worker loop, its guard, the wire.

These modules import only the standard library and NumPy (a test enforces it): the worker
loads them by path, before any candidate code, without importing optarena, and nothing the
judge itself imports may execute there. The judge side imports `_wire` from here to speak the
same frame format.
"""

# No public names: the worker loads its modules by path, and the judge's side (`judge.client`)
# imports the ones it shares (`_wire`, `_run`) as modules, each as it is.
__all__: list[str] = []
