"""Stand-in for the PyPI package expecttest, which Debian does not package.

torch.testing._internal.common_utils imports it for its TestCase base class and
the ACCEPT flag of assertExpectedInline; generate.py only reads op_db, so an
empty TestCase is enough.  Put on sys.path only by generate.py.
"""

import unittest

ACCEPT = False


class TestCase(unittest.TestCase):
    pass
