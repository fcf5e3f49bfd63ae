"""Observations (manifests + catalog + target + source) -> a frozen Plan. No I/O, no JVM."""
