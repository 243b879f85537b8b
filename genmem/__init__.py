"""GenMem: a generative symbolic experience memory for LangGraph agents."""

from genmem.errors import GenMemError

__version__ = "0.1.0"

__all__ = ["GenMemError", "__version__"]
