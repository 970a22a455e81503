"""The core every layer uses: model loading, pooling, encoding, caches, saved-model building, typed
options and results files."""
