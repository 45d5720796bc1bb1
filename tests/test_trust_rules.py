"""The trust screen's one table (inside/pesflow_rules.py): every finding any screen emits names a
rule of RULES, every rule names a family and an observation point, every family has a rule, and
no rule id is emitted that the table does not hold (read from the screens' sources)."""

from __future__ import annotations

import re

from evaluator.trust.findings import FAMILIES, Finding
from evaluator.trust.inside.pesflow_rules import POINTS, RULES
from evaluator.trust.instrument import INSIDE

SOURCES = [*INSIDE.glob("pesflow_*.py"), *INSIDE.parent.glob("*.py")]
RULE_ID = re.compile(r"""["']((?:static|guard|probe|written)\.[a-z_]+)["']""")
FILES = {"probe.json"}  # file names that look like rule ids


def test_every_rule_has_a_family_a_point_and_a_reason():
    for rule, (family, point, why, spares) in RULES.items():
        assert rule.split(".")[0] == point and point in POINTS, rule
        assert family in FAMILIES and why and isinstance(spares, str), rule
    assert {row[0] for row in RULES.values()} == set(FAMILIES)  # no family without a rule that finds it


def test_every_rule_id_the_screens_emit_is_in_the_table():
    emitted = {m for path in SOURCES if path.name != "pesflow_rules.py" for m in RULE_ID.findall(path.read_text())} - FILES
    assert emitted, "the screens emit rule ids"
    assert emitted <= set(RULES), emitted - set(RULES)
    unused = set(RULES) - emitted
    assert not unused, f"rules no screen emits: {sorted(unused)}"


def test_a_finding_takes_its_family_from_its_rule():
    f = Finding(rule="probe.answer_depends_on_asker", evidence="x", screen="probe")
    assert f.family == "knows_who_asks" and f.reason() == "knows_who_asks: x"
    old = Finding(family="timer_replaced", evidence="y", screen="runtime")  # a verdict written before rule ids
    assert old.rule == "" and old.family == "timer_replaced"


def test_one_definition_of_a_python_started_without_site():
    """The static read and the guard ask the same function (pesflow_rules.skips_site): -S alone or
    among other one-letter switches skips site, so the guard's .pth; -I and -E keep site."""
    from evaluator.trust.inside.pesflow_rules import skips_site

    assert all(skips_site(w) for w in ("-S", "-uS", "-IS", "-SBu"))
    assert not any(skips_site(w) for w in ("-I", "-E", "-u", "-IE", "--S", "-Xdev", "-W", "S", "-c", "-m", "", None))
