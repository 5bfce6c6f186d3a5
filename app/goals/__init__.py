"""Goals: adaptive assignment and the certified stop of a survey."""
