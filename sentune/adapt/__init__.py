"""`sentune adapt`: adapt an encoder to a user's own unlabelled text, select on the user's dev pairs, and keep the
unchanged model unless a candidate beats it with 95 % confidence (issue 15)."""
