"""Chat templates: each builtin matches its family's reference text exactly, written out by hand here."""

from pathlib import Path

import pytest

from harness.errors import UserError
from workloads.prompt_file import read_prompt_file
from workloads.templates import BUILTIN_TEMPLATES, TEMPLATES, render, starts_with_bos

EXAMPLE = Path(__file__).resolve().parent.parent / "yamls" / "prompts" / "example-chats.jsonl"

ONE = [("user", "What is a KV cache?")]
WITH_SYSTEM = [("system", "Be brief."), ("user", "What is a KV cache?")]
MULTI = [("system", "Be brief."), ("user", "Hi"), ("assistant", "Hello! How can I help?"), ("user", "Define TTFT.")]

EXPECTED = {
    ("llama-2", "one"): "<s>[INST] What is a KV cache? [/INST]",
    ("llama-2", "system"): "<s>[INST] <<SYS>>\nBe brief.\n<</SYS>>\n\nWhat is a KV cache? [/INST]",
    ("llama-2", "multi"): ("<s>[INST] <<SYS>>\nBe brief.\n<</SYS>>\n\nHi [/INST] Hello! How can I help? </s>"
                           "<s>[INST] Define TTFT. [/INST]"),
    ("llama-3", "one"): ("<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nWhat is a KV cache?<|eot_id|>"
                         "<|start_header_id|>assistant<|end_header_id|>\n\n"),
    ("llama-3", "system"): ("<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
                            "<|start_header_id|>user<|end_header_id|>\n\nWhat is a KV cache?<|eot_id|>"
                            "<|start_header_id|>assistant<|end_header_id|>\n\n"),
    ("llama-3", "multi"): ("<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
                           "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
                           "<|start_header_id|>assistant<|end_header_id|>\n\nHello! How can I help?<|eot_id|>"
                           "<|start_header_id|>user<|end_header_id|>\n\nDefine TTFT.<|eot_id|>"
                           "<|start_header_id|>assistant<|end_header_id|>\n\n"),
    ("mistral", "one"): "<s>[INST] What is a KV cache? [/INST]",
    ("mistral", "system"): "<s>[INST] Be brief.\n\nWhat is a KV cache? [/INST]",
    ("mistral", "multi"): "<s>[INST] Be brief.\n\nHi [/INST]Hello! How can I help?</s>[INST] Define TTFT. [/INST]",
    ("chatml", "one"): "<|im_start|>user\nWhat is a KV cache?<|im_end|>\n<|im_start|>assistant\n",
    ("chatml", "system"): ("<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nWhat is a KV cache?<|im_end|>\n"
                           "<|im_start|>assistant\n"),
    ("chatml", "multi"): ("<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
                          "<|im_start|>assistant\nHello! How can I help?<|im_end|>\n"
                          "<|im_start|>user\nDefine TTFT.<|im_end|>\n<|im_start|>assistant\n"),
    ("none", "one"): "What is a KV cache?",
    ("none", "system"): "Be brief.\n\nWhat is a KV cache?",
    ("none", "multi"): "Be brief.\n\nHi\n\nHello! How can I help?\n\nDefine TTFT.",
}
CONVERSATIONS = {"one": ONE, "system": WITH_SYSTEM, "multi": MULTI}

CHATML_JINJA = ("{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] "
                "+ '<|im_end|>' + '\\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}"
                "{% endif %}")
NO_SYSTEM_JINJA = ("{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role not supported') }}"
                   "{% endif %}{% for message in messages %}{{ message['content'] }}{% endfor %}")


def tiny_tokenizer(chat_template=None, name="tiny-test"):
    """A real fast tokenizer built here from a WordLevel model, so `chat` runs transformers' own code."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    model = Tokenizer(models.WordLevel(unk_token="[UNK]"))
    model.pre_tokenizer = pre_tokenizers.Whitespace()
    sentences = ["what is a kv cache", "be brief", "define ttft please", "hello how can i help"]
    model.train_from_iterator(sentences, trainers.WordLevelTrainer(special_tokens=["[UNK]", "<s>", "</s>"]))
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=model, unk_token="[UNK]", bos_token="<s>",
                                        eos_token="</s>", name_or_path=name)
    tokenizer.chat_template = chat_template
    return tokenizer


@pytest.mark.parametrize("template,shape", sorted(EXPECTED), ids=lambda v: str(v))
def test_builtin_matches_reference_text(template, shape):
    assert render(template, CONVERSATIONS[shape]) == EXPECTED[(template, shape)]


@pytest.mark.parametrize("template", BUILTIN_TEMPLATES + ("none",))
def test_system_prompt_argument_acts_as_a_leading_system_message(template):
    assert render(template, ONE, system_prompt="Be brief.") == EXPECTED[(template, "system")]
    assert render(template, ONE, system_prompt="") == EXPECTED[(template, "one")]


@pytest.mark.parametrize("template", BUILTIN_TEMPLATES + ("none",))
def test_conversation_system_message_wins_over_system_prompt(template):
    assert render(template, WITH_SYSTEM, system_prompt="Ignore me.") == EXPECTED[(template, "system")]


def test_llama_templates_strip_content_like_meta_and_mistral_keeps_it():
    padded = [("user", "  spaced out \n")]
    assert render("llama-2", padded) == "<s>[INST] spaced out [/INST]"
    assert render("llama-3", padded).startswith("<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\n"
                                                "spaced out<|eot_id|>")
    assert render("mistral", padded) == "<s>[INST]   spaced out \n [/INST]"


def test_starts_with_bos_says_whether_the_text_holds_bos():
    assert {t: starts_with_bos(t) for t in TEMPLATES} == {
        "chat": None, "none": False, "llama-2": True, "llama-3": True, "mistral": True, "chatml": False}
    for template in BUILTIN_TEMPLATES:
        text = render(template, ONE)
        assert text.startswith(("<s>", "<|begin_of_text|>")) == starts_with_bos(template)


def test_chat_uses_the_tokenizers_template():
    tokenizer = tiny_tokenizer(CHATML_JINJA)
    assert render("chat", MULTI, tokenizer=tokenizer) == EXPECTED[("chatml", "multi")]
    assert render("chat", ONE, system_prompt="Be brief.", tokenizer=tokenizer) == (
        "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nWhat is a KV cache?<|im_end|>\n"
        "<|im_start|>assistant\n")


def test_chat_without_a_chat_template_is_a_user_error():
    with pytest.raises(UserError) as error:
        render("chat", ONE, tokenizer=tiny_tokenizer(None))
    assert str(error.value) == ("workload.template: 'chat' needs a tokenizer with a chat template; tiny-test has none "
                                "(use one of llama-2, llama-3, mistral, chatml, none)")


def test_chat_without_a_tokenizer_is_a_user_error():
    with pytest.raises(UserError) as error:
        render("chat", ONE)
    assert str(error.value) == ("workload.template: 'chat' needs a tokenizer with a chat template; no tokenizer was "
                                "given (use one of llama-2, llama-3, mistral, chatml, none)")


def test_chat_template_that_rejects_the_conversation_is_a_user_error():
    tokenizer = tiny_tokenizer(NO_SYSTEM_JINJA)
    assert render("chat", ONE, tokenizer=tokenizer) == "What is a KV cache?"
    with pytest.raises(UserError) as error:
        render("chat", WITH_SYSTEM, tokenizer=tokenizer)
    assert str(error.value) == ("workload.template: tiny-test's chat template rejected the conversation: "
                                "System role not supported")


def test_unknown_template_names_the_known_ones():
    with pytest.raises(UserError) as error:
        render("llama2", ONE)
    assert str(error.value) == ("workload.template: unknown template 'llama2' (known: chat, none, llama-2, llama-3, "
                                "mistral, chatml); did you mean 'llama-2'?")
    with pytest.raises(UserError, match="unknown template 'gpt'"):
        starts_with_bos("gpt")


@pytest.mark.parametrize("messages,problem", [
    ([], "the conversation has no messages"),
    ([("user", "a"), ("assistant", "b")],
     "the last message is from 'assistant'; a prompt must end with a user message"),
    ([("system", "s")], "the last message is from 'system'; a prompt must end with a user message"),
    ([("user", "a"), ("user", "b")], "messages[1] is from 'user' where 'assistant' was expected"),
    ([("assistant", "a"), ("user", "b")], "messages[0] is from 'assistant' where 'user' was expected"),
    ([("user", "a"), ("system", "s"), ("user", "b")], "messages[1] is from 'system' where 'assistant' was expected"),
    ([("bot", "a")], "messages[0] has unknown role 'bot' (allowed: system, user, assistant)"),
])
def test_malformed_conversations_are_user_errors(messages, problem):
    with pytest.raises(UserError) as error:
        render("chatml", messages)
    assert str(error.value).startswith(f"workload.template: cannot render the conversation: {problem}")
    assert "\n" not in str(error.value)


@pytest.mark.parametrize("template", BUILTIN_TEMPLATES + ("none",))
def test_every_example_prompt_renders(template):
    records = read_prompt_file(EXAMPLE).records
    texts = [render(template, record.messages, system_prompt="You are a helpful assistant.") for record in records]
    assert len(texts) == len(records)
    for record, text in zip(records, texts):
        assert record.messages[-1][1].strip() in text  # the question being asked is always in the prompt
