"""SID alignment SFT, mid-training and GRPO on graph-executed rollouts (issue 7)."""

__all__: list[str] = []
