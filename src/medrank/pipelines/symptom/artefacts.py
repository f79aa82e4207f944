"""File names that mark a saved symptom run (read by :func:`medrank.load`)."""

#: written at the end of ``medrank train`` (candidate indexes, calibrated β, k)
DETECTOR_MARKER = "detector.json"
