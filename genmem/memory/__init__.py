"""The data layer: SIDs, RQ-KMeans codebooks and metrics, encoders, SID-keyed banks."""

from genmem.memory.bank import MAX_PAYLOAD_CHARS, Bank, import_bank
from genmem.memory.bank_copy import copy_bank_file, working_copy
from genmem.memory.build import (
    BuildReport,
    Consolidator,
    ExperienceRecord,
    build_bank,
    concat_consolidate,
    group_by_sid,
)
from genmem.memory.encoders import (
    DEFAULT_ENCODER_ID,
    EXPERIENCE_PREFIX,
    Encoder,
    SentenceTransformerEncoder,
    default_encoder,
    encode_for_codebook,
    format_for_encoding,
    load_encoder,
)
from genmem.memory.from_texts import BankBuild, bank_from_texts
from genmem.memory.gate import GateConfig, GateVerdict, WriteGate, check_payload
from genmem.memory.langgraph_store import LangGraphBankStore
from genmem.memory.location import DEFAULT_BANK_ID, BankURL, open_bank, open_store, parse_bank_url
from genmem.memory.metrics import CodebookMetrics, code_shares, codebook_metrics
from genmem.memory.postgres_store import PostgresBankStore
from genmem.memory.records import (
    ApplyResult,
    BankInfo,
    BankStats,
    Entry,
    Event,
    Hit,
    LookupResult,
    Op,
    Outcome,
    Update,
    Version,
)
from genmem.memory.rqkmeans import CodebookMetadata, Codebooks, Distance, RQKMeans, RQKMeansConfig
from genmem.memory.search import SearchRow, search_configs, write_search_results
from genmem.memory.sid import DEFAULT_SIZES, DEFAULT_SPEC, SID, SIDSpec, coerce_sid
from genmem.memory.sqlite_store import SQLiteBankStore
from genmem.memory.store import BankStore

__all__ = [
    "DEFAULT_BANK_ID",
    "DEFAULT_ENCODER_ID",
    "DEFAULT_SIZES",
    "DEFAULT_SPEC",
    "EXPERIENCE_PREFIX",
    "MAX_PAYLOAD_CHARS",
    "SID",
    "ApplyResult",
    "Bank",
    "BankBuild",
    "BankInfo",
    "BankStats",
    "BankStore",
    "BankURL",
    "BuildReport",
    "CodebookMetadata",
    "CodebookMetrics",
    "Codebooks",
    "Consolidator",
    "Distance",
    "Encoder",
    "Entry",
    "Event",
    "ExperienceRecord",
    "GateConfig",
    "GateVerdict",
    "Hit",
    "LangGraphBankStore",
    "LookupResult",
    "Op",
    "Outcome",
    "PostgresBankStore",
    "RQKMeans",
    "RQKMeansConfig",
    "SIDSpec",
    "SQLiteBankStore",
    "SearchRow",
    "SentenceTransformerEncoder",
    "Update",
    "Version",
    "WriteGate",
    "bank_from_texts",
    "build_bank",
    "check_payload",
    "code_shares",
    "codebook_metrics",
    "coerce_sid",
    "concat_consolidate",
    "copy_bank_file",
    "default_encoder",
    "encode_for_codebook",
    "format_for_encoding",
    "group_by_sid",
    "import_bank",
    "load_encoder",
    "open_bank",
    "open_store",
    "parse_bank_url",
    "search_configs",
    "working_copy",
    "write_search_results",
]
