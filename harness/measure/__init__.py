"""From timings to numbers on disk: records per batch and request, metrics as pure functions of them, annotations
of a finished point (token cross-check, roofline, speculative baseline), the CSV writers and the manifest.
"""
