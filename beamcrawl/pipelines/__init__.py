"""The round as a Beam pipeline, the crawl loop around it (seeds, lease, launch, commit, summary), and the runners it runs on."""
