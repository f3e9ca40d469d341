"""Fault injection that works on the compiled core too: a method of a compiled class cannot be replaced on
its instance (mypyc makes it read-only), so the tests put a stand-in in the object's place instead."""

from __future__ import annotations


class Failing:
    """Stands for ``target``: every attribute read and written through to it, but ``method`` raises ``error``."""

    def __init__(self, target, method: str, error: BaseException) -> None:
        object.__setattr__(self, "_target", target)
        object.__setattr__(self, "_method", method)
        object.__setattr__(self, "_error", error)

    def __getattr__(self, name):
        if name == self._method:

            def fail(*_args, **_kwargs):
                raise self._error

            return fail
        return getattr(self._target, name)

    def __setattr__(self, name, value) -> None:
        setattr(self._target, name, value)
