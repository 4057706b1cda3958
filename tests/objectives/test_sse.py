from __future__ import annotations

import pytest

from objectives.sse import MalformedChunk, SSEParser, decode

STREAM = b'data: {"a":1}\n\ndata: {"a":2}\n\n: ping\n\ndata: [DONE]\n\n'


def feed_all(parser: SSEParser, parts: list[bytes]) -> list[bytes]:
    out = [e for part in parts for e in parser.feed(part)]
    return out + parser.close()


def test_whole_stream_in_one_chunk() -> None:
    assert feed_all(SSEParser(), [STREAM]) == [b'{"a":1}', b'{"a":2}', b"[DONE]"]


@pytest.mark.parametrize("cut", range(1, len(STREAM)))
def test_split_anywhere_gives_the_same_events(cut: int) -> None:
    assert feed_all(SSEParser(), [STREAM[:cut], STREAM[cut:]]) == [
        b'{"a":1}',
        b'{"a":2}',
        b"[DONE]",
    ]


def test_byte_by_byte_and_events_complete_at_their_blank_line() -> None:
    p = SSEParser()
    got = [(i, e) for i, byte in enumerate(STREAM) for e in p.feed(bytes([byte]))]
    assert [e for _, e in got] == [b'{"a":1}', b'{"a":2}', b"[DONE]"]
    assert got[0][0] == STREAM.index(b"\n\n") + 1  # dispatched on the blank line's byte


def test_merged_events_crlf_multiline_and_other_fields() -> None:
    raw = b'event: x\r\nid: 7\r\ndata: {"a":\r\ndata:1}\r\n\r\nretry: 5\r\ndata:[DONE]\r\n\r\n'
    assert feed_all(SSEParser(), [raw]) == [b'{"a":\n1}', b"[DONE]"]


def test_last_event_without_blank_line_is_flushed_on_close() -> None:
    p = SSEParser()
    assert p.feed(b'data: {"a":1}\n\ndata: {"b":2}') == [b'{"a":1}']
    assert p.close() == [b'{"b":2}']
    assert p.close() == []


def test_comment_only_and_empty_feed() -> None:
    assert feed_all(SSEParser(), [b"", b": keep-alive\n\n", b"\n\n"]) == []


def test_decode() -> None:
    assert decode(b"[DONE]") is None
    assert decode(b" [DONE] ") is None
    assert decode(b'{"choices":[]}') == {"choices": []}
    for bad in (b"{oops", b"[1,2]", b"", b'"text"'):
        with pytest.raises(MalformedChunk, match="malformed chunk"):
            decode(bad)


def test_fast_path_blank_line_runs_and_non_data_fields() -> None:
    raw = b"data: a\n\n\ndata: b\n\nid: 3\ndata: c\n\ndata:d\n\n: ping\n\ndata: e"
    p = SSEParser()
    assert p.feed(raw) == [b"a", b"b", b"c", b"d"]
    assert p.feed(b"\n\n") == [b"e"]
