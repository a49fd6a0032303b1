"""The store's row formats and operations over its tables that both the round's stages and the crawl loop use (frontier, seen set, domains, quarantine, state export)."""
