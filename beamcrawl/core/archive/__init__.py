"""WARC response and revisit records, their CDXJ index lines, and the spool files records wait in."""
