"""Model backends, SID-constrained generation, reranking and baseline retrievers (issue 3)."""

__all__: list[str] = []
