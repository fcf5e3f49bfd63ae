"""`hakiri diff`: hash bisection of a source against its target (`bisect`), the canonical
text both systems hash (`canon`), and the two places rows are summed (`sides`)."""
