"""Edits: an executor's answer -> the full new text of each changed scope file, or named failures
(types: the data and the format the model is told; parse: answer -> edits; apply: edits -> files)."""

from agent.search.edits.apply import apply_edits, extract_and_apply, format_failures
from agent.search.edits.parse import parse_edits
from agent.search.edits.types import EDIT_FORMAT_HELP, EditFailure, EditResult, ParsedEdits, SearchReplace, WholeFile

__all__ = ["EDIT_FORMAT_HELP", "EditFailure", "EditResult", "ParsedEdits", "SearchReplace", "WholeFile",
           "apply_edits", "extract_and_apply", "format_failures", "parse_edits"]
