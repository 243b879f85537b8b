"""Environments: the ``Environment`` interface, tasks, their tools and scorers, the search index,
the environment registry (``benches``: one registration per environment), the seed experiences of
the QA and TextWorld sources, and bundled data (``data/``, licenses kept); and what evaluation and
training both use to run them and report on them: the task pool (:mod:`genmem.envs.pool`) and
bootstrap intervals (:mod:`genmem.envs.stats`). Nothing here imports a graph."""

__all__: list[str] = []
