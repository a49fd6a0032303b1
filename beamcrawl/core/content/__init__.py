"""What a response says: HTML parsing and links, encoding sniffing, sitemaps and feeds, text fingerprints."""
