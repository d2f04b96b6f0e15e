"""The golden case catalog: every family module contributes cases().

Case names read "<op>/<dtype>/<variant>"; they are stable identifiers (input
values are derived from them) and what -k PATTERN matches.
"""

from cases import (aliasing, aliasing_index, conversions, creation, elementwise, errors, indexing, linalg, nn,
                   reductions, rng, shapes, storage)

FAMILIES = (creation, elementwise, reductions, linalg, shapes, indexing, nn, conversions, rng, errors, storage,
            aliasing, aliasing_index)


def catalog():
    """All cases by name, in a fixed order."""
    by_name = {}
    for family in FAMILIES:
        for case in family.cases():
            if case.name in by_name or case.name.split() != [case.name]:
                raise ValueError("duplicate golden case name or one with blanks: %r" % case.name)
            by_name[case.name] = case
    return by_name
