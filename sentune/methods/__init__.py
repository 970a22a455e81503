"""Training methods: one file per method (its loss with the paper's formula and citation, its typed
parameters and its data view; see base.py for the contract) and one line in registry.py."""
