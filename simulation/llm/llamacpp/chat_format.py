"""A GGUF's own chat format: its template, its BOS token when it asks for one, and the token
that ends an answer.

A GGUF carries its chat template (``tokenizer.chat_template``) and whether its tokenizer wants a
beginning-of-sequence token (``tokenizer.ggml.add_bos_token``). Llama 3, Gemma and Mistral do;
prompting them without it, as a bare ``add_bos=False`` tokenization does, gives a model that
was never trained on such input. The rules, as Hugging Face's ``apply_chat_template`` and
llama.cpp's server apply them: render the template with the real ``bos_token`` / ``eos_token``
texts (some templates write BOS themselves), tokenize with special tokens parsed, and put BOS
first only when the metadata asks for it and the template has not already written it.

Each message but the last is tokenized apart from the rest (``pieces``), and so is each part of a
message cut at a piece break (``simulation.llm.types.PIECE_BREAK``), so the backend can keep it as
a cached prefix (see ``simulation.llm.llamacpp.prefix_cache``); BOS belongs to the first.

``answer_end`` is the token a finished assistant answer is followed by in this template
(``<|im_end|>``, ``<|eot_id|>``, ``<end_of_turn>``...): scoring "7" as a whole answer means
"7" and then that token, which is what tells "1" from the start of "10".
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from simulation.llm.types import PIECE_BREAK

CHATML = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
"""Used when a GGUF carries no template of its own."""

_PROBE = "\x01answer\x01"


def _raise(message: str) -> None:
    raise ValueError(message)


class ChatFormat:
    """Renders and tokenizes chat messages the way ``llm`` (a ``llama_cpp.Llama``, a vocab-only
    one will do) was trained to read them."""

    def __init__(self, llm: Any):
        import json

        from jinja2.ext import loopcontrols
        from jinja2.sandbox import ImmutableSandboxedEnvironment

        self._llm = llm
        vocab = llm._model
        self.bos_id = llm.token_bos()
        self.eos_id = llm.token_eos()
        self.bos_text = vocab.token_get_text(self.bos_id) if self.bos_id >= 0 else ""
        self.eos_text = vocab.token_get_text(self.eos_id) if self.eos_id >= 0 else ""
        self.add_bos = bool(vocab.add_bos_token()) and self.bos_id >= 0
        self.template_source = llm.metadata.get("tokenizer.chat_template") or CHATML
        env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
        env.filters["tojson"] = lambda x, indent=None, **_: json.dumps(x, ensure_ascii=False, indent=indent)
        env.globals["raise_exception"] = _raise
        env.globals["strftime_now"] = lambda fmt: datetime(2024, 1, 1).strftime(fmt)  # no wall clock in a prompt
        self._template = env.from_string(self.template_source)
        self.answer_end = self._answer_end()
        self.cuts_clean = self.tokenize("x\n") + self.tokenize("- (Mon 07:00) y") == self.tokenize("x\n- (Mon 07:00) y")
        """Whether text cut at a line start tokenizes as it would whole (a BPE vocabulary, like the
        bundled SmolLM2's and Qwen's). A SentencePiece vocabulary that puts a space before every
        text it is given would read a piece break as a space: for it, breaks are taken out and
        never cut (``pieces``)."""

    def render(self, messages: list[dict[str, str]], generation_prompt: bool) -> str:
        return self._template.render(messages=messages, add_generation_prompt=generation_prompt,
                                     bos_token=self.bos_text, eos_token=self.eos_text)

    def tokenize(self, text: str) -> list[int]:
        return self._llm.tokenize(text.encode(), add_bos=False, special=True)

    def pieces(self, messages: list[dict[str, str]]) -> tuple[list[int], tuple[int, ...]]:
        """The prompt's tokens (ending with the generation prompt), and where its canonical pieces
        end: after the first message (BOS included) and after each further message but the last,
        each piece tokenized on its own (``simulation.llm.llamacpp.prefix_cache``); a message's text
        is further cut at each ``PIECE_BREAK`` in it (taken out), so a message that grows at its end
        keeps the pieces it had. A template that renders
        an earlier message differently once more follow (so a shorter render is no prefix of the
        full one) ends the pieces there: the rest is one tail."""
        full = self.render(messages, True)
        texts: list[str] = []
        done = ""
        for k in range(1, len(messages)):
            try:
                prefix = self.render(messages[:k], False)
            except Exception:  # a template that refuses a conversation cut short
                break
            if not full.startswith(prefix) or len(prefix) <= len(done):
                break
            texts.append(prefix[len(done):])
            done = prefix
        *ends, tail = [*texts, full[len(done):]]
        cut = (lambda text: text.split(PIECE_BREAK)) if self.cuts_clean else (lambda text: [text.replace(PIECE_BREAK, "")])
        texts = [part for text in ends for part in cut(text)] + cut(tail)
        tokens: list[int] = []
        bounds: list[int] = []
        for text in texts[:-1]:
            tokens += self.tokenize(text)
            if len(tokens) > (bounds[-1] if bounds else 0):  # an empty part is no piece
                bounds.append(len(tokens))
        tokens += self.tokenize(texts[-1])
        if self.add_bos and tokens[:1] != [self.bos_id]:
            tokens = [self.bos_id, *tokens]
            bounds = [b + 1 for b in bounds] or [1]
        return tokens, tuple(b for b in bounds if b < len(tokens))

    def _answer_end(self) -> int:
        """The first token after an assistant answer's text in this template (the model's EOS
        when the template cannot say)."""
        try:
            text = self.render([{"role": "user", "content": "?"}, {"role": "assistant", "content": _PROBE}], False)
        except Exception:  # a template that refuses this conversation
            return self.eos_id
        after = text.split(_PROBE, 1)[1] if _PROBE in text else ""
        tokens = self.tokenize(after) if after.strip() else []
        return tokens[0] if tokens else self.eos_id


__all__ = ["CHATML", "ChatFormat"]
