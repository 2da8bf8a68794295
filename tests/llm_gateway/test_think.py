"""The think splitter (spec §2.8 and the think cases of §5.1), including chunking invariance."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from services.llm_gateway.core import think
from services.llm_gateway.core.think import TAG, FIELD, THINK_DELTA, THINK_END, THINK_START, TEXT, ThinkFormat, ThinkSplitter

TAGS = ThinkFormat(mode=TAG)
AUTO = ThinkFormat()
IMPLICIT = ThinkFormat(mode=TAG, implicit_open=True)
THINKING = ThinkFormat(mode=TAG, tags=(("<think>", "</think>"), ("<thinking>", "</thinking>")))


def run(chunks, fmt=AUTO, with_reasoning=True, field="content"):
    splitter = ThinkSplitter(fmt, with_reasoning=with_reasoning)
    events = []
    for chunk in chunks:
        if isinstance(chunk, tuple):
            kind, text = chunk
        else:
            kind, text = field, chunk
        events += splitter.feed_reasoning(text) if kind == "reasoning" else splitter.feed_content(text)
    events += splitter.finish()
    return think.coalesce(events)


def S():
    return (THINK_START, "")


def D(text):
    return (THINK_DELTA, text)


def E(truncated=False):
    return (THINK_END, "truncated" if truncated else "")


def T(text):
    return (TEXT, text)


# -- tag mode ----------------------------------------------------------------------------------------
def test_full_block_in_one_chunk():
    assert run(["<think>R</think>A"]) == [S(), D("R"), E(), T("A")]


def test_one_character_per_chunk():
    text = "<think>reason</think>answer"
    assert run(list(text)) == [S(), D("reason"), E(), T("answer")]


@pytest.mark.parametrize("text", ["<think>R</think>A", "x <think>R</think>A", "<think>R1</think>A<think>R2</think>B"])
def test_tag_split_at_every_offset(text):
    expected = run([text], TAGS)
    for cut in range(1, len(text)):
        assert run([text[:cut], text[cut:]], TAGS) == expected, cut


def test_two_blocks_and_answer_think_answer():
    assert run(["<think>R1</think>A<think>R2</think>B"]) == [S(), D("R1"), E(), T("A"), S(), D("R2"), E(), T("B")]
    assert run(["A <think>R</think> B"], TAGS) == [T("A "), S(), D("R"), E(), T("B")]


def test_nested_and_duplicated_tags():
    assert run(["<think><think>x</think></think>A"]) == [S(), D("x"), E(), T("A")]


def test_stray_close_without_open_is_dropped():
    assert run(["A", "</think>", "B"], TAGS) == [T("AB")]


def test_stray_close_with_implicit_open_ends_reasoning():
    assert run(["Reasoning here", "</think>", "Answer"], IMPLICIT) == [S(), D("Reasoning here"), E(), T("Answer")]


def test_empty_and_whitespace_only_blocks_produce_no_think_events():
    assert run(["<think></think>", "Answer"]) == [T("Answer")]
    assert run(["<think>\n\n</think>\n\n", "Answer"]) == [T("Answer")]
    assert run(["<think>", " ", "\n", "</think>", "Answer"]) == [T("Answer")]


@pytest.mark.parametrize("chunks", [["<think>R1", " R2"], ["<think>R1 R", "2"]])
def test_unclosed_block_at_eof_is_truncated_and_not_the_answer(chunks):
    splitter = ThinkSplitter(AUTO)
    events = []
    for chunk in chunks:
        events += splitter.feed_content(chunk)
    events += splitter.finish()
    assert think.coalesce(events) == [S(), D("R1 R2"), E(truncated=True)]
    assert splitter.reasoning_truncated
    assert think.split("<think>R1 R2").text == ""


def test_thinking_variant_when_configured_and_not_by_default():
    assert run(["<thinking>R</thinking>A"], THINKING) == [S(), D("R"), E(), T("A")]
    assert run(["<thinking>R</thinking>A"], AUTO) == [T("<thinking>R</thinking>A")]


def test_uppercase_is_not_a_tag():
    assert run(["<THINK>R</THINK>A"], TAGS) == [T("<THINK>R</THINK>A")]


def test_crlf_bom_and_leading_newlines_before_the_tag():
    assert run(["\ufeff\r\n\n<think>R</think>\r\nA"]) == [S(), D("R"), E(), T("A")]


def test_cjk_and_emoji_across_chunks():
    text = "<think>思考🙂中</think>答案🎉"
    expected = [S(), D("思考🙂中"), E(), T("答案🎉")]
    for cut in range(1, len(text)):
        assert run([text[:cut], text[cut:]]) == expected


def test_partial_tag_at_eof_is_flushed_as_text():
    assert run(["Answer <thi"], TAGS) == [T("Answer <thi")]


def test_repeated_identical_deltas_are_real_content():
    assert run(["ha", "ha", "!"]) == [T("haha!")]
    assert run([("reasoning", "hm"), ("reasoning", "hm"), "ok", "ok"]) == [S(), D("hmhm"), E(), T("okok")]


# -- field mode ----------------------------------------------------------------------------------------
def test_reasoning_field_then_content():
    assert run([("reasoning", "R1"), ("reasoning", " R2"), "A"]) == [S(), D("R1 R2"), E(), T("A")]


def test_reasoning_after_content_starts_a_second_block():
    assert run([("reasoning", "R1"), "A", ("reasoning", "R2"), "B"]) == [S(), D("R1"), E(), T("A"), S(), D("R2"), E(), T("B")]


def test_implicit_open_family_whose_server_splits_reasoning_off_keeps_its_answer():
    # vLLM's reasoning parsers send an R1 distill's or QwQ's reasoning as a field: the content is the answer.
    assert run([("reasoning", "R"), "A"], IMPLICIT) == [S(), D("R"), E(), T("A")]
    assert think.split("A", "R", IMPLICIT).text == "A"
    assert run(["R", ("reasoning", "more"), "</think>A"], IMPLICIT) == [S(), D("Rmore"), E(), T("A")]


def test_field_reasoning_between_tag_blocks_is_closed_when_content_resumes():
    assert run(["<think>a</think>b", ("reasoning", "R"), "c"], TAGS) == [S(), D("a"), E(), T("b"), S(), D("R"), E(), T("c")]


def test_empty_reasoning_and_content_deltas_are_ignored():
    assert run([("reasoning", ""), "", ("reasoning", "R"), "", "A"]) == [S(), D("R"), E(), T("A")]


def test_reasoning_only_is_truncated_at_the_end():
    assert run([("reasoning", "R")]) == [S(), D("R"), E(truncated=True)]


def test_literal_tag_in_content_stays_text_when_the_provider_uses_reasoning_fields():
    assert run([("reasoning", "R"), "Use the ", "<think>", " tag to mark thoughts."]) == [
        S(), D("R"), E(), T("Use the <think> tag to mark thoughts.")]
    assert run(["<think>x</think>"], ThinkFormat(mode=FIELD)) == [T("<think>x</think>")]


def test_auto_mode_keeps_a_literal_tag_that_does_not_open_the_answer():
    assert run(["Use the ", "<think>", " tag."]) == [T("Use the <think> tag.")]


def test_with_reasoning_false_suppresses_think_events_but_still_hides_reasoning():
    assert run(["<think>R</think>A"], with_reasoning=False) == [T("A")]
    assert run([("reasoning", "R"), "A"], with_reasoning=False) == [T("A")]


def test_non_streaming_split_returns_text_and_reasoning_separately():
    result = think.split("<think>plan</think>The answer", None)
    assert (result.text, result.reasoning, result.reasoning_truncated) == ("The answer", "plan", False)
    result = think.split("Answer", "field reasoning")
    assert (result.text, result.reasoning) == ("Answer", "field reasoning")
    assert think.split("<think>R</think>A", None, with_reasoning=False).reasoning == ""


# -- chunking invariance (property test) -----------------------------------------------------------
CORPUS = [
    "<think>R</think>A", "<think>\n\n</think>\n\nAnswer", "Plain answer without tags", "<think>R1</think>A<think>R2</think>B",
    "<think>unclosed reasoning", "A</think>B", "<think><think>x</think></think>y", "Use the <think> tag",
    "\ufeff\n<think>bom</think>ok", "<think>思考🙂</think>答案", "<thinking>R</thinking>A", "<THINK>x</THINK>",
    "<think>a<b</think>c<d", "<<think>>x", "<think></think>", "", "   ", "<think> </think> ", "x<", "<", "</", "<think",
    "<think>R</thi", "a</think", "ha ha ha", "<think>ha</think>ha", "<think>R</think>\r\nA\r\n", "A <think>B</think> C",
    "<think>1</think><think>2</think>3", "text <think>t</think>", "<think>multi\nline\nreasoning</think>\nfinal",
]


def chunked(text: str, cuts: list[int]) -> list[str]:
    points = sorted({c % (len(text) + 1) for c in cuts})
    pieces, last = [], 0
    for point in points:
        pieces.append(text[last:point])
        last = point
    pieces.append(text[last:])
    return pieces


@pytest.mark.parametrize("fmt", [AUTO, TAGS, IMPLICIT, THINKING], ids=["auto", "tag", "implicit", "thinking"])
@given(index=st.integers(0, len(CORPUS) - 1), cuts=st.lists(st.integers(0, 200), max_size=12), with_reasoning=st.booleans())
@settings(max_examples=150, deadline=None)
def test_any_chunking_yields_the_same_events_as_the_whole_text(fmt, index, cuts, with_reasoning):
    text = CORPUS[index]
    assert run(chunked(text, cuts), fmt, with_reasoning) == run([text], fmt, with_reasoning)


@given(text=st.text(alphabet=st.sampled_from(list("<>/thinkTHINK ab\n思🙂")), max_size=60),
       cuts=st.lists(st.integers(0, 100), max_size=10))
@settings(max_examples=300, deadline=None)
def test_any_chunking_of_random_tag_soup_is_stable_and_matches_split(text, cuts):
    whole = run([text], TAGS)
    assert run(chunked(text, cuts), TAGS) == whole
    joined_text, joined_reasoning = think.join(whole)
    result = think.split(text, None, TAGS)
    assert (result.text, result.reasoning) == (joined_text, joined_reasoning)


@given(segments=st.lists(st.tuples(st.sampled_from(["reasoning", "content"]), st.text(max_size=12)), max_size=8),
       cuts=st.lists(st.integers(0, 50), max_size=6))
@settings(max_examples=200, deadline=None)
def test_field_mode_rechunking_within_segments_is_stable(segments, cuts):
    whole = run(segments, ThinkFormat(mode=FIELD))
    rechunked = [(kind, piece) for kind, text in segments for piece in chunked(text, cuts)]
    assert run(rechunked, ThinkFormat(mode=FIELD)) == whole
