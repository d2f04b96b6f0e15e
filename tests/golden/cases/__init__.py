"""The golden case catalog: every family module contributes cases().

Case names read "<op>/<dtype>/<variant>"; they are stable identifiers (input
values are derived from them) and what -k PATTERN matches.
"""

from cases import (aliasing, aliasing_index, conversions, creation, elementwise, errors, foreach, gradients, indexing,
                   linalg, nn, nn_training, reductions, rng, shapes, storage)

FAMILIES = (creation, elementwise, reductions, linalg, shapes, indexing, nn, nn_training, conversions, rng, errors,
            storage, aliasing, aliasing_index, foreach)
# The families whose floating cases get gradient and gradcheck twins (cases/gradients.py): the operators;
# not the factories, the random draws (compared bit-exactly), the error cases or the sweeps.
DIFFERENTIATED = (elementwise, reductions, linalg, shapes, indexing, nn, nn_training, conversions)


def catalog():
    """All cases by name, in a fixed order."""
    by_name = {}
    for family in FAMILIES:
        for case in family.cases():
            _add(by_name, case)
            if family in DIFFERENTIATED:
                for twin in (gradients.twin(case), gradients.gradcheck_twin(case)):
                    if twin:
                        _add(by_name, twin)
    return by_name


def _add(by_name, case):
    if case.name in by_name or case.name.split() != [case.name]:
        raise ValueError("duplicate golden case name or one with blanks: %r" % case.name)
    by_name[case.name] = case
