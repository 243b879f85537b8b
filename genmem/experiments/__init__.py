"""What runs on top of environments and graphs: evaluation through the graph and its methods,
retrieval-only evaluation, the runner, the seed bank, cold-start bank construction, online
evolution, their statistics and plots."""

__all__: list[str] = []
