"""A GGUF's own chat format: its template, BOS when its metadata asks for it, the end-of-answer
token. Tested on vocab-only GGUFs built here with the ``gguf`` package (a tokenizer and a
template, no weights), and on the bundled model, whose prompts must not change."""

from __future__ import annotations

from pathlib import Path

import pytest

gguf = pytest.importorskip("gguf")

SYSTEM_USER = [{"role": "system", "content": "a"}, {"role": "user", "content": "b"}]
WITH_BOS = ("{{ bos_token }}{% for m in messages %}[{{ m['role'] }}]{{ m['content'] }}<|eot|>{% endfor %}"
            "{% if add_generation_prompt %}[assistant]{% endif %}")
"""Like Llama 3's: the template writes BOS itself."""
WITHOUT_BOS = WITH_BOS.removeprefix("{{ bos_token }}")
"""Like Mistral's and Gemma's in llama.cpp: BOS is the tokenizer's to add."""
BOS, EOS, EOT = 1, 2, 3


def vocab_gguf(path: Path, *, add_bos: bool, template: str | None) -> Path:
    """A vocab-only llama GGUF: a sentencepiece vocabulary of bytes and a few pieces, BOS ``<s>``,
    EOS ``</s>``, an end-of-turn control token ``<|eot|>``, and the chat template given."""
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_context_length(512)
    w.add_embedding_length(64)
    w.add_block_count(1)
    w.add_feed_forward_length(128)
    w.add_head_count(4)
    w.add_layer_norm_rms_eps(1e-5)
    tokens, types = ["<unk>", "<s>", "</s>", "<|eot|>"], [gguf.TokenType.UNKNOWN] + [gguf.TokenType.CONTROL] * 3
    tokens += [f"<0x{b:02X}>" for b in range(256)]
    types += [gguf.TokenType.BYTE] * 256
    tokens += ["▁", "▁a", "a", "b", "c"]
    types += [gguf.TokenType.NORMAL] * 5
    w.add_tokenizer_model("llama")
    w.add_token_list([t.encode() for t in tokens])
    w.add_token_scores([0.0] * 260 + [-float(i) for i in range(5)])
    w.add_token_types(types)
    w.add_bos_token_id(BOS)
    w.add_eos_token_id(EOS)
    w.add_unk_token_id(0)
    w.add_add_bos_token(add_bos)
    if template is not None:
        w.add_chat_template(template)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def chat_format(tmp_path: Path, **kw):
    from llama_cpp import Llama

    from simulation.llm.llamacpp.chat_format import ChatFormat

    llm = Llama(model_path=str(vocab_gguf(tmp_path / "vocab.gguf", **kw)), vocab_only=True, verbose=False)
    return ChatFormat(llm)


def test_a_template_that_writes_bos_gets_exactly_one(tmp_path):
    fmt = chat_format(tmp_path, add_bos=True, template=WITH_BOS)
    assert fmt.render(SYSTEM_USER, True).startswith("<s>[system]a<|eot|>")
    tokens, (n_prefix,) = fmt.pieces(SYSTEM_USER)
    assert tokens[0] == BOS and tokens.count(BOS) == 1
    assert tokens[:n_prefix] == fmt.tokenize("<s>[system]a<|eot|>"), "BOS belongs to the cached system piece"


def test_bos_is_added_when_the_metadata_asks_and_the_template_does_not_write_it(tmp_path):
    fmt = chat_format(tmp_path, add_bos=True, template=WITHOUT_BOS)
    tokens, (n_prefix,) = fmt.pieces(SYSTEM_USER)
    assert tokens[0] == BOS and tokens.count(BOS) == 1
    assert tokens[1:n_prefix] == fmt.tokenize("[system]a<|eot|>")
    alone, bounds = fmt.pieces([{"role": "user", "content": "b"}])  # one message: BOS alone is the prefix
    assert alone[0] == BOS and bounds == (1,)


def test_no_bos_when_the_metadata_says_so(tmp_path):
    fmt = chat_format(tmp_path, add_bos=False, template=WITHOUT_BOS)
    tokens, (n_prefix,) = fmt.pieces(SYSTEM_USER)
    assert BOS not in tokens and tokens[:n_prefix] == fmt.tokenize("[system]a<|eot|>")


def test_every_message_but_the_last_is_a_piece_of_its_own(tmp_path):
    """The pieces the backend may reuse end at each message boundary before the last message,
    each tokenized alone; the last message and the generation prompt are the tail."""
    fmt = chat_format(tmp_path, add_bos=False, template=WITHOUT_BOS)
    chat = [*SYSTEM_USER, {"role": "assistant", "content": "c"}, {"role": "user", "content": "d"}]
    tokens, bounds = fmt.pieces(chat)
    assert len(bounds) == 3 and tokens[:bounds[0]] == fmt.tokenize("[system]a<|eot|>")
    assert tokens[bounds[0]:bounds[1]] == fmt.tokenize("[user]b<|eot|>")
    assert tokens[bounds[1]:bounds[2]] == fmt.tokenize("[assistant]c<|eot|>")
    assert fmt.tokenize(fmt.render(chat, True)[len("[system]a<|eot|>[user]b<|eot|>[assistant]c<|eot|>"):]) \
        == tokens[bounds[2]:]


def test_a_template_that_rewrites_earlier_messages_ends_the_pieces_there(tmp_path):
    """A template that marks the last user message (so a shorter render is no prefix of the full
    one) gets pieces only up to where the renders agree."""
    marks_last = ("{% for m in messages %}[{{ m['role'] }}{% if loop.last %}*{% endif %}]{{ m['content'] }}<|eot|>"
                  "{% endfor %}{% if add_generation_prompt %}[assistant]{% endif %}")
    fmt = chat_format(tmp_path, add_bos=False, template=marks_last)
    tokens, bounds = fmt.pieces([*SYSTEM_USER, {"role": "user", "content": "d"}])
    assert fmt.render(SYSTEM_USER[:1], False).startswith("[system*]")
    assert bounds == (), "not even the system message renders the same alone"


def test_the_answer_ends_with_the_templates_end_of_turn(tmp_path):
    assert chat_format(tmp_path, add_bos=True, template=WITH_BOS).answer_end == EOT


def test_no_template_means_chatml(tmp_path):
    fmt = chat_format(tmp_path, add_bos=False, template=None)
    assert fmt.render(SYSTEM_USER, True) == "<|im_start|>system\na<|im_end|>\n<|im_start|>user\nb<|im_end|>\n" \
                                            "<|im_start|>assistant\n"


def test_a_template_that_refuses_the_probe_falls_back_to_eos(tmp_path):
    strict = "{% if messages[-1]['role'] == 'assistant' %}{{ raise_exception('no') }}{% endif %}" + WITH_BOS
    assert chat_format(tmp_path, add_bos=True, template=strict).answer_end == EOS


def test_the_bundled_models_prompt_is_unchanged():
    """SmolLM2 asks for no BOS and its template writes none: the same tokens as a plain
    ``add_bos=False`` tokenization of the rendered ChatML (replay caches keep their answers)."""
    from llama_cpp import Llama

    from simulation.llm.llamacpp.chat_format import ChatFormat
    from simulation.llm.llamacpp import bundled_model_path

    llm = Llama(model_path=str(bundled_model_path()), vocab_only=True, verbose=False)
    fmt = ChatFormat(llm)
    assert not fmt.add_bos
    tokens, _ = fmt.pieces(SYSTEM_USER)
    text = "<|im_start|>system\na<|im_end|>\n<|im_start|>user\nb<|im_end|>\n<|im_start|>assistant\n"
    assert tokens == llm.tokenize(text.encode(), add_bos=False, special=True)
    assert fmt.answer_end == llm.token_eos()  # <|im_end|>
