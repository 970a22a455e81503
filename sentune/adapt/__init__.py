"""`sentune adapt`: adapt an encoder to a user's own text and labels, select on the selection part of the user's dev
set, and keep the unchanged model unless the selected candidate beats it on the confirmation part (a one-sided paired
permutation test at sentune.tasks.permutation.LEVEL: sentune.adapt.decide)."""

from sentune.core.callable_package import call_through

call_through(__name__, "sentune.api.adapt", "adapt")  # `sentune.adapt(...)` is the Python API even once this package is imported
