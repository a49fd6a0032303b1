"""What a round runs on: the crawl's settings, files on any Beam filesystem, a round's output folders, fault injection, GCP credentials, GC tuning, Prometheus text."""
