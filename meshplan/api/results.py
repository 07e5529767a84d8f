"""The base of every front-door result: a frozen value whose fields are its ``--json`` keys.

The protocol itself lives in :mod:`meshplan.models.core.values` (one protocol for every layer): a result is a
:class:`~meshplan.models.core.values.Value` declared with :func:`~meshplan.models.core.values.value`; its
fields are, in order, the keys of the JSON document the matching CLI verb prints with ``--json``
(docs/<verb>.md) and :meth:`Result.to_json` derives that document.  A field declared with
:func:`library_field` holds the library value the result was built from; it is not part of the JSON, of
equality or of the repr.
"""

from __future__ import annotations

from meshplan.models.core.values import Value, freeze, library_field, value

__all__ = ["Result", "library_field", "freeze", "value"]

#: the base class of front-door results (the value protocol's :class:`Value`)
Result = Value
