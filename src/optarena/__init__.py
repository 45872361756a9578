"""optarena: judge what a coding agent actually delivered, for correctness and speed."""

__version__ = "0.1.0"

__all__ = ["__version__"]
