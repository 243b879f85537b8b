"""Model backends, SID-constrained generation, reranking and baseline retrievers."""

from genmem.policies.backends import DEFAULT_MODEL_SPEC, ROLES, Role, RoleModels, load_chat_model
from genmem.policies.baselines import DEFAULT_K, DenseRetriever, TfidfRetriever
from genmem.policies.chat_local import ChatLocal, parse_tool_calls, to_chat_messages
from genmem.policies.local import (
    DEFAULT_MODEL_ID,
    LocalPolicy,
    PolicyInfo,
    default_gguf_path,
    load_policy,
    save_policy,
)
from genmem.policies.prompts import (
    NO_MEMORY_ANSWER,
    EvolverDecision,
    evolver_prompt,
    evolver_user_message,
    retriever_prompt,
    retriever_user_message,
)
from genmem.policies.quantizer import QuantizerAddresser
from genmem.policies.rerank import (
    HitRates,
    HitReport,
    RankedEntry,
    RerankConfig,
    Reranker,
    aggregate_hits,
    retrieval_hits,
)
from genmem.policies.sid_decoding import (
    MAX_BEAMS,
    DecodeResult,
    SIDDecodingConfig,
    SIDTrie,
    TransformersSIDGenerator,
)
from genmem.policies.sid_tokens import add_sid_tokens, sid_token_ids
from genmem.policies.types import AllowedMode, SIDCandidate, SIDGenerator
from genmem.policies.vllm import VLLMServerConfig, chat_model_from_vllm_spec, vllm_serve_args
from genmem.policies.vllm_sid import VLLMOfflineSIDGenerator, VLLMServerSIDGenerator

__all__ = [
    "DEFAULT_K",
    "DEFAULT_MODEL_ID",
    "DEFAULT_MODEL_SPEC",
    "MAX_BEAMS",
    "NO_MEMORY_ANSWER",
    "ROLES",
    "AllowedMode",
    "ChatLocal",
    "DecodeResult",
    "DenseRetriever",
    "EvolverDecision",
    "HitRates",
    "HitReport",
    "LocalPolicy",
    "PolicyInfo",
    "QuantizerAddresser",
    "RankedEntry",
    "RerankConfig",
    "Reranker",
    "Role",
    "RoleModels",
    "SIDCandidate",
    "SIDDecodingConfig",
    "SIDGenerator",
    "SIDTrie",
    "TfidfRetriever",
    "TransformersSIDGenerator",
    "VLLMOfflineSIDGenerator",
    "VLLMServerConfig",
    "VLLMServerSIDGenerator",
    "add_sid_tokens",
    "aggregate_hits",
    "chat_model_from_vllm_spec",
    "default_gguf_path",
    "evolver_prompt",
    "evolver_user_message",
    "load_chat_model",
    "load_policy",
    "parse_tool_calls",
    "retrieval_hits",
    "retriever_prompt",
    "retriever_user_message",
    "save_policy",
    "sid_token_ids",
    "to_chat_messages",
    "vllm_serve_args",
]
