"""The lake: topics as Parquet tables beside their segments (docs/ARCHITECTURE.md, "The lake")."""
