"""Sources: discover a schema, cut work into batches, read a batch (Spark). Inspection needs no JVM."""
