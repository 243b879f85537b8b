"""Tasks, environments, scorers and benchmark runners (issue 5). Bundled data lives in `data/`."""

__all__: list[str] = []
