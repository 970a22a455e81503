"""sentune: make any BERT-like encoder a better sentence encoder, and measure it honestly."""

__version__ = "0.1.0"
