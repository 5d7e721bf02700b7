"""The helpers CNTK 2.7 exposed in ``cntk.cntk_py`` that reader code uses:
``MinibatchSourceConfig``, ``to_dictionary``, ``DictionaryValue`` (a wrapper some CNTK code puts
around configuration values, as in ``d["cacheIndex"] = DictionaryValue(True)``) and
``are_equal``."""

import numpy as np

from exfeed.cntk.io import MinibatchSourceConfig, Value, to_dictionary


class DictionaryValue:
    """A configuration value wrapped as CNTK's ``DictionaryValue``; exfeed unwraps it."""

    def __init__(self, value):
        self.value = value

    def __eq__(self, other):
        other = other.value if isinstance(other, DictionaryValue) else other
        return self.value == other

    def __hash__(self):
        return hash(self.value)

    def __repr__(self):
        return "DictionaryValue(%r)" % (self.value,)


def _elements(value):
    """A minibatch value's elements as one dense padded array (a copy, when sparse)."""
    if not isinstance(value, Value):
        return np.asarray(value)
    if not value.is_sparse:
        return value.asarray()
    out = np.zeros(value.shape, dtype=np.float32)
    for i, sequence in enumerate(value.as_sequences()):
        out[i, : sequence.shape[0]] = sequence.toarray()
    return out


def are_equal(first, second):
    """Whether two values (a minibatch's ``data.data``, CNTK's ``NDArrayView``, or arrays)
    hold the same elements in the same shape, padding included, dense or sparse."""
    a, b = _elements(first), _elements(second)
    return a.shape == b.shape and bool(np.array_equal(a, b))


__all__ = ["DictionaryValue", "MinibatchSourceConfig", "are_equal", "to_dictionary"]
