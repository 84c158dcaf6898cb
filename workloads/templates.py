"""Chat messages to prompt text, in the format a model family was fine-tuned on.

A prompt-file benchmark should prefill what the model would really see in production, markers
included, so each builtin template reproduces its family's reference format byte for byte:

- `llama-2`: Meta's `Llama.chat_completion` (llama/generation.py): content stripped, the system
  text folded into the first user turn inside `<<SYS>>`, one `<s>...</s>` per exchange.
- `llama-3`: Meta's `ChatFormat.encode_dialog_prompt` (llama3/tokenizer.py): content stripped,
  ending with an empty assistant header.
- `mistral`: the `chat_template` of Mistral-7B-Instruct v0.1/v0.2's tokenizer_config.json
  (content kept as is, no space around `</s>`); it has no system slot, so the system text is put
  before the first user message with a blank line, as Mistral's later templates do.
- `chatml`: `<|im_start|>role\\ncontent<|im_end|>\\n` per message, then an open assistant turn.
- `chat`: the tokenizer's own `chat_template`; `none`: the bare contents, no markers.
"""

from typing import Callable, Dict, List, Optional, Sequence, Tuple

from harness.errors import UserError, known_names

Message = Tuple[str, str]  # (role, content); role in ROLES
ROLES = ("system", "user", "assistant")
BUILTIN_TEMPLATES = ("llama-2", "llama-3", "mistral", "chatml")
TEMPLATES = ("chat", "none") + BUILTIN_TEMPLATES

# Whether the rendered text opens with the model's BOS marker (None: depends on the tokenizer).
_STARTS_WITH_BOS: Dict[str, Optional[bool]] = {
    "llama-2": True, "llama-3": True, "mistral": True, "chatml": False, "none": False, "chat": None,
}


def render(template: str, messages: Sequence[Message], system_prompt: Optional[str] = None,
           tokenizer=None) -> str:
    """The prompt text asking for the assistant turn that follows `messages`.

    `system_prompt` becomes a leading system message when the conversation has none of its own
    (a conversation's own system message wins). `tokenizer` is needed only by `chat`.
    """
    check_template(template)
    problem = conversation_problem([role for role, _ in messages])
    if problem:
        raise UserError(f"workload.template: cannot render the conversation: {problem}")
    system, turns = _split_system(messages, system_prompt)
    if template == "chat":
        return _render_chat(tokenizer, system, turns)
    return _RENDERERS[template](system, turns)


def starts_with_bos(template: str) -> Optional[bool]:
    """Whether `render(template, ...)` text already begins with the BOS marker.

    True for llama-2, llama-3 and mistral: tokenize their text with `add_special_tokens=False`, or
    the tokenizer adds a second BOS and every prompt is one token longer than the model expects.
    False for chatml and none: let the tokenizer add its BOS as usual. None for chat: it depends
    on the tokenizer's template; check whether the text starts with `tokenizer.bos_token`.
    """
    check_template(template)
    return _STARTS_WITH_BOS[template]


def conversation_problem(roles: Sequence[str]) -> Optional[str]:
    """What is wrong with this order of roles (indices 0-based), or None when it can be rendered.

    An optional leading system message, then user and assistant alternating, ending with user.
    """
    if not roles:
        return "the conversation has no messages"
    for index, role in enumerate(roles):
        if role not in ROLES:
            return f"messages[{index}] has unknown role {role!r} (allowed: {', '.join(ROLES)})"
    offset = 1 if roles[0] == "system" else 0
    for index in range(offset, len(roles)):
        expected = "user" if (index - offset) % 2 == 0 else "assistant"
        if roles[index] != expected:
            return (f"messages[{index}] is from {roles[index]!r} where {expected!r} was expected (after an "
                    "optional leading system message, roles alternate user, assistant, user, ...)")
    if roles[-1] != "user":
        return f"the last message is from {roles[-1]!r}; a prompt must end with a user message"
    return None


def check_template(template: str) -> None:
    if template not in TEMPLATES:
        raise UserError(f"workload.template: unknown template {template!r}" + known_names(template, list(TEMPLATES)))


def with_system(messages: Sequence[Message], system_prompt: Optional[str]) -> Tuple[Message, ...]:
    """The conversation as a server that applies its own chat template is sent it: `system_prompt` leading, as
    `render` adds it, unless the conversation has a system message of its own."""
    system, turns = _split_system(messages, system_prompt)
    return tuple(([("system", system)] if system is not None else []) + turns)


def _split_system(messages: Sequence[Message], system_prompt: Optional[str]) -> Tuple[Optional[str], List[Message]]:
    if messages[0][0] == "system":
        return messages[0][1], list(messages[1:])
    return (system_prompt or None), list(messages)


def _llama2(system: Optional[str], turns: List[Message]) -> str:
    contents = [content for _, content in turns]
    if system is not None:
        contents[0] = f"<<SYS>>\n{system}\n<</SYS>>\n\n{contents[0]}"
    exchanges = zip(contents[0::2], contents[1::2])
    text = "".join(f"<s>[INST] {user.strip()} [/INST] {answer.strip()} </s>" for user, answer in exchanges)
    return text + f"<s>[INST] {contents[-1].strip()} [/INST]"


def _llama3_header(role: str) -> str:
    return f"<|start_header_id|>{role}<|end_header_id|>\n\n"


def _llama3(system: Optional[str], turns: List[Message]) -> str:
    messages = ([("system", system)] if system is not None else []) + turns
    body = "".join(_llama3_header(role) + content.strip() + "<|eot_id|>" for role, content in messages)
    return "<|begin_of_text|>" + body + _llama3_header("assistant")


def _mistral(system: Optional[str], turns: List[Message]) -> str:
    contents = [content for _, content in turns]
    if system is not None:
        contents[0] = f"{system}\n\n{contents[0]}"
    parts = [f"[INST] {text} [/INST]" if role == "user" else f"{text}</s>"
             for (role, _), text in zip(turns, contents)]
    return "<s>" + "".join(parts)


def _chatml(system: Optional[str], turns: List[Message]) -> str:
    messages = ([("system", system)] if system is not None else []) + turns
    body = "".join(f"<|im_start|>{role}\n{content}<|im_end|>\n" for role, content in messages)
    return body + "<|im_start|>assistant\n"


def _none(system: Optional[str], turns: List[Message]) -> str:
    contents = ([system] if system is not None else []) + [content for _, content in turns]
    return "\n\n".join(contents)


def _render_chat(tokenizer, system: Optional[str], turns: List[Message]) -> str:
    name = _tokenizer_name(tokenizer)
    if tokenizer is None or not getattr(tokenizer, "chat_template", None):
        has = "no tokenizer was given" if tokenizer is None else f"{name} has none"
        raise UserError(f"workload.template: 'chat' needs a tokenizer with a chat template; {has} "
                        f"(use one of {', '.join(BUILTIN_TEMPLATES)}, none)")
    messages = ([("system", system)] if system is not None else []) + turns
    conversation = [{"role": role, "content": content} for role, content in messages]
    from jinja2 import TemplateError

    try:
        return tokenizer.apply_chat_template(conversation, tokenize=False, add_generation_prompt=True)
    except TemplateError as error:  # the template's own raise_exception: e.g. it takes no system message
        message = " ".join(str(error).split())
        raise UserError(f"workload.template: {name}'s chat template rejected the conversation: {message}") from None


def _tokenizer_name(tokenizer) -> str:
    # An in-memory tokenizer has an empty name_or_path; its class name still says what it is.
    return getattr(tokenizer, "name_or_path", "") or type(tokenizer).__name__


_RENDERERS: Dict[str, Callable[[Optional[str], List[Message]], str]] = {
    "llama-2": _llama2, "llama-3": _llama3, "mistral": _mistral, "chatml": _chatml, "none": _none,
}
