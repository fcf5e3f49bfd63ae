"""`hakiri sync`: the context store's Delta tables to and from an S3-compatible bucket."""
