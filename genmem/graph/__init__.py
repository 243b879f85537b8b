"""LangGraph graphs: MemRetriever, MemEvolver, StackPlanner and the closed loop (issue 4)."""

__all__: list[str] = []
