"""The search stage: candidates from the keyword and vector sides, every unit scored as a
calibrated probability, snippets cut around what matched, the response; searching other agents."""
