"""Analysis helpers over a crawl's Parquet output, for notebooks and ad-hoc scripts."""
