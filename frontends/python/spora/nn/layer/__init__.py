"""The layers of spora.nn, one family per module."""
