"""The adaptation engine behind `sentune adapt` and `sentune.adapt`: adapt an encoder to a user's own text and labels,
select on the selection part of the user's dev set, and keep the unchanged model unless the selected candidate beats it
on the confirmation part (a one-sided paired permutation test at sentune.tasks.permutation.LEVEL: sentune.adaptation.decide).
The Python API's function is sentune.api.adapt.adapt; this package imports nothing heavy."""
