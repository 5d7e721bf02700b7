"""The configuration helpers CNTK 2.7 exposed in ``cntk.cntk_py``: ``MinibatchSourceConfig``,
``to_dictionary`` and ``DictionaryValue`` (a wrapper some CNTK code puts around configuration
values, as in ``d["cacheIndex"] = DictionaryValue(True)``)."""

from exfeed.cntk.io import MinibatchSourceConfig, to_dictionary


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


__all__ = ["DictionaryValue", "MinibatchSourceConfig", "to_dictionary"]
