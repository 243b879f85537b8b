"""The ``genmem`` command line: one module per command group, shared helpers in ``common``.

``genmem = genmem.cli:main`` is the console entry point; ``python -m genmem.cli`` runs the same.
"""

from genmem.cli.main import build_parser, main

__all__ = ["build_parser", "main"]
