"""What is measured on what: the model spec (preset or config.json), its weights, the hardware's peaks and memory,
the memory estimate, the roofline, speculative drafts. Facts and arithmetic; nothing here times anything.
"""
