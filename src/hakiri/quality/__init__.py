"""Data quality: row rules compiled to Spark Columns, dataset validators as SQL probes on staged
rows, and the row-count anomaly check."""
