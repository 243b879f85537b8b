"""The policy's own text turns inside a graph run, for GRPO's whole-turn completions.

With ``completion="whole"`` (the default of :class:`~genmem.training.rollouts.RolloutConfig`) the
completion GRPO trains is the memory agent's whole turn: the SID the policy sampled, then what
the environment answered (kept out of the loss), then the text the policy wrote from it
(MemRetriever's rewrite, MemEvolver's decision). The graphs run as they do at inference; the
chat model of their rewrite / decision node is a :class:`PolicyTurnChat`, which samples that
text from the policy being trained and records every token:

- the environment segment is the text turn's prompt exactly as a local chat model renders it at
  inference (the role's system prompt, the task, the ``memory_lookup`` call and its result, and
  for MemEvolver the decision request), placed after the end of the SID turn;
- the reply is sampled from the trainer's model with the trainer's sampling settings
  (temperature, top-p, top-k, ...), conditioned on exactly the token ids TRL scores later
  (prompt, SID turn, environment segment), so the log-probabilities TRL computes are those of
  what was sampled.

:attr:`TurnRecord.mask` is 1 on the policy's tokens and 0 on the environment's: the ``env_mask``
TRL's ``rollout_func`` may return to keep tool output out of the loss.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import ConfigDict, PrivateAttr

__all__ = [
    "PolicyTurnChat",
    "Sampler",
    "TurnRecord",
    "generation_model",
    "sampled_logprobs",
    "trainer_sampler",
]

Sampler = Callable[[list[int], int], tuple[list[int], list[float]]]
"""Samples a continuation of the token ids (at most N new tokens): its ids and their logprobs."""


@dataclass
class TurnRecord:
    """One rollout's completion after the SID turn, built while the graph runs."""

    context: list[int]
    """Every token so far, prompt and SID turn included: what the next reply conditions on."""
    ids: list[int] = field(default_factory=list)
    mask: list[int] = field(default_factory=list)
    """1 on the policy's tokens, 0 on the environment's (one per id)."""
    logprobs: list[float] = field(default_factory=list)
    """The sampler's log-probability of each id (0.0 on environment tokens, which are masked)."""
    parts: list[dict[str, Any]] = field(default_factory=list)
    """``{"part", "trained", "text"}`` per segment, for the rollout log."""

    def add(
        self, ids: list[int], *, part: str, text: str, logprobs: list[float] | None = None
    ) -> None:
        """Append a segment: the policy's when ``logprobs`` are given, else the environment's."""
        trained = logprobs is not None
        self.context += ids
        self.ids += ids
        self.mask += [int(trained)] * len(ids)
        self.logprobs += logprobs if logprobs is not None else [0.0] * len(ids)
        self.parts.append({"part": part, "trained": trained, "text": text})


class PolicyTurnChat(BaseChatModel):
    """A chat model whose replies are sampled from the policy under training (see module doc).

    Between :meth:`begin` and :meth:`end` each call renders the conversation as the policy's
    chat template does at inference, appends it to the record as environment tokens, samples
    the reply and appends it as the policy's. It offers no tool binding and no structured
    output, so the graphs ask it for plain text (MemEvolver's decision as a JSON object).
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    max_new_tokens: int = 128
    """Most tokens per reply."""

    _tokenizer: Any = PrivateAttr(default=None)
    _record: TurnRecord | None = PrivateAttr(default=None)
    _sampler: Sampler | None = PrivateAttr(default=None)
    _part: str = PrivateAttr(default="reply")

    @property
    def _llm_type(self) -> str:
        return "genmem-policy-turn"

    def begin(self, record: TurnRecord, sampler: Sampler, tokenizer: Any, part: str) -> None:
        """Record the next replies into ``record``, sampled by ``sampler``, logged as ``part``."""
        self._record, self._sampler, self._tokenizer, self._part = record, sampler, tokenizer, part

    def end(self) -> None:
        """Stop recording (a call outside a rollout raises)."""
        self._record = self._sampler = None

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        from genmem.policies.chat_local import to_chat_messages

        record, sampler, tok = self._record, self._sampler, self._tokenizer
        if record is None or sampler is None:
            raise RuntimeError("PolicyTurnChat was called outside a rollout (call begin() first)")
        prompt = tok.apply_chat_template(
            to_chat_messages(messages), add_generation_prompt=True, tokenize=False
        )
        # The chat template ends a turn with its end token and a newline; an SID turn or reply
        # that stopped at its cap has not ended itself, so the environment closes it.
        closed = bool(record.context) and record.context[-1] == tok.eos_token_id
        env_text = ("\n" if closed else f"{tok.eos_token}\n") + prompt
        env_ids = tok(env_text, add_special_tokens=False)["input_ids"]
        record.add(env_ids, part="lookup", text=env_text)
        reply, logprobs = sampler(list(record.context), self.max_new_tokens)
        text = tok.decode(reply, skip_special_tokens=True)
        record.add(reply, part=self._part, text=text, logprobs=logprobs)
        return ChatResult(generations=[ChatGeneration(message=AIMessage(text.strip()))])


@contextlib.contextmanager
def generation_model(trainer: Any) -> Iterator[Any]:
    """``trainer``'s model ready to generate: whole, and quiet under ZeRO-3.

    See :func:`~genmem.training.policy_io.whole_model`: the weights are gathered (whatever
    ``ds3_gather_for_generation`` says) and no forward pass inside is a collective, because
    the processes of a run generate different numbers of replies and tokens.
    """
    import torch

    from genmem.training.policy_io import whole_model

    with whole_model(trainer) as model, torch.no_grad():
        yield model


def trainer_sampler(trainer: Any, model: Any) -> Sampler:
    """Sampling from ``model`` (``trainer``'s, made whole by :func:`generation_model` once for
    the whole batch) with the trainer's generation settings, as TRL's own sampler.

    The weights are gathered once per batch, not per reply: under ZeRO-3 each gather is a
    collective, and processes write different numbers of replies.
    """

    def sample(context: list[int], max_new_tokens: int) -> tuple[list[int], list[float]]:
        import torch
        from transformers import GenerationConfig

        tok = trainer.processing_class
        eos = list(trainer.eos_token_ids)
        config = GenerationConfig(
            max_new_tokens=max_new_tokens,
            do_sample=True,
            temperature=trainer.temperature,
            top_p=trainer.top_p,
            top_k=trainer.top_k,
            min_p=trainer.min_p,
            repetition_penalty=trainer.repetition_penalty,
            eos_token_id=eos,
            pad_token_id=tok.pad_token_id,
            disable_compile=True,
        )
        ids = torch.tensor([context], device=model.device)
        with torch.no_grad():
            out = model.generate(
                input_ids=ids,
                attention_mask=torch.ones_like(ids),
                generation_config=config,
                output_logits=True,
                return_dict_in_generate=True,
            )
        new = out.sequences[0, len(context) :].tolist()
        end = next((i + 1 for i, t in enumerate(new) if t in eos), len(new))
        new = new[:end]
        return new, sampled_logprobs(out.logits[:end], new, trainer.temperature)

    return sample


def sampled_logprobs(logits: Any, tokens: list[int], temperature: float) -> list[float]:
    """Log-probabilities of ``tokens`` under the raw ``logits`` of each step, as TRL scores them.

    TRL scores a token as ``log_softmax(logits / temperature)`` of the unconstrained model;
    the sampler reports the same quantity (not the masked distribution a constraint sampled
    from), so its importance-sampling correction sees the policy's own probabilities.
    """
    import torch

    if not tokens:
        return []
    stacked = torch.stack(list(logits[: len(tokens)]), dim=1)[0].float() / temperature
    chosen = torch.tensor(tokens, device=stacked.device)[:, None]
    return torch.log_softmax(stacked, dim=-1).gather(1, chosen)[:, 0].tolist()
