"""The data layer: SIDs, RQ-KMeans codebooks and metrics, encoders, SID-keyed banks."""

from genmem.memory.sid import DEFAULT_SIZES, DEFAULT_SPEC, SID, SIDSpec, coerce_sid

__all__ = ["DEFAULT_SIZES", "DEFAULT_SPEC", "SID", "SIDSpec", "coerce_sid"]
