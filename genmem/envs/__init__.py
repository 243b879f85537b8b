"""Environments: the ``Environment`` interface, tasks, their tools and scorers, the search index,
the environment registry (``benches``: one registration per environment), the seed experiences of
the QA and TextWorld sources, and bundled data (``data/``, licenses kept). Nothing here imports a
graph."""

__all__: list[str] = []
