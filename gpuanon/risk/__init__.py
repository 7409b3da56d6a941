"""Re-identification risk of a table (SPEC 13)."""
