"""Units for the evaluation runner's tests, importable by name in its spawned worker processes.

A spawned worker imports a unit's function by module and name, so these live at module level in a module on the
tests' path (``pythonpath`` in pyproject.toml, which the workers inherit through ``sys.path``).
"""

import threading


class TwoArgError(Exception):
    """An error that pickles but cannot be rebuilt: unpickling calls it with its message alone."""

    def __init__(self, what, code):
        super().__init__(f"{what} (code {code})")
        self.code = code


class LockedError(Exception):
    """An error that does not pickle at all: it holds a lock."""

    def __init__(self, message):
        super().__init__(message)
        self.lock = threading.Lock()


def rows_that_do_not_pickle(i):
    return [{"i": i, "handle": threading.Lock()}]


def raise_two_arg_error(i):
    raise TwoArgError("the unit's own failure", 42)


def raise_locked_error(i):
    raise LockedError("the unit's own failure, holding a lock")
