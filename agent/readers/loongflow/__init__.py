"""LoongFlow traces: read (trace), audited (audit), imported as pesflow run directories (importer)."""
