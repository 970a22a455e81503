"""The adaptation engine behind `sentune adapt` and `sentune.adapt`: adapt an encoder to a user's own text and labels,
select on the selection part of the user's dev set, and keep the unchanged model unless a candidate is shown safe on the
confirmation part (better than the unchanged model, and for search within a margin of BM25 fused with it) and is then
the safe one with the best expected gain (sentune.adaptation.decide).
The Python API's function is sentune.api.adapt.adapt; this package imports nothing heavy."""
