"""Environments: the ``Environment`` interface, tasks, their tools and scorers, the search index,
the benchmark registry and bundled data (``data/``, licenses kept). Nothing here imports a graph."""

__all__: list[str] = []
