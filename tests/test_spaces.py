"""The text spaces: what they accept, and that sampling is cheap and seeded."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from llm_envs.spaces import SAMPLE_FRAGMENTS, ChatMessages, UnicodeText, chat_observation_space


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("", True),
        ("plain", True),
        ("ü😀中\x00\u200b", True),
        ("\ud800", False),  # lone surrogate: not encodable, no tokenizer can carry it
        ("x" * 11, False),  # over max_length
        (b"bytes", False),
        (None, False),
        (5, False),
    ],
)
def test_unicode_text_contains(value, expected):
    assert UnicodeText(max_length=10).contains(value) is expected


@given(st.text())
def test_unicode_text_accepts_every_encodable_string(text):
    assert UnicodeText().contains(text)


def test_unicode_text_samples_are_short_seeded_and_contained():
    a, b = UnicodeText(sample_max_length=32), UnicodeText(sample_max_length=32)
    a.seed(3)
    b.seed(3)
    samples = [a.sample() for _ in range(200)]
    assert samples == [b.sample() for _ in range(200)]
    assert all(a.contains(s) and len(s) <= 32 for s in samples)
    assert any("<" in s for s in samples), "samples should mix in tag fragments"
    assert "" in samples or min(map(len, samples)) < 5


def test_unicode_text_mixes_in_the_fragments_it_is_given():
    space = UnicodeText(sample_max_length=32, fragments=["<x>", "</x>"])
    space.seed(3)
    samples = [space.sample() for _ in range(200)]
    assert any("<x>" in s for s in samples)
    assert not any("<think>" in s or "```" in s for s in samples)  # not the default ones
    assert UnicodeText().fragments == SAMPLE_FRAGMENTS
    assert ChatMessages(fragments=("<x>",)).content.fragments == ("<x>",)
    assert chat_observation_space(["<x>"])["messages"].content.fragments == ("<x>",)
    with pytest.raises(ValueError, match="at least one string"):
        UnicodeText(fragments=())
    with pytest.raises(TypeError, match="a sequence of strings"):
        UnicodeText(fragments="<x>")
    with pytest.raises(TypeError, match="a sequence of strings"):
        UnicodeText(fragments=["<x>", 3])  # type: ignore[list-item]


def test_unicode_text_rejects_bad_arguments():
    with pytest.raises(ValueError, match="max_length must be an int >= 0, got -1"):
        UnicodeText(max_length=-1)
    with pytest.raises(TypeError, match=r"max_length must be an int >= 0, got 1000000.0"):
        UnicodeText(max_length=1e6)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"sample_max_length must be an int >= 0, got True"):
        UnicodeText(sample_max_length=True)
    with pytest.raises(TypeError, match=r"max_messages must be an int >= 0, got '5' \(a str\)"):
        ChatMessages(max_messages="5")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="mask"):
        UnicodeText().sample(mask=1)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ([], True),
        ([{"role": "system", "content": ""}, {"role": "user", "content": "hi"}], True),
        ([{"role": "assistant", "content": "ok"}], True),
        ([{"role": "tool", "content": "x"}], False),
        ([{"role": "user"}], False),
        ([{"role": "user", "content": "x", "name": "bob"}], False),
        ([{"role": "user", "content": 3}], False),
        ({"role": "user", "content": "x"}, False),
        ("text", False),
    ],
)
def test_chat_messages_contains(value, expected):
    assert ChatMessages().contains(value) is expected


def test_chat_observation_space_samples_what_it_contains():
    space = chat_observation_space()
    space.seed(0)
    for _ in range(50):
        sample = space.sample()
        assert space.contains(sample)
    assert not space.contains({"observation": []})
    assert ChatMessages() == ChatMessages() and hash(ChatMessages()) == hash(ChatMessages())
