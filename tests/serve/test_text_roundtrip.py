r"""Any text a JSON client can send is written out as valid UTF-8 and read back as it was sent.

A JSON string may hold any code point, lone surrogates included (``"\ud800"``),
which no UTF-8 text can: the server's JSON (:func:`~llm_envs.serve.protocol.dumps`,
every reply and socket message) and its records file write them as escapes.
"""

from __future__ import annotations

import json
import tempfile

from hypothesis import given
from hypothesis import strategies as st

from llm_envs.serve.protocol import dumps
from llm_envs.serve.store import EpisodeStore

# Any code point, surrogates often (hypothesis's text strategies never draw them).
ANY_TEXT = st.lists(
    st.one_of(st.integers(0xD800, 0xDFFF), st.integers(0, 0x10FFFF)), max_size=12
).map(lambda points: "".join(map(chr, points)))


def sent(text: str) -> str:
    """What a JSON client delivers of ``text`` (two adjacent surrogates that pair become one)."""
    return json.loads(json.dumps(text))


@given(ANY_TEXT)
def test_dumps_is_utf8_and_reads_back_what_was_sent(text):
    value = {"text": sent(text), sent(text): [sent(text)]}
    written = dumps(value)
    written.encode("utf-8")  # never raises: a reply or a socket message can carry it
    assert json.loads(written) == value


@given(st.lists(ANY_TEXT, min_size=1, max_size=4))
def test_the_store_reads_back_what_was_sent(texts):
    with tempfile.TemporaryDirectory() as folder:
        store = EpisodeStore(folder)
        for number, text in enumerate(texts):
            store.append({"id": f"e{number}", "record": {"turns": [{"text": sent(text)}]}})
        again = EpisodeStore(folder)  # from the file, as after a restart
        assert again.path is not None
        # One line per record (split at newlines only: U+2028 or U+0085 may sit in a text).
        lines = again.path.read_bytes().decode("utf-8").split("\n")
        assert len(lines) == len(texts) + 1 and lines[-1] == ""
        for number, text in enumerate(texts):
            assert again.get(f"e{number}") == store.get(f"e{number}")
            assert again.get(f"e{number}")["record"]["turns"][0]["text"] == sent(text)
