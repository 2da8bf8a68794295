"""Control-token removal (MiniMax's sentinels): the same result for any chunking, prose untouched."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from services.llm_gateway.core.markers import MINIMAX, MarkerFilter

TEXT = "Hello]~b]ai ]<]minimax[>[MiniMax says [e~[hi] and [x] ]<]start of image[>[done ]<]not closed"
CLEAN = "Helloai MiniMax says hi] and [x] done ]<]not closed"


def streamed(text: str, cuts: list[int]) -> str:
    f = MarkerFilter(MINIMAX)
    bounds = sorted({0, len(text), *(c % (len(text) + 1) for c in cuts)})
    return "".join(f.feed(text[a:b]) for a, b in zip(bounds, bounds[1:])) + f.finish()


def test_whole_text():
    assert MarkerFilter(MINIMAX).clean(TEXT) == CLEAN


@given(st.lists(st.integers(min_value=0, max_value=200), max_size=30))
def test_any_chunking_gives_the_same_text(cuts):
    assert streamed(TEXT, cuts) == CLEAN


@given(st.text(alphabet="ab]<[>~!e ", max_size=60), st.lists(st.integers(min_value=0, max_value=80), max_size=10))
def test_streamed_equals_whole_for_arbitrary_bracket_soup(text, cuts):
    assert streamed(text, cuts) == MarkerFilter(MINIMAX).clean(text)
