"""Text cells of the CSV exports are safe to open in a spreadsheet, and the rule is undone exactly."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.core.csvcells import FORMULA_STARTS, spreadsheet_text, stored_text


@pytest.mark.parametrize("first", sorted(FORMULA_STARTS | {"'"}))
def test_a_cell_a_spreadsheet_would_run_gets_an_apostrophe(first):
    text = f'{first}HYPERLINK("http://evil")'
    assert spreadsheet_text(text) == "'" + text
    assert stored_text(spreadsheet_text(text)) == text


@pytest.mark.parametrize("text", ["", "Parks", "1 + 1", "a=b", " =1", "Ünïcödé — 東京", "0.5", "x-y"])
def test_any_other_text_is_unchanged(text):
    assert spreadsheet_text(text) == text


def test_every_first_character_of_the_owasp_list_is_covered():
    # OWASP "CSV Injection": = + - @, tab (0x09) and carriage return (0x0D).
    assert {"=", "+", "-", "@", "\t", "\r"} <= FORMULA_STARTS


@settings(max_examples=300, derandomize=True)
@given(st.text())
def test_the_rule_is_undone_exactly_and_never_leaves_a_formula_first(text):
    cell = spreadsheet_text(text)
    assert stored_text(cell) == text
    assert not cell or cell[0] not in FORMULA_STARTS
