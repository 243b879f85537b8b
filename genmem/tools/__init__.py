"""LangChain tools over a bank: `memory_lookup`."""

__all__: list[str] = []
