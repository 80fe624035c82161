"""Multi-turn completions for TRL: env tokens between turns, masks, and the text fallback.

Every case runs with the tiny model's ChatML template and with SmolLM2's
template (which adds a default system message when a chat has none).
"""

from __future__ import annotations

import copy

import pytest

from baselines.grpo.assembly import (
    ENV_LOGPROB,
    SampledTurn,
    TemplateNotPrefixStableError,
    assemble_completion,
    closing_tokens,
    env_tokens_between,
    format_completion,
    mask_runs,
)
from baselines.samplers import ChatRenderer

pytest.importorskip("transformers")

SYSTEM = {"role": "system", "content": "You are Agent 0. Answer in <a></a> tags."}
QUESTION = {"role": "user", "content": "What is 2 + 2?"}


@pytest.fixture(scope="module", params=["tiny", "smollm2"])
def tokenizer(request, tiny_model_dir):
    from transformers import AutoTokenizer

    if request.param == "tiny":
        return AutoTokenizer.from_pretrained(tiny_model_dir)
    return AutoTokenizer.from_pretrained(request.getfixturevalue("smollm2_dir"))


def encode(tok, text: str) -> list[int]:
    return tok.encode(text, add_special_tokens=False)


def special(tok, name: str) -> int:
    return tok.convert_tokens_to_ids(name)


def text_of(tok, messages, generation=True) -> str:
    return tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=generation)


def decode(tok, ids) -> str:
    return tok.decode(ids, skip_special_tokens=False, clean_up_tokenization_spaces=False)


def turn(tok, messages, action, text, stop_reason="eos", trained=True) -> SampledTurn:
    return SampledTurn(
        messages,
        ChatRenderer(tok)(messages),
        action,
        [-0.5] * len(action),
        text,
        stop_reason,
        trained,
    )


def follow_up(messages, answer: str, reply: str = "Are you sure?"):
    return [*messages, {"role": "assistant", "content": answer}, {"role": "user", "content": reply}]


@pytest.mark.parametrize("chat", [[SYSTEM, QUESTION], [QUESTION]], ids=["system", "no-system"])
@pytest.mark.slow
def test_a_sample_ending_in_end_of_turn_extends_the_next_prompt_token_for_token(tokenizer, chat):
    tok = tokenizer
    first = turn(tok, chat, [*encode(tok, "<a>4</a>"), special(tok, "<|im_end|>")], "<a>4</a>")
    nxt = follow_up(chat, "<a>4</a>")
    delta = env_tokens_between(tok, first, nxt, ChatRenderer(tok)(nxt))
    assert delta.method == "tokens"
    assert first.prompt_ids + first.action_ids + delta.tokens == ChatRenderer(tok)(nxt)
    assert decode(tok, delta.tokens).startswith("\n<|im_start|>user\nAre you sure?")


@pytest.mark.slow
def test_a_sample_cut_at_a_stop_string_gets_the_templates_end_of_turn_as_env_tokens(tokenizer):
    tok = tokenizer
    chat = [SYSTEM, QUESTION]
    first = turn(tok, chat, encode(tok, "<a>4</a>"), "<a>4</a>", stop_reason="stop")
    nxt = follow_up(chat, "<a>4</a>")
    delta = env_tokens_between(tok, first, nxt, ChatRenderer(tok)(nxt))
    assert delta.method in ("tokens", "text")
    assert decode(tok, delta.tokens).startswith("<|im_end|>")
    assert decode(tok, first.prompt_ids + first.action_ids + delta.tokens) == text_of(tok, nxt)


@pytest.mark.slow
def test_tokens_that_are_not_how_the_tokenizer_writes_their_text_fall_back_to_text(tokenizer):
    tok = tokenizer
    chat = [SYSTEM, QUESTION]
    answer = "The answer is <a>4</a>"
    # One token per character: the same text, but not the tokenizer's own encoding of it.
    action = [t for ch in answer for t in encode(tok, ch)]
    assert action != encode(tok, answer)
    action.append(special(tok, "<|im_end|>"))
    first = turn(tok, chat, action, answer)
    nxt = follow_up(chat, answer)
    delta = env_tokens_between(tok, first, nxt, ChatRenderer(tok)(nxt))
    assert delta.method == "text"
    # The sampled tokens stay as sampled; the text of the whole sequence is the next prompt's.
    assert decode(tok, first.prompt_ids + first.action_ids + delta.tokens) == text_of(tok, nxt)
    assert decode(tok, delta.tokens).startswith("\n<|im_start|>user")  # no second <|im_end|>


@pytest.mark.slow
def test_a_sampled_eos_other_than_the_templates_end_of_turn_is_kept_and_the_template_follows(
    tokenizer,
):
    tok = tokenizer
    chat = [SYSTEM, QUESTION]
    eos = frozenset({special(tok, "<|endoftext|>"), special(tok, "<|im_end|>")})
    first = turn(tok, chat, [*encode(tok, "<a>4</a>"), special(tok, "<|endoftext|>")], "<a>4</a>")
    nxt = follow_up(chat, "<a>4</a>")
    delta = env_tokens_between(tok, first, nxt, ChatRenderer(tok)(nxt), eos_token_ids=eos)
    assert delta.method == "text"
    assert decode(tok, delta.tokens).startswith("<|im_end|>\n<|im_start|>user")
    prompt_text = text_of(tok, chat)
    assert decode(tok, first.prompt_ids + first.action_ids + delta.tokens) == (
        prompt_text + "<a>4</a><|endoftext|>" + text_of(tok, nxt)[len(prompt_text + "<a>4</a>") :]
    )


@pytest.mark.slow
def test_text_a_final_token_carried_past_the_stop_string_stays_and_is_counted(tokenizer):
    tok = tokenizer
    chat = [SYSTEM, QUESTION]
    # The sampler's last token completed "</a>" and carried two newlines; the env saw "<a>4</a>".
    first = turn(tok, chat, encode(tok, "<a>4</a>\n\n"), "<a>4</a>", stop_reason="stop")
    nxt = follow_up(chat, "<a>4</a>")
    delta = env_tokens_between(tok, first, nxt, ChatRenderer(tok)(nxt))
    assert delta.method == "overhang"
    prompt_text = text_of(tok, chat)
    expected = prompt_text + "<a>4</a>\n\n" + text_of(tok, nxt)[len(prompt_text + "<a>4</a>") :]
    assert decode(tok, first.prompt_ids + first.action_ids + delta.tokens) == expected


@pytest.mark.slow
def test_a_template_that_rewrites_earlier_turns_raises_and_names_the_importance_sampling_trainer(
    tokenizer,
):
    tok = copy.deepcopy(tokenizer)
    # Shows only the last user message, like templates that drop earlier turns.
    tok.chat_template = (
        "{{ '<|im_start|>user\n' + messages[-1]['content'] + '<|im_end|>\n' }}"
        "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
    )
    chat = [SYSTEM, QUESTION]
    first = turn(tok, chat, [*encode(tok, "<a>4</a>"), special(tok, "<|im_end|>")], "<a>4</a>")
    nxt = follow_up(chat, "<a>4</a>")
    with pytest.raises(TemplateNotPrefixStableError, match=r"baselines\.is_trainer"):
        env_tokens_between(tok, first, nxt, ChatRenderer(tok)(nxt))


@pytest.mark.parametrize(
    ("action", "stop_reason", "closes"),
    [
        ("<a>4</a>", "stop", True),  # stopped on a stop string: the template's end of turn
        ("<a>4</a><|im_end|>", "stop", False),  # the sample already ended its turn
        ("<a>4</a><|im_end|>", "eos", False),
        ("<a>4", "length", False),  # truncated: TRL must still see it as truncated
    ],
)
@pytest.mark.slow
def test_closing_tokens(tokenizer, action, stop_reason, closes):
    tok = tokenizer
    ids = encode(tok, action)
    got = closing_tokens(tok, turn(tok, [SYSTEM, QUESTION], ids, "<a>4</a>", stop_reason))
    assert list(got) == ([special(tok, "<|im_end|>")] if closes else [])


@pytest.mark.slow
def test_assemble_three_turns_masks_env_tokens_and_untrained_turns(tokenizer):
    tok = tokenizer
    render = ChatRenderer(tok)
    chats, turns = [[SYSTEM, QUESTION]], []
    answers = ["<a>5</a>", "<a>4</a>", "<a>4, sure</a>"]
    for k, answer in enumerate(answers):
        action = encode(tok, answer) + ([special(tok, "<|im_end|>")] if k == 0 else [])
        turns.append(
            turn(tok, chats[-1], action, answer, "eos" if k == 0 else "stop", trained=k != 1)
        )
        chats.append(follow_up(chats[-1], answer, f"Round {k + 2}: check again."))

    done = assemble_completion(tok, turns)

    assert done.prompt_ids == list(render(chats[0]))
    n = len(done.completion_ids)
    assert len(done.logprobs) == len(done.env_mask) == n
    # Walk the completion: action, env tokens, action, ..., closing.
    at = 0
    for k, t in enumerate(turns):
        # Every action starts right where the sequence equals that turn's prompt.
        assert done.prompt_ids + done.completion_ids[:at] == list(t.prompt_ids)
        span = slice(at, at + len(t.action_ids))
        assert done.completion_ids[span] == list(t.action_ids)
        assert done.logprobs[span] == [-0.5] * len(t.action_ids)
        assert done.env_mask[span] == [1 if t.trained else 0] * len(t.action_ids)
        at = span.stop
        if k + 1 < len(turns):
            following = len(turns[k + 1].prompt_ids) - len(t.prompt_ids) - len(t.action_ids)
        else:
            following = n - at
            assert decode(tok, done.completion_ids[at:]) == "<|im_end|>"  # closing
        assert done.env_mask[at : at + following] == [0] * following
        assert done.logprobs[at : at + following] == [ENV_LOGPROB] * following
        at += following
    assert at == n
    assert done.num_text_deltas == 0


@pytest.mark.slow
def test_mask_runs_reads_back_the_trained_and_masked_runs(tokenizer):
    tok = tokenizer
    chat = [SYSTEM, QUESTION]
    first = [*encode(tok, "<a>5</a>"), special(tok, "<|im_end|>")]
    second = encode(tok, "<a>4</a>")
    turns = [
        turn(tok, chat, first, "<a>5</a>", trained=False),
        turn(tok, follow_up(chat, "<a>5</a>"), second, "<a>4</a>", "stop"),
    ]
    done = assemble_completion(tok, turns)

    runs = mask_runs(tok, done.completion_ids, done.env_mask)
    # attempt 1 (untrained) and the follow-up question are one masked run, then the
    # trained answer, then the closing end of turn
    assert [mask for mask, _, _ in runs] == [0, 1, 0]
    assert sum(size for _, size, _ in runs) == len(done.completion_ids)
    assert runs[0][2].startswith("<a>5</a><|im_end|>") and "Are you sure?" in runs[0][2]
    assert runs[1][2] == "<a>4</a>" and runs[2][2] == "<|im_end|>"
    assert "".join(text for _, _, text in runs) == decode(tok, done.completion_ids)
    with pytest.raises(ValueError, match="has 2 tokens but env_mask 1"):
        mask_runs(tok, [1, 2], [1])
    assert mask_runs(tok, [], []) == []

    text = format_completion(tok, done.prompt_ids, done.completion_ids, done.env_mask)
    headers = [line for line in text.splitlines() if line.startswith("--- ")]
    assert headers == [
        f"--- prompt, {len(done.prompt_ids)} tokens ---",
        f"--- env_mask 0 (masked: context only), {runs[0][1]} tokens ---",
        f"--- env_mask 1 (trained), {runs[1][1]} tokens ---",
        f"--- env_mask 0 (masked: context only), {runs[2][1]} tokens ---",
    ]
    assert "What is 2 + 2?" in text
    tail = format_completion(tok, done.prompt_ids, [], [], prompt_chars=10)
    prompt = decode(tok, done.prompt_ids)
    assert tail.splitlines()[0].endswith("tokens (its end) ---") and tail.endswith(prompt[-10:])


@pytest.mark.slow
def test_assemble_without_turns_is_an_error(tokenizer):
    with pytest.raises(ValueError, match="at least one turn"):
        assemble_completion(tokenizer, [])


def test_sampled_turn_checks_one_logprob_per_token():
    with pytest.raises(ValueError, match="one logprob per action token"):
        SampledTurn([QUESTION], [1, 2], [3, 4], [0.0], "x")
