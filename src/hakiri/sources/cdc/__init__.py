"""Change data capture: decoding a database's own change stream into row changes."""
