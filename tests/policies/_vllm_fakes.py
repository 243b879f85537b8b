"""Canned values shared by the vLLM test modules (``test_vllm`` and ``test_vllm_sid``)."""

from __future__ import annotations

SPEC = "vllm:http://localhost:8000/v1#Qwen/Qwen2.5-7B-Instruct"
A = "<SID_L1_3><SID_L2_0><SID_L3_7><SID_L4_1>"
