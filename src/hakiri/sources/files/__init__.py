"""Files sources: csv, json/jsonl and parquet files matched by a glob.

    kind.py           the connector as the rest of hakiri sees it (FILES, a SourceKind)
    needs.py          what a files pipeline needs of the engine (engine_needs)
    source.py         the files source: observe, plan batches, read (FileSource)
    batches.py        batch ids; which files are pending, changed or gone (plan_file_batches)
    inspect.py        match, hash, sniff headers and keys, without a JVM (inspect_files)
    csv_sample.py     the CSV types apply will infer, told by plan from a sample
    reader.py         a batch read with Spark, and its provenance (read_files, FileRead)
    stand_ins.py      links and UTF-8 copies for files an engine cannot take as they are
    part.py           one Spark read of files that share a layout; shared helpers (Part)
    csv_files.py      CSV read as text and typed by hakiri (csv_parts)
    json_files.py     JSON Lines and JSON arrays (json_parts)
    parquet_files.py  Parquet, nanosecond timestamps included (read_parquet)
    malformed.py      on_malformed: what a read left out, and naming the first bad record (Check)

Inspection needs no JVM; the reading modules import pyspark inside their functions only.
"""
