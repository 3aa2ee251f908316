"""Dataset kinds, one folder each (``paper``, ``market``); ``base.py`` holds the ``DatasetKind``
protocol and the registry that discovers them."""
